"""The labelled probe sets and how well each reward strategy finds the rejected words
(notebooks 07 and 10; ``data/probe_set.jsonl``, ``data/probe_v2.jsonl``).

Each line: ``id``, ``lang``, ``kind`` (v1: fact, number, negation, noisy, extra, no_error, reorder;
v2: see ``data/probe_v2.md``), ``output``, ``correction`` and ``rejected``: the character spans of
the output that the correction rejects (empty for "no_error"). v2 rows also have ``style``
("restate": the correction repeats the output with the fix, the seed article's style; "free":
anything else), ``rejected_text`` (the labelled text of each span), ``split`` ("dev" or "test",
:func:`split_of`) and optionally ``confirmed`` spans.

Metrics (:func:`probe_metrics`), on word tokens: a token is *negative* if its reward is < 0 and
*inside* if it overlaps a rejected span. Hit rate (ties share the credit), precision and recall of
the negative tokens against the spans, the share of no-error rows without a negative reward, and
the same per kind, language and style.
"""
from __future__ import annotations

import hashlib
import random
import json
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np

from ..config import RewardConfig
from ..signals.rewards import token_rewards
from .users import CorrectingUser

__all__ = ["world_rows", "PROBE_SET", "PROBE_V2", "PROBE_LONG", "PROBE_REAL", "load_probe_set", "split_of", "probe_metrics", "judge_can_read",
           "probe_table",
           "quality_table"]

PROBE_SET = Path(__file__).resolve().parents[2] / "data" / "probe_set.jsonl"
#: the 200-pair set with restating and free-style corrections and a dev/test split
PROBE_V2 = Path(__file__).resolve().parents[2] / "data" / "probe_v2.jsonl"
#: the 180-pair set of long outputs (2-5 sentences) and free corrections, with a question per row
#: (``data/probe_long.md``)
PROBE_LONG = Path(__file__).resolve().parents[2] / "data" / "probe_long.jsonl"
#: the real-output set: answers a real 0.5B instruct model wrote (2-5 sentences), corrected in every style, with a
#: question per row (``data/probe_real.md``)
PROBE_REAL = Path(__file__).resolve().parents[2] / "data" / "probe_real.jsonl"

#: how each file's split was drawn, by file name (default :func:`split_of`, v2's rule): the real-output set's was drawn
#: once, stratified by language x style (``data/probe_real.md``; tests/toy/test_probe_real_data.py checks it)
SPLIT_RULES = {PROBE_REAL.name: None}
_STYLES = ("restate", "free",  # v2
           "quote_reject", "value_only", "reason", "swap", "one_word", "aside", "restate_one", "confirm")  # long
_SPLITS = ("dev", "test")


def split_of(row_id: str) -> str:
    """The recorded split rule of probe set v2: "test" if sha256(id) is odd, else "dev"."""
    return "test" if int(hashlib.sha256(row_id.encode("utf-8")).hexdigest(), 16) % 2 else "dev"


def _check_spans(r: dict, key: str, k: int) -> None:
    spans = r.get(key, [])
    for s, e in spans:
        if not 0 <= s < e <= len(r["output"]):
            raise ValueError(f"probe line {k}: {key} span {(s, e)} outside the output")
    texts = r.get(f"{key}_text")
    if texts is not None:
        got = [r["output"][s:e] for s, e in spans]
        if got != list(texts):
            raise ValueError(f"probe line {k}: {key} spans hold {got}, labelled {list(texts)}")


