"""The paper's personal-agent stream driven live: ``claw simulate --stream gsm8k --user student`` (the
personas and their checks: :mod:`claw_lib.toy.homework`; the problems: :mod:`claw_lib.toy.gsm8k`).

One session per problem of the stream, in the stream's order, ``concurrency`` sessions at once (so the serving
engine decodes them together), each through the official ``openai`` client with upstream's session headers:

1. the user asks for the solution (the same request :func:`~claw_lib.toy.homework.first_request` gives the
   ceiling measurement, so a live session and the ceiling see the same words);
2. the model answers; the persona's deterministic check reads the reply (Reef's acceptance of the first reply);
3. not accepted: the user's complaint (natural words, never a number) is the next main-line turn, whose answer is
   read again, up to ``max_turns`` answers; accepted: the user's thanks ends the session (``X-Session-Done``): it
   is the accepted reply's next state.

Measured per session: the first reply accepted and correct (the gold answer is its final number), its tokens and
the policy version that wrote it. The run's ``sessions_to_adaptation``: sessions served before three first replies
in a row were accepted (:func:`~claw_lib.serve.simulate.sessions_until_stable`, k = 3); never: the stream's
length + 1, said so.
"""
from __future__ import annotations

import argparse
import json
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Callable, List, Optional, Sequence

from ..config import GSM8K_SPLITS, HOMEWORK_PERSONAS
from ..toy.gsm8k import Problem, is_correct, load_split, read_gsm8k
from ..toy.homework import HOMEWORK_LANGS, first_request, preference
from ..utils import check_new_file, check_real
from .simulate import STABLE_K, _Driver, _write_rows, normalise_url, sessions_until_stable

__all__ = ["HomeworkRow", "HomeworkResult", "simulate_homework", "stream_problems", "add_arguments",
           "run_from_args", "MAX_TURNS"]

#: the cap on the answer to a session's closing message (the thanks or the last complaint): nobody reads it, and a
#: real model's full answer would cost as much as a solution
CLOSING_MAX_TOKENS = 1
#: answers per session before the user gives up (upstream's student phase allows 8 turns)
MAX_TURNS = 8


@dataclass
class HomeworkRow:
    """One session of the stream. first_accepted / first_correct: the persona's verdict on the first reply and
    whether its final number is the gold answer; first_tokens: that reply's completion tokens; first_version: the
    policy version that wrote it; answers: answers served (first included); accepted_at: the 0-based answer the
    persona accepted (None: none within ``max_turns``); first_reply: its text; waited_s: seconds waited after the
    session for the server to judge and train (``wait_trained``)."""

    session: int
    session_id: str
    problem: int
    persona: str
    lang: str
    first_accepted: bool
    first_correct: bool
    first_tokens: int
    first_version: Optional[int]
    answers: int
    accepted_at: Optional[int]
    seconds: float
    first_reply: str = ""
    versions: List[Optional[int]] = field(default_factory=list)
    waited_s: float = 0.0


@dataclass
class HomeworkResult:
    """A stream run: its settings, one row per session (stream order) and ``sessions_to_adaptation`` (None: never
    within the stream; counted as the stream's length + 1)."""

    url: str
    persona: str
    lang: str
    model: str
    rows: List[HomeworkRow] = field(default_factory=list)
    sessions_to_adaptation: Optional[int] = None
    seconds: float = 0.0

    @property
    def counted(self) -> int:
        """Sessions to adaptation, a run that never adapted counted as the stream's length + 1."""
        return len(self.rows) + 1 if self.sessions_to_adaptation is None else self.sessions_to_adaptation

    def summary(self) -> str:
        n, s = len(self.rows), self.sessions_to_adaptation
        head = (f"sessions until {STABLE_K} first replies in a row are accepted: "
                + (f"never within {n} sessions (counted as {n + 1})" if s is None else str(s)))
        acc = sum(r.first_accepted for r in self.rows)
        cor = sum(r.first_correct for r in self.rows)
        return "\n".join([f"claw simulate: persona {self.persona} ({self.lang}), {n} sessions, model {self.model}",
                          head, f"first replies accepted {acc}/{n}, correct {cor}/{n}",
                          f"wall time {self.seconds:.1f} s"])

    def rows_jsonl(self) -> str:
        return "".join(json.dumps({**asdict(r), "sessions_to_adaptation": self.sessions_to_adaptation},
                                  ensure_ascii=False) + "\n" for r in self.rows)


def stream_problems(split: str = "stream", gsm8k=None, problems_file=None) -> List[Problem]:
    """The problems of a run: every record of ``problems_file`` in its order (a GSM8K-shaped file; the tests use
    ``data/gsm8k/sample.jsonl``), or the kit's ``split`` of the user's GSM8K file (``gsm8k``; None: $CLAW_GSM8K)."""
    if problems_file is not None:
        return [Problem(i, q, g, s) for i, (q, g, s) in enumerate(read_gsm8k(problems_file))]
    return load_split(split, gsm8k)


