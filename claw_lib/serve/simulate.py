"""``claw simulate``: the kit's simulated users talk to a live server through the official ``openai`` client
(notebook 14, docs/serve.md).

A session asks ``turns`` questions of the toy world (:func:`claw_lib.toy.envs.make_env`). Each question is one
main-line turn, sent as the bare question text (the server formats prompts itself); the user's reply to the answer
(:class:`~claw_lib.toy.users.Feedback` ``.next_state``) is the next main-line turn, so the server records it as the
next state of that answer and trains on it; the model answers the reply too, and the next question follows (it is
the next state of that answer). The last message of a session is the reply to the last answer, sent with
``X-Session-Done: true``: it is answered, and, as upstream, that last turn yields no sample::

    main  q1            -> a1      user.reply(q1, a1) = Feedback(next_state=r1, score=s1)
    main  r1            -> b1      (r1 is the next state of a1)
    main  q2            -> a2      (q2 is the next state of b1)
    ...
    main  rk  + done    -> bk      (rk is the next state of ak; bk: no sample)

A session **holds** when the user's score is 1 on every question of it. The report is the paper's second-version
metric counted in sessions (:func:`sessions_until_stable`): the 0-based index of the first session of the first run of
:data:`STABLE_K` holding sessions, i.e. the number of sessions served before the preference held for good (0: it held
from the first session; None: never within the run).

Reproducibility (``wait_trained``, CLI ``--wait-trained SECONDS``, on by default): the server judges and trains in the
background, so without waiting the version that serves session n depends on how fast the machine is. With it, after
each session the simulator polls ``GET /v1/claw/status`` until every main turn is judged (``samples_pending`` 0) and no
full batch is waiting for the trainer (``samples_scored < batch_size``, or training is not running), at most
``wait_trained`` seconds; the next session then meets the policy that the previous sessions' feedback produced, as a
user who comes back a minute later would. ``wait_trained=0`` drives the server as fast as it answers (the
asynchronous regime of the benchmark). A server without ``/v1/claw/status`` (any other OpenAI-compatible server) is
driven without waiting.
"""
from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, List, Optional, Sequence
from urllib.parse import urlsplit

import numpy as np

from ..config import HOMEWORK_PERSONAS, TaskConfig
from ..toy.envs import make_env
from ..utils import atomic_write, check_new_file, check_real

__all__ = ["USERS", "STABLE_K", "SessionRow", "SimulationResult", "simulate", "sessions_until_stable",
           "counted_sessions", "normalise_url", "add_arguments", "run_from_args", "server_idle",
           "poll_until_idle"]

#: the simulated users ``claw simulate`` drives (claw_lib.toy.users)
USERS = ("teacher", "student", "ta", "correcting")
#: "holds k sessions in a row" (the paper's second version: three; claw_lib.rl.ablation.STABLE_K)
STABLE_K = 3
#: retries of a chat request the server could not take (503: upstream's "submission paused for weight update",
#: 429, 502, 504) or that found no server (a restart after ``kill -9``: 10-15 s on a 2-core laptop), with backoff
#: 0.5, 1, 2, 4, 8, 8, ... s for at most RETRY_BUDGET_S seconds in all. A retried main turn is answered from the
#: server's records when its first try was recorded (the server treats the same messages as a retry).
RETRY_BUDGET_S, RETRY_STATUS = 90.0, (429, 502, 503, 504)
#: what a side turn asks (served, never trained on): the kind of bookkeeping call an agent makes beside the chat
SIDE_PROMPT = {"zh": "用五个字概括这段对话。", "en": "Summarise this conversation in five words."}


def sessions_until_stable(holds: Sequence[bool], k: int = STABLE_K) -> Optional[int]:
    """The 0-based index of the first session of the first run of ``k`` holding sessions in a row (the number of
    sessions served before the preference held for good); None if no such run occurs in ``holds``."""
    check_real("k", k, lo=1, integer=True)
    holds = list(holds)
    bad = next((h for h in holds if not isinstance(h, (bool, np.bool_))), None)
    if bad is not None:  # a per-session score or "no" would count as a holding session (R4-21)
        raise TypeError(f"holds must be booleans (did the preference hold in each session?), got {bad!r}")
    run = 0
    for i, h in enumerate(holds):
        run = run + 1 if h else 0
        if run == k:
            return i - k + 1
    return None