def load_probe_set(path=None, split: Optional[str] = None) -> List[dict]:
    """A probe set as a list of dicts (default: the original 45 pairs; ``PROBE_V2`` for v2).

    Validated: spans inside the output, ``rejected_text`` / ``confirmed_text`` equal to the
    spanned text, ``style`` one of the known styles, ``split`` as the file's rule computes it (:data:`SPLIT_RULES`;
    default :func:`split_of`).
    split: "dev" or "test" keeps those rows (rows without a split field have none)."""
    if split is not None and split not in _SPLITS:
        raise ValueError(f"split must be one of {_SPLITS}, got {split!r}")
    rows = []
    with open(path or PROBE_SET, encoding="utf-8") as f:
        for k, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError as e:  # D01: the line of the file, not the column of the line alone
                raise ValueError(f"probe line {k}: not valid JSON ({e.msg}, column {e.colno})") from None
            if not isinstance(r, dict):
                raise ValueError(f"probe line {k}: a JSON object is needed, got {type(r).__name__}")
            _check_spans(r, "rejected", k)
            _check_spans(r, "confirmed", k)
            if "style" in r and r["style"] not in _STYLES:
                raise ValueError(f"probe line {k}: style must be one of {_STYLES}, got {r['style']!r}")
            rule = SPLIT_RULES.get(Path(path or PROBE_SET).name, split_of)
            if rule is not None and "split" in r and r["split"] != rule(r["id"]):
                raise ValueError(f"probe line {k}: split {r['split']!r} is not the recorded rule's {rule(r['id'])!r}")
            if split is None or r.get("split") == split:
                rows.append(r)
    return rows


def judge_can_read(row: dict, judge) -> bool:
    """Whether the judge LM's context holds a probe row's question and output (the tiny GPT has 160 positions; a
    row it cannot read is left out of a judge's measurement rather than failing it)."""
    try:
        token_rewards(row["output"], row["correction"], "perplexity", judge=judge, question=row.get("question"))
        return True
    except ValueError:
        return False


def _inside(tok, spans) -> bool:
    return any(tok.start < e and tok.end > s for s, e in spans)


def _summary(hits, tp, fp, fn, ok, n, spans=(0, 0)) -> Dict:
    return {
        "n": n,
        "hit_rate": float(np.mean(hits)) if hits else float("nan"),
        "precision": tp / (tp + fp) if tp + fp else float("nan"),
        "recall": tp / (tp + fn) if tp + fn else float("nan"),
        "span_recall": spans[0] / spans[1] if spans[1] else float("nan"),
        "no_error_ok": float(np.mean(ok)) if ok else float("nan"),
        "tp": tp, "fp": fp, "fn": fn,
    }


def _row_score(r: dict, tr) -> Dict:
    """One row's counts: tp / fp / fn of the negative word tokens, hit (None without a rejected span), ok (None
    with one), the rewards inside / outside the spans, whole spans caught / spans (a span is caught when every
    word token overlapping it, punctuation aside, is negative), and the details row."""
    rw = tr.rewards
    flags = np.array([_inside(t, r["rejected"]) for t in tr.tokens], dtype=bool)
    # a wrong claim the correction does not address (long set): neither a false positive nor a miss
    other = np.array([_inside(t, r.get("unaddressed", [])) and not f for t, f in zip(tr.tokens, flags)], dtype=bool)
    neg = rw < 0
    h = ok = None
    if r["rejected"]:
        h = float(flags[np.isclose(rw, rw.min())].mean())
    else:
        ok = float((rw >= 0).all())
    caught = 0
    for span in r["rejected"]:
        inside = [k for k, t in enumerate(tr.tokens) if _inside(t, [span]) and any(ch.isalnum() for ch in t.text)]
        caught += bool(inside) and all(neg[k] for k in inside)
    lowest = [t.text for t, a in zip(tr.tokens, np.isclose(rw, rw.min())) if a] if len(rw) and r["rejected"] else []
    return {"tp": int((neg & flags).sum()), "fp": int((neg & ~flags & ~other).sum()), "fn": int((~neg & flags).sum()),
            "hit": h, "ok": ok, "inside": rw[flags].tolist(), "outside": rw[~flags].tolist(),
            "spans": (caught, len(r["rejected"])),
            "row": {"id": r["id"], "kind": r["kind"], "hit": h, "lowest": lowest, "source": tr.info.get("source"),
                    "negative": [t.text for t, a in zip(tr.tokens, neg) if a]}}