def _session(drv: _Driver, problem: Problem, index: int, session_id: str, persona: str, lang: str, seed: int,
             max_turns: int, prompted: bool = False) -> HomeworkRow:
    """One session (module docstring); the user's last message is sent with ``X-Session-Done``. ``prompted``: the
    persona's preference as a system prompt before the request (the prompt-only control)."""
    t0 = time.monotonic()
    user, msgs = first_request(persona, lang, problem, seed)
    if prompted:
        msgs = [{"role": "system", "content": preference(persona, lang)}] + msgs
    where = f"session {index + 1} ({session_id}, GSM8K problem {problem.index})"
    first, versions, accepted_at = None, [], None
    for k in range(max_turns):
        r = drv.completion(msgs, session_id, "main", False, where)
        reply = r.choices[0].message.content or ""
        version = ((r.model_extra or {}).get("claw") or {}).get("policy_version")
        versions.append(version)
        reaction = user.react(problem, reply)
        if first is None:
            first = (reply, reaction.accepted, (r.usage.completion_tokens if r.usage else 0), version)
        msgs = msgs + [{"role": "assistant", "content": reply}, {"role": "user", "content": reaction.text}]
        if reaction.done:
            accepted_at = k
            break
    # thanks, or the last complaint: the session ends; its answer is never read, so it is cut at one token
    drv.completion(msgs, session_id, "main", True, where, max_tokens=CLOSING_MAX_TOKENS)
    reply, accepted, tokens, version = first
    return HomeworkRow(index, session_id, problem.index, persona, lang, accepted, is_correct(reply, problem.gold),
                       int(tokens), version, len(versions), accepted_at, time.monotonic() - t0, reply, versions)


