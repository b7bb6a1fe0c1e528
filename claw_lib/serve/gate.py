"""The publish gate of the live server (``claw serve --publish-gate FILE``): a small probe set scored before a
candidate version is published; a candidate that scores worse than the live version is not published.

The file is JSONL, one probe a line: ``{"prompt": "What is the capital of France?", "expected": "Paris"}`` (or
``"messages": [{"role": "user", "content": ...}, ...]`` instead of ``prompt``). Each probe's prompt is built as a
served request's is (:meth:`~claw_lib.serve.engine.Engine.task`) and answered greedily with at most the run's
``max_new_tokens``; the score is the share of probes whose answer contains ``expected`` (case-folded), in [0, 1].
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import List

import torch

from ..models.lm import encode
from .batcher import Batcher
from .sampling import SamplingParams
from .sequence import Sequence, TokenTexts

__all__ = ["load_gate", "load_probes", "gate_score", "greedy_answers", "probe_ids", "contains"]


def load_gate(path) -> List[dict]:
    """The probes of a gate file as ``{"messages", "expected"}`` dicts; ValueError (one line naming the file and
    line) for a missing file, a line that is not a JSON object with a prompt (or messages) and an expected text,
    or a file without probes."""
    return load_probes(path, "publish_gate", expected=True)


def load_probes(path, setting: str, expected: bool) -> List[dict]:
    """The probes of a JSONL file in the gate's format as ``{"messages", "expected"}`` dicts (``expected`` None
    where the file has none and ``expected`` is False: the anchor's prompts, claw_lib.serve.anchoring); ValueError
    naming ``setting``, the file and the line, as :func:`load_gate` says."""
    p = Path(path)
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"{setting} {str(path)!r} cannot be read ({type(e).__name__})") from None
    probes = []
    for k, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            row = None
        msgs = row.get("messages") if isinstance(row, dict) else None
        if isinstance(row, dict) and isinstance(row.get("prompt"), str) and row["prompt"].strip():
            msgs = [{"role": "user", "content": row["prompt"]}]
        ok = isinstance(msgs, list) and msgs and all(isinstance(m, dict) and isinstance(m.get("content"), str)
                                                     for m in msgs)
        has = ok and isinstance(row.get("expected"), str) and bool(row["expected"].strip())
        if not ok or (expected and not has):
            need = " and a non-empty \"expected\" text" if expected else ""
            raise ValueError(f"{setting} {p}: line {k} must be a JSON object with \"prompt\" (or \"messages\"){need}")
        probes.append({"messages": msgs, "expected": row["expected"] if has else None})
    if not probes:
        raise ValueError(f"{setting} {p} holds no probes")
    return probes


def contains(answer: str, expected: str) -> bool:
    """Whether ``expected`` is in ``answer``, both case-folded and stripped."""
    return expected.strip().casefold() in answer.casefold()


def gate_score(engine, model, probes: List[dict], max_tokens: int) -> float:
    """The share of ``probes`` that ``model`` (the engine's trainer, or a copy of it) answers with the expected text,
    greedily (:func:`greedy_answers`)."""
    seqs = greedy_answers(engine, model, probes, max_tokens)
    return sum(contains(s.text, p["expected"]) for s, p in zip(seqs, probes)) / len(probes)


def probe_ids(engine, probes: List[dict], max_tokens: int, setting: str) -> List[List[int]]:
    """The prompt ids of ``probes`` as a served request's; ValueError (one line naming ``setting`` and the probe) for
    one whose prompt and ``max_tokens`` answer do not fit the model's positions."""
    ids = [encode(engine.tokenizer, engine.task(p["messages"]).prompt) for p in probes]
    for k, x in enumerate(ids, 1):
        if engine.positions is not None and len(x) + max_tokens > engine.positions:
            raise ValueError(f"{setting}: probe {k} is {len(x)} tokens and answers take up to {max_tokens}; the model "
                             f"reads at most {engine.positions} positions (shorten it)")
    return ids


@torch.no_grad()
def greedy_answers(engine, model, probes: List[dict], max_tokens: int, setting: str = "publish_gate") -> List[Sequence]:
    """``model``'s greedy answers to ``probes`` (their ``messages``, built as a served request's prompt) as finished
    :class:`~claw_lib.serve.sequence.Sequence` objects (``prompt_ids``, ``ids``, ``text``), decoded together
    (:class:`~claw_lib.serve.batcher.Batcher`: the same decoding as a served request); ValueError for a probe that
    does not fit (:func:`probe_ids`)."""
    params = SamplingParams(temperature=0.0, max_tokens=max_tokens)
    ids = probe_ids(engine, probes, max_tokens, setting)
    was = model.training
    model.eval()
    try:
        seqs = [Sequence(x, params, engine.stops, engine._decode, TokenTexts(engine.tokenizer), None) for x in ids]
        Batcher(model, max_batch=len(seqs), lp_temperature=1.0, idle_s=0.05).submit(seqs)
    finally:
        model.train(was)
    return seqs