class _Tally:
    """Counts summed over rows (hits, tp / fp / fn, no-error rows, whole spans caught / spans)."""

    def __init__(self):
        self.hits, self.ok, self.tp, self.fp, self.fn, self.n, self.caught, self.spans = [], [], 0, 0, 0, 0, 0, 0

    def add(self, s: Dict) -> None:
        self.n += 1
        self.tp, self.fp, self.fn = self.tp + s["tp"], self.fp + s["fp"], self.fn + s["fn"]
        self.caught, self.spans = self.caught + s["spans"][0], self.spans + s["spans"][1]
        if s["hit"] is not None:
            self.hits.append(s["hit"])
        if s["ok"] is not None:
            self.ok.append(s["ok"])

    def summary(self) -> Dict:
        return _summary(self.hits, self.tp, self.fp, self.fn, self.ok, self.n, (self.caught, self.spans))


def probe_metrics(rows: List[dict], strategy, config: Optional[RewardConfig] = None, encoder=None,
                  judge=None, name: Optional[str] = None, results: Optional[Sequence] = None) -> Dict:
    """Per strategy (a name for :func:`token_rewards`, given each row's ``question`` when it has one, or a
    callable ``(output, correction) -> TokenRewards`` such as a fusion, reported under ``name``; or ``results``:
    the :class:`~claw_lib.signals.rewards.TokenRewards` of every row, in order, computed beforehand in a batch):

    * ``hit_rate``: over rows with a rejected span, the share of the lowest-reward tokens that lie
      inside a span (ties share the credit: 2 tied minima, 1 inside -> 0.5);
    * ``precision`` / ``recall``: over all rows, word tokens with reward < 0 against tokens that
      overlap a rejected span (tp: negative and inside; fp: negative, outside; fn: inside, >= 0);
      nan when undefined (no negative token / no inside token); tokens of an ``unaddressed`` span (a
      wrong claim the correction leaves alone, long set) count neither way;
    * ``span_recall``: the share of rejected spans whose every word token is negative (a wrong four-word
      name with one negative word is not caught);
    * ``mean_inside`` / ``mean_outside``: mean reward of tokens inside / outside the spans;
    * ``no_error_ok``: over rows without a span ("no_error"), the share with no negative reward;
    * ``by_kind`` (hit rate per kind, as before), and ``groups``: {"kind" | "lang" | "style":
      {value: {n, hit_rate, precision, recall, span_recall, no_error_ok, tp, fp, fn}}};
    * ``sources``: how many rows each path produced (``info["source"]``: "revision" / "rules"; absent: "rules");
    * ``rows``: per-row details (id, kind, hit, lowest tokens, negative tokens, source).
    """
    if results is not None and len(results) != len(rows):
        raise ValueError(f"results has {len(results)} entries for {len(rows)} rows")
    inside, outside, details, sources = [], [], [], defaultdict(int)
    by_kind = defaultdict(list)
    tot, acc = _Tally(), defaultdict(_Tally)
    for k, r in enumerate(rows):
        if results is not None:
            tr = results[k]
        elif callable(strategy):
            tr = strategy(r["output"], r["correction"])
        else:
            tr = token_rewards(r["output"], r["correction"], strategy, config, encoder=encoder, judge=judge,
                               question=r.get("question"))
        s = _row_score(r, tr)
        inside += s["inside"]
        outside += s["outside"]
        if s["hit"] is not None:
            by_kind[r["kind"]].append(s["hit"])
        tot.add(s)
        for g in ("kind", "lang", "style"):
            if g in r:
                acc[(g, r[g])].add(s)
        sources[tr.info.get("source", "rules")] += 1
        details.append(s["row"])
    groups: Dict[str, Dict[str, Dict]] = defaultdict(dict)
    for (g, v), a in sorted(acc.items()):
        groups[g][v] = a.summary()
    overall = tot.summary()
    return {
        "strategy": name or (strategy if isinstance(strategy, str) else getattr(strategy, "__name__", "custom")),
        "n": len(rows), **{k: overall[k] for k in ("hit_rate", "precision", "recall", "span_recall")},
        "mean_inside": float(np.mean(inside)) if inside else float("nan"),
        "mean_outside": float(np.mean(outside)) if outside else float("nan"),
        "no_error_ok": overall["no_error_ok"],
        "tp": tot.tp, "fp": tot.fp, "fn": tot.fn,
        "by_kind": {k: float(np.mean(v)) for k, v in sorted(by_kind.items())},
        "groups": dict(groups), "sources": dict(sources),
        "rows": details,
    }


