"""``claw show RUN``: what a run's model said, before and after training (the records are
:mod:`claw_lib.rl.samples`'s ``samples.jsonl`` / ``eval.jsonl``, or the live server's turns).

    claw show RUN                  the evaluation's answers at the first and the last evaluation, side by side
                                   (changed answers first); a run without evaluations: the first and last step's samples
    claw show RUN --step N         step N's sampled responses: the user's reply, the judge's verdict, and the signal
                                   on every token (token[value]; a token without a value is not in the loss)
    claw show RUN --eval [--step N]   the evaluation's answers at step N (default: the last evaluation)

``--limit K`` rows (default 10; 0: all), ``--json`` the records themselves, one JSON object a line. A folder that
does not exist or holds no records, or a step the run did not record, is one line on stderr and exit code 2.
"""
from __future__ import annotations

import json
from typing import Dict, List

from ..rl.samples import optional_step, read_run, steps_text
from .flags import number

__all__ = ["SHOW_HELP", "add_show_args", "cmd_show", "show_lines"]

#: the subcommand's one-line help (the ``claw`` parser's COMMANDS entry)
SHOW_HELP = ("what a run's model said: sampled responses with their signals, and the evaluation's answers before and "
             "after training")


def add_show_args(p) -> None:
    """The ``show`` subcommand's arguments on its parser ``p``."""
    p.add_argument("run", help="a run folder (claw train --out, or claw serve --out)")
    p.add_argument("--step", type=number(int, 0), default=None,
                   help="the step to show (samples: 1..steps; with --eval: 0 is before any update; the live server: "
                        "the policy version that served the turn)")
    p.add_argument("--eval", action="store_true", help="show the evaluation's greedy answers (default step: the last)")
    p.add_argument("--limit", type=number(int, 0), default=10, help="rows to show (default 10; 0: all)")
    p.add_argument("--json", action="store_true", help="print the records, one JSON object a line")


def cmd_show(a) -> int:
    """Print :func:`show_lines` of the run folder ``a.run``."""
    rr = read_run(a.run)
    for line in show_lines(rr, a.step, a.eval, a.limit, a.json):
        print(line)
    return 0


def _short(text, n: int = 120) -> str:
    s = "" if text is None else str(text).replace("\n", "\\n")
    return s if len(s) <= n else s[: n - 1] + "…"


def _cut(rows: List, limit: int) -> List:
    return rows if not limit else rows[:limit]


def _header(rr) -> str:
    engines = sorted({r.get("engine", "?") for rows in rr.samples.values() for r in rows}) or ["?"]
    what = "live server" if rr.kind == "serve" else f"training run ({', '.join(engines)} engine)"
    return (f"{rr.path}: {what}; samples at steps {steps_text(list(rr.samples))}"
            + ("" if rr.kind == "serve" else f"; evaluations at steps {steps_text(list(rr.evals))}"))


def _tokens(rec: Dict) -> str:
    """token[signal] for the tokens in the loss, the bare token for the others."""
    toks, sig, mask = rec.get("tokens"), rec.get("signal"), rec.get("mask")
    if not toks or sig is None or len(sig) != len(toks):
        return _short(rec.get("response"), 400)
    mask = mask if mask is not None and len(mask) == len(toks) else [True] * len(toks)
    return " ".join(f"{_short(t, 20)}[{v:+.2f}]" if m else _short(t, 20) for t, v, m in zip(toks, sig, mask))


def _sample_lines(rec: Dict) -> List[str]:
    j = rec.get("judge") or {}
    score = rec.get("score")
    lines = [f"[{rec.get('index')}] {_short(rec.get('question'))}",
             f"    said:   {_short(rec.get('response'), 400)}" + (f"   (user score {score:.2f})" if score is not None else ""),
             f"    reply:  {_short(rec.get('next_state'))} ({rec.get('role', 'user')}, {rec.get('kind', '')})"]
    if j:
        votes = j.get("votes") or []
        failed = sum(v is None for v in votes)
        lines.append(f"    judge:  score {j.get('score')} from votes {votes}" + (f" ({failed} failed)" if failed else "")
                     + (f"; hint {_short(j.get('hint'), 80)!s}" if j.get("hint") else "; no hint"))
    lines.append(f"    signal: {_tokens(rec)}")
    return lines


def _eval_step_lines(rows: List[Dict], step: int, limit: int) -> List[str]:
    mean = sum(r["score"] for r in rows) / len(rows)
    out = [f"evaluation at step {step}: mean score {mean:.3f} over {len(rows)} prompts"]
    for r in _cut(rows, limit):
        out.append(f"[{r['index']}] {_short(r['question'])}\n    ({r['score']:.2f}) {_short(r['answer'], 300)}")
    return out


def _compare_lines(before: List[Dict], after: List[Dict], s0: int, s1: int, limit: int) -> List[str]:
    """The evaluation's answers at steps s0 and s1, per prompt, the changed ones first."""
    pairs = list(zip(before, after))
    changed = [p for p in pairs if p[0]["answer"] != p[1]["answer"]]
    mean = lambda rows: sum(r["score"] for r in rows) / max(len(rows), 1)  # noqa: E731
    out = [f"evaluation, step {s0} -> step {s1}: mean score {mean(before):.3f} -> {mean(after):.3f}; "
           f"{len(changed)} of {len(pairs)} answers changed"]
    w = len(str(s1)) + 5
    for b, a in _cut(changed + [p for p in pairs if p not in changed], limit):
        out += [f"[{b['index']}] {_short(b['question'])}",
                f"    {'step ' + str(s0):<{w}} ({b['score']:.2f}) {_short(b['answer'], 300)}",
                f"    {'step ' + str(s1):<{w}} ({a['score']:.2f}) {_short(a['answer'], 300)}"]
    return out


def show_lines(rr, step=None, evaluation: bool = False, limit: int = 10, as_json: bool = False) -> List[str]:
    """The lines ``claw show`` prints for the records ``rr`` (:class:`~claw_lib.rl.samples.RunRecords`);
    ValueError (one line) for a step the run did not record."""
    if evaluation or (step is None and rr.evals):
        if rr.kind == "serve":
            raise ValueError(f"{rr.path} is a live server's folder: it has no evaluation (show its turns with --step)")
        s = optional_step(rr.evals, step, "evaluations", rr.path)
        if as_json:
            return [json.dumps(r, ensure_ascii=False) for r in _cut(rr.evals[s], limit)]
        if evaluation:
            return [_header(rr)] + _eval_step_lines(rr.evals[s], s, limit)
        s0 = min(rr.evals)
        return [_header(rr)] + _compare_lines(rr.evals[s0], rr.evals[s], s0, s, limit)
    steps = [optional_step(rr.samples, step, "samples", rr.path)] if step is not None else \
        sorted({min(rr.samples), max(rr.samples)}) if rr.samples else [optional_step(rr.samples, None, "samples", rr.path)]
    if as_json:
        return [json.dumps(r, ensure_ascii=False) for s in steps for r in _cut(rr.samples[s], limit)]
    out = [_header(rr)]
    for s in steps:
        rows = rr.samples[s]
        scores = [r["score"] for r in rows if r.get("score") is not None]
        out.append(f"samples at step {s}: {len(rows)} responses" +
                   (f", mean user score {sum(scores) / len(scores):.3f}" if scores else ""))
        for r in _cut(rows, limit):
            out += _sample_lines(r)
    return out