def simulate_homework(url: str, problems: Sequence[Problem], persona: str = "student", lang: str = "en",
                      seed: int = 0, concurrency: int = 1, max_turns: int = MAX_TURNS, model: Optional[str] = None,
                      temperature: Optional[float] = None, max_tokens: Optional[int] = None, timeout: float = 600.0,
                      session_prefix: Optional[str] = None,
                      on_session: Optional[Callable[[HomeworkRow], None]] = None, prompted: bool = False,
                      done: Sequence[HomeworkRow] = (), wait_trained: float = 0.0,
                      retry_tag: Optional[str] = None) -> HomeworkResult:
    """Drive the server at ``url`` with one session per problem (module docstring), ``concurrency`` at once.
    ``prompted``: the preference as a system prompt (the prompt-only control); ``done``: sessions of an earlier,
    interrupted run of the same stream (kept, not run again; resume with the same ``session_prefix``);
    ``retry_tag``: appended to the session ids this call runs (``PREFIX-0007.TAG``), so that a resumed run never
    reuses the id of a session the kill cut off (the server may hold it half-done, or finished before its row was
    written: a main-line turn for it would join the old transcript or be refused with 409);
    ``wait_trained``: after each session wait at most this many seconds until a claw server has judged every turn
    and trained every full batch (0: never wait), so that on a slow CPU updates land between sessions instead of
    after the stream (with ``concurrency`` > 1 the next sessions start when every worker is waiting and the server is
    idle).
    ValueError (one line) for a bad setting, an unreachable server or one that answers an error."""
    if persona not in HOMEWORK_PERSONAS:
        raise ValueError(f"--user for the gsm8k stream must be one of {HOMEWORK_PERSONAS}, got {persona!r}")
    if lang not in HOMEWORK_LANGS:
        raise ValueError(f"--lang must be one of {HOMEWORK_LANGS}, got {lang!r}")
    check_real("concurrency", concurrency, lo=1, hi=256, integer=True)
    check_real("max_turns", max_turns, lo=1, hi=64, integer=True)
    check_real("wait_trained", wait_trained, lo=0.0)
    if not problems:
        raise ValueError("the stream has no problems")
    drv = _Driver(normalise_url(url), model, timeout, temperature, max_tokens)
    prefix = session_prefix or f"hw-{persona}-s{seed}-{uuid.uuid4().hex[:6]}"
    res = HomeworkResult(drv.url, persona, lang, drv.model)
    t0 = time.monotonic()

    def one(n: int) -> HomeworkRow:
        sid = f"{prefix}-{n:04d}" + (f".{retry_tag}" if retry_tag else "")
        row = _session(drv, problems[n], n, sid, persona, lang, seed, max_turns, prompted)
        if wait_trained > 0 and drv.claw:
            row.waited_s = round(drv.wait_idle(wait_trained, poll_s=0.5)[0], 2)
        if on_session is not None:
            on_session(row)
        return row

    kept = {r.session: r for r in done if r.session < len(problems)}
    try:
        with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="claw-student") as pool:
            todo = [n for n in range(len(problems)) if n not in kept]
            new = dict(zip(todo, pool.map(one, todo)))
        res.rows = [kept.get(n) or new[n] for n in range(len(problems))]  # stream order, whatever order they finished
    finally:
        drv.close()
        res.seconds = time.monotonic() - t0
    res.sessions_to_adaptation = sessions_until_stable([r.first_accepted for r in res.rows])
    return res


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags the gsm8k stream adds to ``claw simulate`` (read only with ``--stream gsm8k``)."""
    parser.add_argument("--stream", choices=("fact", "gsm8k"), default="fact",
                        help="fact: the fact-world users (default); gsm8k: the personal-agent stream, one session per "
                             f"GSM8K problem, --user one of {', '.join(HOMEWORK_PERSONAS)}")
    parser.add_argument("--split", choices=GSM8K_SPLITS, default="stream",
                        help="the kit's split of GSM8K for --stream gsm8k (default stream: upstream's 36)")
    parser.add_argument("--gsm8k", default=None, metavar="FILE",
                        help="GSM8K's test.jsonl (default: $CLAW_GSM8K); the kit ships the split, not the problems")
    parser.add_argument("--problems", default=None, metavar="FILE.jsonl",
                        help="every problem of a GSM8K-shaped file, in its order, instead of --split")
    parser.add_argument("--lang", choices=HOMEWORK_LANGS, default="en", help="the persona's language (default en)")
    parser.add_argument("--concurrency", type=int, default=4,
                        help="sessions at once (default 4; the serving engine decodes them together)")
    parser.add_argument("--prompted", action="store_true",
                        help="the persona's preference as a system prompt before each session (the prompt-only "
                             "control)")
    parser.add_argument("--resume", action="store_true",
                        help="keep the sessions already in --out and run the others (the same command goes on after "
                             "a kill); each session is appended to --out as it ends")
    parser.add_argument("--max-turns", type=int, default=MAX_TURNS,
                        help=f"answers per session before the user gives up (default {MAX_TURNS}, as upstream)")


def _resumed(path, persona: str, lang: str, prefix: Optional[str]) -> tuple:
    """The finished sessions in ``path`` (the journal of an interrupted run) and the session prefix to go on with:
    ``([HomeworkRow], prefix)``. ValueError (one line) for a file of another persona, language or prefix."""
    names = {f.name for f in fields(HomeworkRow)}
    try:
        rows = [HomeworkRow(**{k: v for k, v in json.loads(line).items() if k in names})
                for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    except (ValueError, TypeError) as e:
        raise ValueError(f"--resume: {path} is not a file of claw simulate --stream gsm8k sessions ({e})") from None
    kinds = {(r.persona, r.lang) for r in rows}
    if kinds - {(persona, lang)}:
        raise ValueError(f"--resume: {path} holds sessions of {sorted(kinds)}, not of --user {persona} --lang {lang}")
    found = {r.session_id.rsplit("-", 1)[0] for r in rows}
    if len(found) > 1 or (prefix is not None and found - {prefix}):
        raise ValueError(f"--resume: {path} holds sessions of prefix {sorted(found)}, not {prefix!r}")
    return rows, (prefix or next(iter(found), None))


def run_from_args(a) -> int:
    """``claw simulate --stream gsm8k``: the stream run, its summary, ``--out`` (one JSON line per session). With
    ``--resume``, the sessions already in ``--out`` are kept and the others run (the same command goes on after a
    kill); each finished session is appended to ``--out`` as it ends, and the file is rewritten in stream order at
    the end."""
    done, prefix, retry = [], a.session_prefix, None
    if a.resume and a.out is not None and Path(a.out).is_file():
        done, prefix = _resumed(a.out, a.user, a.lang, prefix)  # None: simulate_homework draws one
        retry = f"r{uuid.uuid4().hex[:4]}"  # the sessions run now get fresh ids (simulate_homework's retry_tag)
    else:
        out = check_new_file(a.out, a.force) if a.out is not None else None
        if a.resume and out is not None:
            out.write_text("", encoding="utf-8")  # the journal the sessions are appended to
    problems = stream_problems(a.split, a.gsm8k, a.problems)
    if a.sessions is not None:
        problems = problems[:a.sessions]
    lock = threading.Lock()

    def journal(row: HomeworkRow) -> None:
        with lock, open(a.out, "a", encoding="utf-8") as f:
            f.write(json.dumps(asdict(row), ensure_ascii=False) + "\n")

    res = simulate_homework(a.url, problems, a.user, a.lang, a.seed, a.concurrency, a.max_turns, a.model,
                            a.temperature, a.max_tokens, a.timeout, prefix,
                            on_session=journal if a.resume and a.out is not None else None, prompted=a.prompted,
                            done=done, wait_trained=a.wait_trained, retry_tag=retry)
    print(res.summary())
    if a.out is not None:
        _write_rows(a.out, res.rows_jsonl(), a.force or a.resume)
        print(f"per-session rows: {a.out}")
    return 0
