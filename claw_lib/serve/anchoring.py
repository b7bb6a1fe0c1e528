"""The live server's anchor (``claw serve --anchor FILE [--anchor-coef C]``): prompts whose answers a correction
should leave alone, and the initial model's own greedy answers to them, built once at the start
(:mod:`claw_lib.rl.anchor` has the term each update adds: ``C`` times KL(initial model || policy) per answer token).

The file has the publish gate's format (:mod:`claw_lib.serve.gate`; an ``expected`` text is allowed and not read),
so the gate's probes can anchor too. Keep it to prompts that are not the ones users correct: an anchor on a
corrected question pulls its answer back.
"""
from __future__ import annotations

from typing import Optional

from ..rl.anchor import AnchorSet, build_anchor
from .gate import greedy_answers, load_probes

__all__ = ["load_anchor", "serve_anchor", "anchor_status"]


def load_anchor(path) -> list:
    """The anchor file's prompts (:func:`~claw_lib.serve.gate.load_probes`); a one-line ValueError naming
    ``anchor``, the file and the line for a file that is missing, malformed or empty."""
    return load_probes(path, "anchor", expected=False)


def serve_anchor(engine, path: str, coef: float, max_tokens: int, rows: Optional[int],
                 steps: int = 1) -> Optional[AnchorSet]:
    """The :class:`~claw_lib.rl.anchor.AnchorSet` of the file ``path`` for ``engine`` (None without a file): the
    answers are ``engine.reference``'s (the initial model) greedy ones, at most ``max_tokens`` tokens each, decoded
    as a served request's; ``rows``: answers scored at a time in the update (the run's micro-batch); ``steps``: anchor
    steps after each optimizer step."""
    if not path:
        return None
    probes = load_anchor(path)
    seqs = greedy_answers(engine, engine.reference, probes, max_tokens, "anchor")
    return build_anchor(engine.reference, [s.prompt_ids for s in seqs], [s.ids for s in seqs],
                        engine.tokenizer.pad_token_id, coef, rows, steps)


def anchor_status(anchor: Optional[AnchorSet], path: str, metrics: list) -> Optional[dict]:
    """``GET /v1/claw/status``'s ``anchor``: the file, its prompts and answer tokens, the coefficient, whether the
    initial model's distributions are kept (:mod:`claw_lib.rl.anchor`) and the last update's ``anchor/kl`` (None
    before the first update); None without an anchor."""
    if anchor is None:
        return None
    last = next((m["anchor/kl"] for m in reversed(metrics) if "anchor/kl" in m), None)
    return {"file": path, "prompts": len(anchor.batch.input_ids), "tokens": anchor.tokens, "coef": anchor.coef,
            "steps": anchor.steps, "reference_kept": anchor.cache is not None, "last_kl": last}
