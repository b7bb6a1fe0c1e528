"""The labelled probe set and how well each reward strategy finds the rejected words
(notebooks 07 and 10; ``data/probe_set.jsonl``).

Each line: ``id``, ``lang``, ``kind`` (fact, number, negation, noisy, extra, no_error, reorder),
``output``, ``correction`` and ``rejected``: the character spans of the output that the
correction rejects (empty for "no_error").
"""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np

from ..config import RewardConfig
from ..signals.rewards import token_rewards

__all__ = ["PROBE_SET", "load_probe_set", "probe_metrics", "probe_table"]

PROBE_SET = Path(__file__).resolve().parents[2] / "data" / "probe_set.jsonl"


def load_probe_set(path=None) -> List[dict]:
    """The probe set as a list of dicts (validated: spans inside the output)."""
    rows = []
    with open(path or PROBE_SET, encoding="utf-8") as f:
        for k, line in enumerate(f, 1):
            if not line.strip():
                continue
            r = json.loads(line)
            for s, e in r["rejected"]:
                if not 0 <= s < e <= len(r["output"]):
                    raise ValueError(f"probe line {k}: span {(s, e)} outside the output")
            rows.append(r)
    return rows


def _inside(tok, spans) -> bool:
    return any(tok.start < e and tok.end > s for s, e in spans)


def probe_metrics(rows: List[dict], strategy, config: Optional[RewardConfig] = None, encoder=None,
                  judge=None, name: Optional[str] = None) -> Dict:
    """Per strategy (a name for :func:`token_rewards`, or a callable ``(output, correction) ->
    TokenRewards`` such as a fusion, reported under ``name``):

    * ``hit_rate``: over rows with a rejected span, the share of the lowest-reward tokens that lie
      inside a span (ties share the credit: 2 tied minima, 1 inside -> 0.5);
    * ``mean_inside`` / ``mean_outside``: mean reward of tokens inside / outside the spans;
    * ``no_error_ok``: over "no_error" rows, the share with no negative reward;
    * ``by_kind``: hit rate per kind; ``rows``: per-row details.
    """
    inside, outside, hits, ok_no_err = [], [], [], []
    by_kind = defaultdict(list)
    details = []
    for r in rows:
        if callable(strategy):
            tr = strategy(r["output"], r["correction"])
        else:
            tr = token_rewards(r["output"], r["correction"], strategy, config, encoder=encoder, judge=judge)
        rw = tr.rewards
        flags = np.array([_inside(t, r["rejected"]) for t in tr.tokens], dtype=bool)
        inside += rw[flags].tolist()
        outside += rw[~flags].tolist()
        if r["rejected"]:
            m = rw.min()
            at_min = np.isclose(rw, m)
            h = float(flags[at_min].mean())
            hits.append(h)
            by_kind[r["kind"]].append(h)
        else:
            ok_no_err.append(float((rw >= 0).all()))
            h = None
        details.append({"id": r["id"], "kind": r["kind"], "hit": h,
                        "lowest": [t.text for t, a in zip(tr.tokens, np.isclose(rw, rw.min())) if a] if len(rw) and r["rejected"] else []})
    return {
        "strategy": name or (strategy if isinstance(strategy, str) else getattr(strategy, "__name__", "custom")),
        "hit_rate": float(np.mean(hits)) if hits else float("nan"),
        "mean_inside": float(np.mean(inside)) if inside else float("nan"),
        "mean_outside": float(np.mean(outside)) if outside else float("nan"),
        "no_error_ok": float(np.mean(ok_no_err)) if ok_no_err else float("nan"),
        "by_kind": {k: float(np.mean(v)) for k, v in sorted(by_kind.items())},
        "rows": details,
    }


def probe_table(results: List[Dict]) -> str:
    """A Markdown table of :func:`probe_metrics` results."""
    kinds = sorted({k for r in results for k in r["by_kind"]})
    head = "| strategy | hit rate | mean reward inside | mean reward outside | no-error ok | " + " | ".join(kinds) + " |"
    lines = [head, "|" + "---|" * (5 + len(kinds))]
    for r in results:
        lines.append(f"| {r['strategy']} | {r['hit_rate']:.2f} | {r['mean_inside']:+.2f} | {r['mean_outside']:+.2f} | "
                     f"{r['no_error_ok']:.2f} | " + " | ".join(f"{r['by_kind'].get(k, float('nan')):.2f}" for k in kinds) + " |")
    return "\n".join(lines)