def counted_sessions(value: Optional[int], n_sessions: int) -> int:
    """``value`` of :func:`sessions_until_stable`, with a run that never got there counted at its length
    ``n_sessions`` (a lower bound on the true number, as the ablation tables count "never")."""
    check_real("n_sessions", n_sessions, lo=1, integer=True)
    if value is not None:
        check_real("value", value, lo=0, integer=True)
    return n_sessions if value is None else value


def normalise_url(url: str) -> str:
    """The server's root URL ("http://127.0.0.1:8000"): a trailing "/" or "/v1" is dropped. ValueError (one line)
    unless it is an http(s) URL with a host."""
    u = (url or "").strip()
    parts = urlsplit(u)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"--url must be an http(s) URL of the server such as http://127.0.0.1:8000, got {url!r}")
    try:
        parts.port
    except ValueError:
        raise ValueError(f"--url {url!r} has a bad port") from None
    u = u.rstrip("/")
    if u.endswith("/v1"):
        u = u[:-3]
    return u


@dataclass
class SessionRow:
    """One simulated session. scores: the user's score in [0, 1] of each question's answer; holds: every score is 1;
    first_holds: the first answer's score is 1 (the paper's second version judges the first reply of a session);
    versions: the policy version that served each main turn (question and reply turns, in order; None where the
    server does not say); seconds: wall time of the session's requests; waited_s: time spent waiting for the
    server's judge and trainer after it (``wait_timed_out``: the bound ran out first); request_s: the seconds each
    request took, in the order sent (main and side turns)."""

    session: int
    session_id: str
    user: str
    questions: List[str]
    answers: List[str]
    replies: List[str]
    scores: List[float]
    holds: bool
    first_holds: bool
    mean_score: float
    versions: List[Optional[int]]
    side_turns: int
    seconds: float
    waited_s: float = 0.0
    wait_timed_out: bool = False
    request_s: List[float] = field(default_factory=list)


@dataclass
class SimulationResult:
    """A run of :func:`simulate`: its settings, one :class:`SessionRow` per session, and
    ``sessions_to_stable`` (:func:`sessions_until_stable` over the rows' ``holds``; None: never)."""

    url: str
    user: str
    sessions: int
    turns: int
    seed: int
    model: str
    rows: List[SessionRow] = field(default_factory=list)
    sessions_to_stable: Optional[int] = None
    seconds: float = 0.0

    @property
    def holds(self) -> List[bool]:
        return [r.holds for r in self.rows]

    def summary(self) -> str:
        """Lines for a person: the metric (never reached: counted at the run length, and said so), the share of
        holding sessions, the mean score, the policy versions seen, the wall time."""
        n = len(self.rows)
        s = self.sessions_to_stable
        if s is None:
            head = (f"sessions until the preference holds {STABLE_K} sessions in a row: never within {n} sessions "
                    f"(counted as {counted_sessions(s, n)})")
        else:
            head = f"sessions until the preference holds {STABLE_K} sessions in a row: {s} (sessions {s + 1}-{s + STABLE_K} hold)"
        vs = [v for r in self.rows for v in r.versions if v is not None]
        mean = sum(r.mean_score for r in self.rows) / max(n, 1)
        return "\n".join([
            f"claw simulate: user {self.user}, {n} sessions x {self.turns} questions, seed {self.seed}, model {self.model}",
            head,
            f"sessions that hold: {sum(self.holds)}/{n}; first answer holds: {sum(r.first_holds for r in self.rows)}/{n}; "
            f"mean score {mean:.3f}",
            f"policy versions served: {min(vs)}..{max(vs)}" if vs else "policy versions served: not reported by the server",
            f"wall time {self.seconds:.1f} s ({60.0 * n / max(self.seconds, 1e-9):.1f} sessions/min)",
        ])

    def rows_jsonl(self) -> str:
        """One JSON line per session (Chinese kept readable), each with the run's seed and the metric."""
        out = []
        for r in self.rows:
            d = asdict(r)
            d.update(seed=self.seed, turns=self.turns, sessions_to_stable=self.sessions_to_stable)
            out.append(json.dumps(d, ensure_ascii=False))
        return "".join(line + "\n" for line in out)