def probe_table(results: List[Dict]) -> str:
    """A Markdown table of :func:`probe_metrics` results (hit rate per kind, the README's table)."""
    kinds = sorted({k for r in results for k in r["by_kind"]})
    head = "| strategy | hit rate | mean reward inside | mean reward outside | no-error ok | " + " | ".join(kinds) + " |"
    lines = [head, "|" + "---|" * (5 + len(kinds))]
    for r in results:
        lines.append(f"| {r['strategy']} | {r['hit_rate']:.2f} | {r['mean_inside']:+.2f} | {r['mean_outside']:+.2f} | "
                     f"{r['no_error_ok']:.2f} | " + " | ".join(f"{r['by_kind'].get(k, float('nan')):.2f}" for k in kinds) + " |")
    return "\n".join(lines)


def _cell(m: Dict) -> str:
    return f"{m['hit_rate']:.2f} / {m['precision']:.2f} / {m['recall']:.2f}"


def quality_table(results: Dict[str, Dict], group: Optional[str] = None) -> str:
    """A Markdown table of hit / precision / recall: rows = the keys of ``results`` (e.g.
    "binary dev", "binary test", each a :func:`probe_metrics` result), columns = "all" and the
    values of ``group`` ("lang", "style" or "kind"); each cell "hit / precision / recall"."""
    vals = sorted({v for m in results.values() for v in m["groups"].get(group, {})}) if group else []
    lines = ["| |" + "".join(f" {v} |" for v in ["all", *vals]), "|" + "---|" * (2 + len(vals))]
    for key, m in results.items():
        cells = [_cell(m)] + [_cell(m["groups"][group][v]) if v in m["groups"].get(group, {}) else "-" for v in vals]
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


# --------------------------------------------------------------------------- rows from the toy world
def world_rows(world, facts: Sequence, seed: int = 0, per_fact: int = 2, p_wrong: float = 0.5,
               styles: Sequence[str] = ("formal", "friendly"), p_noise: float = 0.2,
               p_vague: float = 0.1, prefix: str = "w") -> List[dict]:
    """(output, correction) pairs from the toy world, in the probe-set format.

    world: a :class:`~claw_lib.toy.world.FactWorld`; facts: its :class:`~claw_lib.toy.world.Fact` s.
    For every fact, ``per_fact`` answers in a random style from ``styles``, each wrong (a
    :meth:`~claw_lib.toy.world.FactWorld.distractor` value) with probability ``p_wrong``; the
    :class:`~claw_lib.toy.users.CorrectingUser` (``p_noise``, ``p_vague``) replies. Deterministic
    from ``seed``.

    Returns dicts: ``id``, ``lang``, ``kind`` ("wrong" / "right"), ``relation``, ``country`` (zh
    name), ``question``, ``output``, ``correction``, ``reply`` (the user's reply kind), ``value``:
    the character span of the stated value (right or wrong) and ``rejected``: ``[value]`` for a
    wrong answer, ``[]`` for a right one.
    """
    rng = random.Random(seed)
    user = CorrectingUser(world, p_noise=p_noise, p_vague=p_vague, seed=seed)
    rows = []
    for k, fact in enumerate(facts):
        for a in range(per_fact):
            wrong = rng.random() < p_wrong
            value = world.distractor(fact, rng) if wrong else fact.truth
            output = fact.answer(value, style=rng.choice(list(styles)))
            fb = user.reply(fact, output)
            # the value is the last mention in every template ("墨西哥的首都是墨西哥城。")
            s = output.rfind(value)
            span = [s, s + len(value)]
            rows.append({"id": f"{prefix}{seed}-{k}-{a}", "lang": fact.lang, "kind": "wrong" if wrong else "right",
                         "relation": fact.relation, "country": fact.country.zh, "question": fact.question(),
                         "output": output, "correction": fb.next_state, "reply": fb.kind, "value": span, "rejected": [span] if wrong else []})
    return rows
