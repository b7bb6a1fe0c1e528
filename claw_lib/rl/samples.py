"""What a training run said: its sampled responses and its evaluation's answers, as JSONL in the run folder
(``claw show RUN``, :mod:`claw_lib.apps.show_cli`).

Metrics say *that* a score moved; these files say *what the model said*. Every run that writes a folder (the kit's
loop, :mod:`claw_lib.rl.run`; the TRL engine, :mod:`claw_lib.integrations.trl`) appends

* ``samples.jsonl`` -- one line per sampled response of a step: ``step``, ``engine``, ``index`` (row of the step's
  batch), ``question``, ``prompt`` (the text the policy was given, chat template included), ``response`` (the text
  the user read), ``tokens`` (each response token decoded on its own: a byte-level BPE token that holds part of a
  character shows as U+FFFD), ``next_state`` and ``role`` (the user's or tool's reply), ``score`` (the user's, in
  [0, 1]) and ``kind``, ``judge`` (:func:`judged_fields`: the judge's majority score, votes, hint; null for the
  token-reward strategies), ``signal`` (the strategy's per-token signal, nats or reward units, 4 decimals),
  ``advantage`` (after stage 3), ``mask`` (True: the token is in the loss);
* ``eval.jsonl`` -- one line per evaluation prompt at each evaluation (step 0 is before any update): ``step``,
  ``index``, ``question``, ``answer`` (greedy), ``score``, ``kind``, ``next_state``, ``user`` (a joint run's persona).

The live server (:mod:`claw_lib.serve`) keeps its own ``turns.jsonl`` / ``samples.jsonl``, one judged turn a line;
its judge's verdict has the same fields (:func:`judged_fields`), and :func:`read_run` reads its folders too (the
policy version that served a turn stands for the step). Lines are appended whole; a resumed run first drops the
lines after its checkpoint's step (:func:`trim_records`), so the files repeat an uninterrupted run's.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from ..toy.env import evaluate
from ..utils import atomic_write

__all__ = ["SAMPLES_FILE", "EVAL_FILE", "RECORD_FILES", "judged_fields", "rollout_records", "evaluate_recorded",
           "append_records", "trim_records", "RunRecords", "read_run"]

SAMPLES_FILE = "samples.jsonl"
EVAL_FILE = "eval.jsonl"
#: the files a training run records what it said in (the run folders' markers list them)
RECORD_FILES = (SAMPLES_FILE, EVAL_FILE)
#: decimals kept of a per-token value
DECIMALS = 4


def judged_fields(judged) -> Dict:
    """A judge's verdict on a turn (:class:`~claw_lib.signals.opd.TurnSignal`) as the records hold it: ``score``
    (majority, -1 / 0 / +1), ``votes``, ``representative_eval`` (the first vote's text), ``hint`` (None: no accepted
    hint) and ``hint_votes`` (vote_id, score, hint, raw text). Failed votes are the 0 votes of a judge that answered
    nothing usable."""
    return {"score": int(judged.score), "votes": [v.score for v in judged.votes],
            "representative_eval": judged.votes[0].text if judged.votes else "", "hint": judged.hint,
            "hint_votes": [{"vote_id": k, "score": 1 if v.positive else -1, "hint": v.hint, "raw": v.text}
                           for k, v in enumerate(judged.hint_votes)]}


def _question(task) -> str:
    """The question a task asks (its fact's, a served turn's own), else its prompt."""
    q = getattr(task, "question", None)
    if isinstance(q, str):
        return q
    fact = getattr(task, "fact", None)
    try:
        return fact.question()
    except AttributeError:
        return task.prompt


def _values(row, n: int) -> List[float]:
    return [round(float(x), DECIMALS) for x in row[:n].tolist()]


def rollout_records(ro, sig, adv, tokenizer, engine: str = "kit") -> List[Dict]:
    """One record per response of a step (fields in the module docstring, ``step`` aside): the rollout ``ro``
    (:class:`~claw_lib.rl.ppo.Rollout`), its signals ``sig`` and advantages ``adv`` ((B, T) tensors, row b's first
    len(response_ids[b]) positions are its tokens)."""
    signal, advantage, mask = sig.token_signal.cpu(), adv.advantages.cpu(), adv.mask.cpu()
    out = []
    for b, (task, ids, text, fb) in enumerate(zip(ro.tasks, ro.response_ids, ro.texts, ro.feedback)):
        n = len(ids)
        out.append({"engine": engine, "index": b, "question": _question(task), "prompt": task.prompt,
                    "response": text, "tokens": [tokenizer.decode([i]) for i in ids], "next_state": fb.next_state,
                    "role": fb.role, "score": float(fb.score), "kind": fb.kind,
                    "judge": judged_fields(sig.judged[b]) if sig.judged else None,
                    "signal": _values(signal[b], n), "advantage": _values(advantage[b], n),
                    "mask": [bool(x) for x in mask[b, :n].tolist()]})
    return out


def evaluate_recorded(model, tok, env, tasks: Sequence, max_new_tokens: int) -> Tuple[Dict[str, float], List[Dict]]:
    """:func:`~claw_lib.toy.evaluation.evaluate_by_user` (one greedy pass, the user's RNG left as it was) and the
    answers it scored, one record per task (``eval.jsonl``'s fields, ``step`` aside)."""
    # lazy: toy.evaluation imports torch (models.lm): the run's readers need none
    from ..toy.evaluation import greedy_feedback

    gens, fbs = greedy_feedback(model, tok, env, tasks, max_new_tokens)
    records = [{"index": i, "question": _question(t), "answer": g.text.strip(), "score": float(f.score),
                "kind": f.kind, "next_state": f.next_state, "user": getattr(t, "user", "")}
               for i, (t, g, f) in enumerate(zip(tasks, gens, fbs))]
    return evaluate(tasks, [f.score for f in fbs]), records


def append_records(path, step: int, records: Sequence[Dict]) -> None:
    """Append ``records`` to the JSONL file ``path``, each with ``step`` first, in one write (Chinese kept readable)."""
    if not records:
        return
    text = "".join(json.dumps({"step": int(step), **r}, ensure_ascii=False) + "\n" for r in records)
    with open(path, "a", encoding="utf-8") as f:
        f.write(text)
        f.flush()


def trim_records(out, step: int) -> None:
    """Drop the lines of ``out``'s record files whose step is after ``step`` (a run resumed from the checkpoint of
    ``step``: those lines belong to steps it runs again), and a torn last line; rewritten whole."""
    for name in RECORD_FILES:
        path = Path(out) / name
        if not path.exists():
            continue
        keep = [line for line in _lines(path) if line[1].get("step", 0) <= step]
        with atomic_write(path) as f:
            f.write("".join(raw + "\n" for raw, _ in keep))


def _lines(path: Path) -> List[Tuple[str, Dict]]:
    """(raw line, record) of every complete line of ``path``; a torn last line (no newline: a killed write) is left
    out; a malformed complete line is an error naming the file and the line."""
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    lines.pop()  # "" after a final newline, else the torn tail
    out = []
    for k, raw in enumerate(lines):
        if not raw.strip():
            continue
        try:
            rec = json.loads(raw)
        except ValueError:
            raise ValueError(f"{path} line {k + 1} is not a JSON record") from None
        if not isinstance(rec, dict):
            raise ValueError(f"{path} line {k + 1} is not a JSON object")
        out.append((raw, rec))
    return out


# --------------------------------------------------------------------------- reading a run
@dataclass
class RunRecords:
    """What a run folder says its model said: ``samples`` and ``evals`` by step (lists of records in the module
    docstring's shape); ``kind``: "train" (the kit's loop or the TRL engine) or "serve" (the live server, whose step
    is the policy version that served the turn)."""

    path: Path
    kind: str
    samples: Dict[int, List[Dict]] = field(default_factory=dict)
    evals: Dict[int, List[Dict]] = field(default_factory=dict)


def _by_step(records) -> Dict[int, List[Dict]]:
    out: Dict[int, List[Dict]] = {}
    for r in records:
        out.setdefault(int(r.get("step", 0)), []).append(r)
    return dict(sorted(out.items()))


def _served(path: Path) -> Dict[int, List[Dict]]:
    """The live server's turns as sample records: turns.jsonl joined with its next state and judged sample."""
    key = lambda r: (r.get("session_id"), r.get("turn"))  # noqa: E731
    nxt = {key(r): r for _, r in _lines(path / "next_states.jsonl")} if (path / "next_states.jsonl").exists() else {}
    judged = {key(r): r for _, r in _lines(path / SAMPLES_FILE)} if (path / SAMPLES_FILE).exists() else {}
    out = []
    for _, t in _lines(path / "turns.jsonl"):
        s, n = judged.get(key(t), {}), nxt.get(key(t), {})
        judge = {k: s[k] for k in ("score", "votes", "representative_eval", "hint", "hint_votes") if k in s} or None
        out.append({"step": int(t.get("policy_version", 0)), "engine": "serve", "index": len(out),
                    "question": t.get("question", ""), "prompt": t.get("prompt_text", ""),
                    "response": t.get("response_text", ""), "tokens": t.get("tokens"),
                    "next_state": n.get("next_state"), "role": n.get("role", "user"), "score": None,
                    "kind": s.get("status", "unjudged"), "judge": judge, "signal": s.get("signal"),
                    "mask": s.get("mask"), "session_id": t.get("session_id"), "turn": t.get("turn")})
    return _by_step(out)


def read_run(folder) -> RunRecords:
    """The records of the run in ``folder``: a training run's samples.jsonl / eval.jsonl, or the live server's
    turns. ValueError (one line) for a folder that does not exist or holds no records."""
    path = Path(folder)
    if not path.is_dir():
        raise ValueError(f"no run folder {folder}" + (" (it is a file)" if path.exists() else ""))
    if (path / "turns.jsonl").exists():
        return RunRecords(path, "serve", _served(path))
    found = [n for n in RECORD_FILES if (path / n).exists()]
    if not found:
        raise ValueError(f"{folder} holds no {SAMPLES_FILE} or {EVAL_FILE}: not a run folder, or a run from before "
                         "runs recorded what their model said")
    read = lambda n: _by_step(r for _, r in _lines(path / n)) if (path / n).exists() else {}  # noqa: E731
    return RunRecords(path, "train", read(SAMPLES_FILE), read(EVAL_FILE))


def steps_text(steps: Sequence[int]) -> str:
    """Steps as a short range text: [0, 1, 2, 4] -> "0-2, 4"."""
    parts, start, prev = [], None, None
    for s in list(steps) + [None]:
        if start is not None and (s is None or s != prev + 1):
            parts.append(str(start) if start == prev else f"{start}-{prev}")
            start = None
        if s is not None and start is None:
            start = s
        prev = s
    return ", ".join(parts) or "none"


def optional_step(records: Dict[int, List[Dict]], step: Optional[int], what: str, folder) -> int:
    """``step`` checked against the steps ``records`` holds (None: the last); ValueError naming the range."""
    if not records:
        raise ValueError(f"{folder} holds no {what}")
    if step is None:
        return max(records)
    if step not in records:
        raise ValueError(f"step {step} is not in {folder}: its {what} cover steps {steps_text(list(records))}")
    return step