def server_idle(status: dict) -> bool:
    """Whether a claw server's ``GET /v1/claw/status`` says nothing is left to do before the next session: every main
    turn that has its next state judged (``samples_judging`` 0; ``samples_pending`` 0 on a server without that field),
    no update running (``updating``, when the server reports it), and no full
    batch waiting for the trainer (``samples_scored < batch_size``, or training is not ``"running"``)."""
    if status.get("samples_judging", status.get("samples_pending", 0)) or status.get("updating"):
        return False
    return status.get("training") != "running" or status.get("samples_scored", 0) < max(1, status.get("batch_size") or 1)


def poll_until_idle(read_status: Callable[[], Optional[dict]], bound_s: float, poll_s: float):
    """Call ``read_status`` every ``poll_s`` seconds until it says the server is idle (:func:`server_idle`) or has no
    claw status (None), at most ``bound_s`` seconds: (the last status, seconds waited, whether the bound ran out)."""
    t0 = time.monotonic()
    while True:
        st = read_status()
        if st is None or server_idle(st):
            return st, time.monotonic() - t0, False
        if time.monotonic() - t0 >= bound_s:
            return st, time.monotonic() - t0, True
        time.sleep(poll_s)


class _Driver:
    """The HTTP side of a run: the ``openai`` client for chat, plain GETs for the claw status."""

    def __init__(self, url: str, model: Optional[str], timeout: float, temperature: Optional[float],
                 max_tokens: Optional[int]):
        import httpx  # lazy: openai and httpx (seconds to import) load only when a run starts
        import openai  # lazy: as above

        self.url, self.openai = url, openai
        self.retry_budget_s = RETRY_BUDGET_S
        # retries are ours (:meth:`chat`): the client's own would also retry a 409 (a finished session) with backoff
        self.client = openai.OpenAI(base_url=url + "/v1", api_key="none", timeout=timeout, max_retries=0)
        self.http = httpx.Client(timeout=timeout)
        self.opts = {k: v for k, v in (("temperature", temperature), ("max_tokens", max_tokens)) if v is not None}
        try:
            ids = [m.id for m in self.client.models.list().data]
        except openai.APIConnectionError as e:
            self.close()
            raise ValueError(f"cannot reach a server at {url} ({_cause(e)}); start one with `claw serve` "
                             "or check --url") from None
        except openai.APIStatusError as e:
            self.close()
            raise ValueError(f"{url}/v1/models answered HTTP {e.status_code}: not an OpenAI-compatible server") from None
        if model is not None and ids and model not in ids:
            self.close()
            raise ValueError(f"--model {model!r} is not served at {url} (it serves {ids})")
        if model is None and not ids:
            self.close()
            raise ValueError(f"{url}/v1/models lists no model; pass --model")
        self.model = model or ids[0]
        self.claw = self.status() is not None

    def status(self) -> Optional[dict]:
        """The claw status, or None when the server has none (another OpenAI-compatible server)."""
        try:
            r = self.http.get(self.url + "/v1/claw/status")
        except Exception:  # noqa: BLE001 - a status that cannot be read is a server without one
            return None
        return r.json() if r.status_code == 200 else None

    def chat(self, messages: List[dict], session_id: str, turn_type: str, done: bool, where: str):
        """One chat completion with upstream's session headers; returns (text, the answer's "claw" dict, seconds the
        request took)."""
        t0 = time.perf_counter()
        r = self.completion(messages, session_id, turn_type, done, where)
        return r.choices[0].message.content or "", (r.model_extra or {}).get("claw") or {}, time.perf_counter() - t0

    def completion(self, messages: List[dict], session_id: str, turn_type: str, done: bool, where: str,
                   max_tokens: Optional[int] = None):
        """The ``openai`` client's ChatCompletion for one request with upstream's session headers, retried (module
        constants) while the server is away or busy; ValueError (one line) when it gives up or answers an error.
        ``max_tokens``: this request's cap instead of the run's (the answer to a closing message nobody reads)."""
        opts = self.opts if max_tokens is None else {**self.opts, "max_tokens": max_tokens}
        headers = {"X-Session-Id": session_id, "X-Turn-Type": turn_type, "X-Session-Done": "true" if done else "false"}
        t0 = time.perf_counter()
        for attempt in itertools.count():
            last = time.perf_counter() - t0 >= self.retry_budget_s
            try:
                r = self.client.chat.completions.create(model=self.model, messages=messages, extra_headers=headers,
                                                        **opts)
                break
            except self.openai.APITimeoutError:
                raise ValueError(f"the server at {self.url} did not answer within the timeout in {where}") from None
            except self.openai.APIConnectionError as e:
                if last:
                    raise ValueError(f"lost the server at {self.url} in {where}: gave up after retrying for "
                                     f"{time.perf_counter() - t0:.0f} s ({_cause(e)})") from None
            except self.openai.APIStatusError as e:
                if e.status_code not in RETRY_STATUS or last:
                    raise ValueError(f"the server answered HTTP {e.status_code} in {where}: {_message(e)}") from None
            time.sleep(min(8.0, 0.5 * 2 ** attempt))
        return r

    def wait_idle(self, bound_s: float, poll_s: float = 0.05):
        """Poll the status until :func:`server_idle`, at most ``bound_s`` seconds; returns (seconds waited,
        whether the bound ran out)."""
        return poll_until_idle(self.status, bound_s, poll_s)[1:]

    def close(self) -> None:
        self.http.close()
        self.client.close()


