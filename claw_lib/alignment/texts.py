"""Text in, alignment out: tokenize -> embed -> cost matrix -> DP (notebooks 01-02)."""
from __future__ import annotations

import dataclasses
import unicodedata
from dataclasses import dataclass
from typing import List, Optional

import numpy as np

from ..config import AlignConfig, validate
from ..text.langs import warn_language_mismatch
from ..text.tokens import Token
from . import encoders  # encoders.load_encoder looked up at the call (tests replace it)
from .costs import text_cost
from .dp import Alignment, align

__all__ = ["TextAlignment", "align_texts"]


@dataclass
class TextAlignment:
    """output_tokens (n), correction_tokens (m), cost (n, m), alignment (ops with i, j, cost)."""

    output: str
    correction: str
    output_tokens: List[Token]
    correction_tokens: List[Token]
    cost: np.ndarray
    alignment: Alignment

    def to_dict(self) -> dict:
        """The CLI's JSON shape: output_tokens, correction_tokens, ops, total_cost."""
        return {
            "output_tokens": [t.to_dict() for t in self.output_tokens],
            "correction_tokens": [t.to_dict() for t in self.correction_tokens],
            **self.alignment.to_dict(),
        }

    def table(self) -> List[dict]:
        """One row per op with the token texts, for printing or a DataFrame."""
        rows = []
        for o in self.alignment.ops:
            rows.append({
                "op": o.op,
                "i": o.i, "output": self.output_tokens[o.i].text if o.i is not None else "",
                "j": o.j, "correction": self.correction_tokens[o.j].text if o.j is not None else "",
                "cost": round(o.cost, 3),
            })
        return rows

    def format_table(self) -> str:
        """A plain-text alignment table (what ``claw align`` prints)."""
        lines = [f"{'op':8s} {'i':>3s} {'output':12s} {'j':>3s} {'correction':12s} {'cost':>6s}"]
        for r in self.table():
            i = "" if r["i"] is None else str(r["i"])
            j = "" if r["j"] is None else str(r["j"])
            lines.append(f"{r['op']:8s} {i:>3s} {_pad(r['output'], 12)} {j:>3s} "
                         f"{_pad(r['correction'], 12)} {r['cost']:6.3f}")
        lines.append(f"total cost {self.alignment.total_cost:.3f}")
        return "\n".join(lines)


def _pad(s: str, width: int) -> str:
    """Left-justify counting East Asian wide characters as two columns."""
    w = sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in s)
    return s + " " * max(0, width - w)


def align_texts(output: str, correction: str, config: Optional[AlignConfig] = None, encoder=None,
                output_tokens: Optional[List[Token]] = None, **overrides) -> TextAlignment:
    """Align the words of a model output with the words of a correction.

    config: an :class:`~claw_lib.config.AlignConfig` (fields may also be passed as keyword ``overrides``).
    encoder: an already loaded :class:`~claw_lib.alignment.encoders.Encoder` (else ``config.encoder``).
    output_tokens: the output's word tokens, if the caller has them already; refused (ValueError) when they are
    not the output's (A07). The config is validated as the command line's options are (A03: ``layer="8"``).
    """
    cfg = config or AlignConfig()
    if overrides:
        cfg = dataclasses.replace(cfg, **overrides)
    validate(cfg, "reward.align.")
    if output_tokens is not None:
        _check_tokens(output, output_tokens)
    warn_language_mismatch(output, correction)
    enc = encoder or encoders.load_encoder(cfg.encoder, device=cfg.device)
    tc = text_cost(output, correction, enc, cfg.layer, cfg.lexical_weight, cfg.contextual, output_tokens=output_tokens,
                   max_chars=cfg.max_chars, max_words=cfg.max_words)
    al = align(tc.cost, cfg.insert_cost, cfg.delete_cost, cfg.match_threshold)
    return TextAlignment(output, correction, tc.output_tokens, tc.correction_tokens, tc.cost, al)


def _check_tokens(output: str, tokens) -> None:
    """Every token's text is the output's characters at its span."""
    for t in tokens:
        if not isinstance(output, str) or output[t.start:t.end] != t.text:
            raise ValueError(f"output_tokens are not the output's: token {t.text!r} at {t.start}-{t.end} is "
                             f"{output[t.start:t.end]!r} in the output" if isinstance(output, str) else
                             "output must be a string")