def _cause(e: Exception) -> str:
    c = e.__cause__ or e.__context__
    return (str(c) or type(c).__name__).splitlines()[0] if c else (str(e).splitlines() or ["connection error"])[0]


def _message(e) -> str:
    body = getattr(e, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        msg = err.get("message") if isinstance(err, dict) else str(err)
        if msg:
            return str(msg).splitlines()[0]
    return (str(e).splitlines() or [""])[0]


def _run_session(drv: _Driver, env, index: int, session_id: str, turns: int, side_turns: int,
                 settle=None) -> SessionRow:
    """One session of ``turns`` questions (module docstring): question, answer, reply as the next main turn, its
    answer; ``side_turns`` side calls after each answer to a question (served, never trained); the last reply sent
    with ``X-Session-Done``. ``settle``: called after every main-line turn (the wait of ``wait_each_turn``)."""
    settle = settle or (lambda: None)
    t0 = time.monotonic()
    tasks = env.sample(turns)
    msgs, qs, answers, replies, scores, versions, lat = [], [], [], [], [], [], []
    where = f"session {index + 1} ({session_id})"
    for i, task in enumerate(tasks):
        q = task.fact.question()
        msgs.append({"role": "user", "content": q})
        a, claw, dt = drv.chat(msgs, session_id, "main", False, where)
        versions.append(claw.get("policy_version")), lat.append(dt)
        settle()
        msgs.append({"role": "assistant", "content": a})
        for _ in range(side_turns):
            lat.append(drv.chat(msgs + [{"role": "user", "content": SIDE_PROMPT[task.fact.lang]}], session_id, "side",
                                False, where)[2])
        fb = env.step(task, a)
        msgs.append({"role": fb.role, "content": fb.next_state})
        b, claw, dt = drv.chat(msgs, session_id, "main", i == turns - 1, where)
        versions.append(claw.get("policy_version")), lat.append(dt)
        settle()
        msgs.append({"role": "assistant", "content": b})
        qs.append(q), answers.append(a), replies.append(fb.next_state), scores.append(float(fb.score))
    return SessionRow(session=index, session_id=session_id, user=env.user.name, questions=qs, answers=answers,
                      replies=replies, scores=scores, holds=all(s >= 1.0 for s in scores),
                      first_holds=scores[0] >= 1.0, mean_score=sum(scores) / len(scores), versions=versions,
                      side_turns=side_turns * turns, seconds=time.monotonic() - t0, request_s=lat)


def _check_settings(user: str, sessions: int, turns: int, seed: int, wait_trained: float, side_turns: int) -> None:
    if user not in USERS:
        raise ValueError(f"--user must be one of {', '.join(USERS)}, got {user!r}")
    for name, v, lo in (("--sessions", sessions, 1), ("--turns", turns, 1), ("--seed", seed, 0),
                        ("--side-turns", side_turns, 0)):
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")
    if not (isinstance(wait_trained, (int, float)) and math.isfinite(wait_trained) and wait_trained >= 0):
        raise ValueError(f"--wait-trained must be a number of seconds >= 0, got {wait_trained!r}")


def simulate(url: str, user: str = "teacher", sessions: int = 40, turns: int = 3, seed: int = 0,
             model: Optional[str] = None, wait_trained: float = 120.0, side_turns: int = 0,
             temperature: Optional[float] = None, max_tokens: Optional[int] = None, timeout: float = 120.0,
             session_prefix: Optional[str] = None, progress: bool = False,
             on_session: Optional[Callable[[SessionRow], None]] = None, wait_each_turn: bool = False) -> SimulationResult:
    """Drive the server at ``url`` (its root, "http://127.0.0.1:8000") with ``sessions`` sessions of the simulated
    ``user`` ("teacher", "student", "ta", "correcting"), ``turns`` questions each, questions and replies
    deterministic from ``seed`` (the same seed asks the same questions of two servers: paired runs).

    model: the model id to ask for (default: the first of ``GET /v1/models``); wait_trained: at most this many
    seconds after each session waiting for the server's judge and trainer (module docstring; 0: never wait);
    side_turns: side calls after each answer to a question (same session id, ``X-Turn-Type: side``);
    temperature / max_tokens: sent when given (else the server's defaults); timeout: seconds per request;
    session_prefix: session ids are ``<prefix>-0000``, ... (default ``sim-<user>-s<seed>-<random 6 hex>``: a
    server refuses a finished session's id, so each run gets fresh ones); progress: a tqdm bar over sessions;
    on_session: called with each finished row; wait_each_turn: wait (as after a session, at most ``wait_trained``
    seconds) after every main-line turn too, so that no update lands between a batch filling and the next request:
    the run is then exactly reproducible (the judge and the trainer still run in their own threads, but one step at
    a time). ValueError (one line) for a bad setting or URL, a server that
    cannot be reached or answers an error."""
    from tqdm.auto import tqdm  # lazy: tqdm.auto looks for a notebook (IPython)

    _check_settings(user, sessions, turns, seed, wait_trained, side_turns)
    if session_prefix is not None and not (0 < len(session_prefix.strip()) <= 180):
        raise ValueError(f"--session-prefix must be 1 to 180 characters, got {session_prefix!r}")
    url = normalise_url(url)
    drv = _Driver(url, model, timeout, temperature, max_tokens)
    prefix = session_prefix or f"sim-{user}-s{seed}-{uuid.uuid4().hex[:6]}"
    env = make_env(TaskConfig(user=user), seed=seed)
    res = SimulationResult(url=url, user=user, sessions=sessions, turns=turns, seed=seed, model=drv.model)
    t0 = time.monotonic()
    try:
        with tqdm(total=sessions, desc=f"simulate {user}", unit="session", disable=not progress) as bar:
            for n in range(sessions):
                settle = (lambda: drv.wait_idle(wait_trained)) if wait_each_turn and wait_trained > 0 and drv.claw else None
                row = _run_session(drv, env, n, f"{prefix}-{n:04d}", turns, side_turns, settle)
                if wait_trained > 0 and drv.claw:
                    row.waited_s, row.wait_timed_out = drv.wait_idle(wait_trained)
                res.rows.append(row)
                if on_session is not None:
                    on_session(row)
                bar.set_postfix(holds=f"{sum(res.holds)}/{n + 1}", version=row.versions[-1])
                bar.update(1)
    finally:
        drv.close()
        res.seconds = time.monotonic() - t0
        res.sessions_to_stable = sessions_until_stable(res.holds)
    return res


def _number(kind: type, lo: float, hi: float) -> Callable:
    """An argparse type: a finite ``kind`` (int or float) in [lo, hi]."""
    def parse(text: str):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, got {text!r}")
        if not (math.isfinite(v) and lo <= v <= hi):
            raise argparse.ArgumentTypeError(f"must be in [{lo}, {hi}], got {text}")
        return v
    return parse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``claw simulate`` (claw_lib/apps/serve_cli.py registers the command)."""
    parser.add_argument("--url", required=True, help="the server's root URL, e.g. http://127.0.0.1:8000 (a trailing /v1 is fine)")
    parser.add_argument("--user", choices=USERS + tuple(p for p in HOMEWORK_PERSONAS if p not in USERS),
                        default="teacher", help=f"the simulated user (default teacher); with --stream gsm8k one of "
                                                f"{', '.join(HOMEWORK_PERSONAS)}")
    parser.add_argument("--sessions", type=_number(int, 1, 100000), default=None,
                        help="sessions to run (default 40; with --stream gsm8k: every problem of the split)")
    parser.add_argument("--turns", type=_number(int, 1, 100), default=3, help="questions per session (default 3)")
    parser.add_argument("--seed", type=_number(int, 0, 2**31 - 1), default=0,
                        help="seed of the questions and the user's replies (default 0; same seed: same questions)")
    parser.add_argument("--model", default=None, help="model id to ask for (default: the first the server lists)")
    parser.add_argument("--wait-trained", type=_number(float, 0.0, 3600.0), default=120.0, metavar="SECONDS",
                        help="after each session wait at most this long until the server has judged every turn and "
                             "trained every full batch, so the next session meets the updated policy (default 120; "
                             "0: never wait, drive the server as fast as it answers)")
    parser.add_argument("--wait-each-turn", action="store_true",
                        help="also wait after every main-line turn (at most --wait-trained seconds): an exactly "
                             "reproducible run, one step at a time")
    parser.add_argument("--side-turns", type=_number(int, 0, 10), default=0,
                        help="side calls after each answer (served, never trained on; default 0)")
    parser.add_argument("--temperature", type=_number(float, 0.0, 2.0), default=None,
                        help="sampling temperature to send (default: the server's)")
    parser.add_argument("--max-tokens", type=_number(int, 1, 4096), default=None, help="max_tokens to send")
    parser.add_argument("--session-prefix", default=None, metavar="TEXT",
                        help="session ids are TEXT-0000, TEXT-0001, ... (default sim-<user>-s<seed>-<random>; a server "
                             "refuses a finished session's id)")
    parser.add_argument("--timeout", type=_number(float, 0.1, 3600.0), default=120.0,
                        help="seconds per request (default 120)")
    parser.add_argument("--out", type=Path, default=None, metavar="FILE.jsonl",
                        help="also write one JSON line per session here (refused if it exists)")
    parser.add_argument("--force", action="store_true", help="replace --out if it exists")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def _write_rows(path, text: str, force: bool) -> None:
    with atomic_write(path, replace=force) as f:
        f.write(text)


def run_from_args(args: argparse.Namespace) -> int:
    """``claw simulate``: run :func:`simulate` with the parsed flags, print the summary, write ``--out``. Returns 0;
    ValueError (one line) for a bad URL or setting, an unreachable server, an existing ``--out`` without
    ``--force``. Interrupted (Ctrl-C or a lost server), the sessions that finished are still written to ``--out``."""
    out = check_new_file(args.out, args.force) if args.out is not None else None
    done: List[SessionRow] = []
    kw = dict(user=args.user, sessions=40 if args.sessions is None else args.sessions, turns=args.turns, seed=args.seed, model=args.model,
              wait_trained=args.wait_trained, side_turns=args.side_turns, temperature=args.temperature,
              max_tokens=args.max_tokens, timeout=args.timeout, session_prefix=args.session_prefix,
              wait_each_turn=args.wait_each_turn)
    try:
        res = simulate(args.url, progress=not args.no_progress, on_session=done.append, **kw)
    except (KeyboardInterrupt, ValueError):
        if out is not None and done:
            part = SimulationResult(url=args.url, user=args.user, sessions=kw["sessions"], turns=args.turns,
                                    seed=args.seed, model=args.model or "", rows=done,
                                    sessions_to_stable=sessions_until_stable([r.holds for r in done]))
            _write_rows(out, part.rows_jsonl(), args.force)
            print(f"claw simulate: stopped; the {len(done)} finished sessions are in {out}", file=sys.stderr)
        raise
    print(res.summary())
    if out is not None:
        _write_rows(out, res.rows_jsonl(), args.force)
        print(f"per-session rows: {out}")
    return 0
