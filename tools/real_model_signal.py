"""The hinted teacher's signal on a real model, next to its controls (issue 36; docs/real_model.md, notebook 12b).

For each wrong answer (the real-world questions of :mod:`claw_lib.toy.real_tasks` answered with a wrong value, and a
sample of the probe sets ``data/probe_long.jsonl`` and ``data/probe_v2.jsonl``, each with labelled wrong spans) the
tool scores, on the answer's own token ids:

* **OPD** gaps ``A_t = log pi_T(y_t | x + h) - log pi_S(y_t | x)`` with three hints h: the correction (what the
  rule judge takes from the user's reply), a *wrong hint* (the correction of another item in the same language) and
  an *unrelated follow-up* (:func:`claw_lib.signals.opd.unrelated_hint`);
* the kit's **perplexity** word rewards (:func:`claw_lib.signals.rewards.token_rewards`, the model as judge) with the
  same three next states.

The two controls carry no information about which word is wrong, so what they share with the correction's gap is
style drift (any extra user text changes how the chat model opens); the rest is content. Per signal and removal
(raw, skip the first token, centre each response, contrast ``A - mean A_controls``) it reports where the most
negative token lands (hit: inside a labelled wrong span; first: on the response's first token) and the share of the
negative mass inside the spans. Writes results/real_model/signal_controls.{csv,md} and signal_items.jsonl::

    OMP_NUM_THREADS=1 .venv/bin/python tools/real_model_signal.py --model /work/models/qwen05 --real 60 --long 30 --v2 40
"""
from __future__ import annotations

import argparse
import csv
import json
import random
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

OUT = ROOT / "results" / "real_model"
#: a probe_v2 row has no question: the student is asked this (the kit's perplexity judge would ask nothing)
V2_QUESTION = {"zh": "请用一句话说一个事实。", "en": "Tell me one fact in a sentence."}
SIGNALS = ("opd", "ppl")
REMOVALS = ("raw", "skip1", "center", "contrast", "contrast_unrelated", "contrast_wrong")


def _span(text: str, value: str):
    i = text.find(value)
    return [[i, i + len(value)]] if i >= 0 else []


def _wrong_value(f, facts, k: int) -> str:
    """A wrong value for fact f: its listed common error, a number off by one step, another country's capital."""
    if f.wrong:
        return f.wrong[0]
    if f.truth.isdigit():
        v = int(f.truth)
        return str(v + (1 if f.kind == "date" else max(1, v // 10)))
    others = [g.truth for g in facts if g.kind == f.kind and g.lang == f.lang and g.truth != f.truth]
    return others[k % len(others)]


def real_items(n: int, seed: int):
    """n wrong answers to the real-world questions (both splits), those with a common wrong answer first, each
    with the correcting user's reply."""
    from claw_lib.toy.real_tasks import RealTaskEnv, real_facts

    facts, user = real_facts(), RealTaskEnv(user="correcting", seed=seed, p_vague=0.0).user
    order = sorted(range(len(facts)), key=lambda i: (not facts[i].wrong, random.Random(seed + i).random()))
    out = []
    for k, i in enumerate(order[:n]):
        f = facts[i]
        v = _wrong_value(f, facts, k)
        resp = f.answer(v)
        corr = user.reply(f, resp).next_state  # the correcting user's reply, as in training
        out.append(dict(source="real", id=f"real-{f.kind}-{f.lang}-{i}", lang=f.lang, question=f.question(),
                        response=resp, correction=corr, spans=_span(resp, v), kind=f.kind))
    return out


def probe_items(path: Path, n: int, seed: int, source: str):
    """n rows of a probe set (test split first, then dev), each with its labelled wrong spans."""
    rows = [json.loads(l) for l in path.read_text(encoding="utf-8").splitlines() if l.strip()]
    rows = [r for r in rows if r.get("rejected")]
    random.Random(seed).shuffle(rows)
    rows.sort(key=lambda r: r.get("split") != "test")
    return [dict(source=source, id=r["id"], lang=r["lang"], question=r.get("question") or V2_QUESTION[r["lang"]],
                 response=r["output"], correction=r["correction"], spans=r["rejected"], kind=r.get("style", ""))
            for r in rows[:n]]


def add_controls(items):
    """Each item's wrong hint (the correction of the next item of its language and source) and unrelated follow-up."""
    from claw_lib.signals.opd import unrelated_hint

    groups = {}
    for it in items:
        groups.setdefault((it["source"], it["lang"]), []).append(it)
    for g in groups.values():
        for k, it in enumerate(g):
            it["wrong_hint"] = g[(k + 1) % len(g)]["correction"] if len(g) > 1 else unrelated_hint(it["lang"], k + 1)
            it["unrelated"] = unrelated_hint(it["lang"], k)
    return items


def interleave(items):
    """The items in round-robin order of their sources, so that a run stopped early (``--minutes``) holds each
    source in proportion."""
    by = {}
    for it in items:
        by.setdefault(it["source"], []).append(it)
    n = max(len(v) for v in by.values())
    frac = [(k / len(v), j, it) for j, v in enumerate(by.values()) for k, it in enumerate(v)]
    return [it for _, _, it in sorted(frac, key=lambda x: (x[0], x[1]))] if n else []


def opd_gaps(model, tok, it):
    """Per response token: its text and span, and the three OPD gaps (correction, wrong hint, unrelated)."""
    from claw_lib.models.lm import encode
    from claw_lib.prompts import build_prompt, response_text, teacher_prompt
    from claw_lib.signals.opd import judge_turn, token_logprobs
    from claw_lib.text.tokens import subtoken_spans

    q, lang, resp = it["question"], it["lang"], it["response"]
    student = build_prompt(q, lang, tokenizer=tok)
    cont = response_text(resp, lang, tok, prompt=student)
    ids = encode(tok, cont)
    hint = judge_turn(resp, it["correction"]).hint
    it["hint"] = hint or it["correction"]
    hints = [it["hint"], it["wrong_hint"], it["unrelated"]]
    lps = token_logprobs(model, tok, [student] + [teacher_prompt(q, h, lang, tokenizer=tok) for h in hints], [ids] * 4)
    off = len(cont) - len(resp)
    toks = [(s.text, max(0, s.start - off), max(0, s.end - off)) for s in subtoken_spans(tok, ids)]
    return toks, {n: lps[k + 1] - lps[0] for k, n in enumerate(("correct", "wrong", "unrelated"))}


def ppl_rewards(model, tok, it):
    """Per word of the response: its span, and the kit's perplexity rewards with the three next states."""
    from claw_lib.signals.rewards import token_rewards

    out, words = {}, None
    for name, nxt in (("correct", it["correction"]), ("wrong", it["wrong_hint"]), ("unrelated", it["unrelated"])):
        tr = token_rewards(it["response"], nxt, "perplexity", judge=(model, tok), question=it["question"])
        words = [(w.text, w.start, w.end) for w in tr.tokens]
        out[name] = np.asarray(tr.rewards, np.float64)
    return words, out


def removals(g):
    """The signal under each removal of the style drift (claw_lib.signals.opd's functions)."""
    from claw_lib.signals.opd import contrast_gap, drift_controls

    a = g["correct"]
    return {"raw": a, "skip1": drift_controls(a, skip_first=1), "center": drift_controls(a, center=True),
            "contrast": contrast_gap(a, [g["wrong"], g["unrelated"]]),
            "contrast_unrelated": contrast_gap(a, [g["unrelated"]]), "contrast_wrong": contrast_gap(a, [g["wrong"]])}


def in_spans(toks, spans) -> np.ndarray:
    """(n,) bool: the token's characters overlap a labelled wrong span."""
    return np.array([any(min(e, b) > max(s, a) for a, b in spans) for _, s, e in toks], bool)


def locate(sig: np.ndarray, inside: np.ndarray) -> dict:
    """Where the most negative value lands: hit (in a span, ties share the credit), first (token 0), first_outside
    (the first token is negative and the most negative of the tokens outside the spans: 法国 -2.05 next to 伦敦
    -5.17), and the share of the negative mass inside the spans."""
    m = sig.min()
    ties = np.flatnonzero(np.isclose(sig, m, rtol=0, atol=1e-9))
    neg = np.minimum(sig, 0.0)
    mass = neg.sum()
    out_idx = np.flatnonzero(~inside)
    first_out = bool(len(out_idx) and out_idx[0] == 0 and sig[0] < -1e-9 and sig[0] <= sig[out_idx].min())
    return {"hit": float(inside[ties].mean()), "first": float((ties == 0).mean()), "first_outside": float(first_out),
            "neg_in_span": float(neg[inside].sum() / mass) if mass < 0 else float("nan"), "min": float(m)}


def decompose(g, inside) -> dict:
    """The correction's gap split into drift (the mean of the controls) and content (the rest): sums over the
    response, on the first token, and inside the spans."""
    ctrl = (g["wrong"] + g["unrelated"]) / 2
    a = g["correct"]
    return {"total": float(a.sum()), "drift": float(ctrl.sum()), "first_correct": float(a[0]),
            "first_wrong": float(g["wrong"][0]), "first_unrelated": float(g["unrelated"][0]),
            "span_correct": float(a[inside].mean()) if inside.any() else float("nan"),
            "span_control": float(ctrl[inside].mean()) if inside.any() else float("nan"),
            "rest_correct": float(a[1:][~inside[1:]].mean()) if (~inside[1:]).any() else float("nan"),
            "rest_control": float(ctrl[1:][~inside[1:]].mean()) if (~inside[1:]).any() else float("nan")}


def score_item(model, tok, it) -> dict:
    """Both signals of one item, with their removals, located and decomposed; the raw arrays for the notebook."""
    rec = {k: it[k] for k in ("source", "id", "lang", "kind", "question", "response", "correction", "hint",
                              "wrong_hint", "unrelated", "spans") if k in it}
    toks, g = opd_gaps(model, tok, it)
    rec.update(hint=it["hint"], tokens=[t[0] for t in toks])
    for sig, (units, gaps) in (("opd", (toks, g)), ("ppl", ppl_rewards(model, tok, it))):
        inside = in_spans(units, it["spans"])
        rec[sig] = {"units": [u[0] for u in units], "inside": inside.tolist(),
                    "gaps": {k: np.round(v, 4).tolist() for k, v in gaps.items()},
                    "located": {k: locate(v, inside) for k, v in removals(gaps).items()} if inside.any() else None,
                    "decompose": decompose(gaps, inside)}
    return rec


def summarise(recs):
    """Rows (source, signal, removal, n, hit, first, first_outside, neg_in_span) and the gap's decomposition per
    source, recomputed from each item's stored gaps (so a changed reading needs no model: ``--summarise-only``).
    first_drift_share: the controls' mean gap on the first token over the correction's; span_content_share: the
    share of the correction's mean gap inside the spans that the controls do not show."""
    rows, dec = [], []
    for src in ("all", "real", "probe_long", "probe_v2"):
        sel = [r for r in recs if src in ("all", r["source"])]
        for sig in SIGNALS:
            parts = [({k: np.asarray(v, np.float64) for k, v in r[sig]["gaps"].items()}, np.asarray(r[sig]["inside"]))
                     for r in sel]
            ok = [{k: locate(v, ins) for k, v in removals(g).items()} for g, ins in parts if ins.any()]
            for rem in REMOVALS:
                if ok:
                    rows.append({"source": src, "signal": sig, "removal": rem, "n": len(ok),
                                 **{m: round(float(np.nanmean([o[rem][m] for o in ok])), 3)
                                    for m in ("hit", "first", "first_outside", "neg_in_span")}})
            ds = [decompose(g, ins) for g, ins in parts]
            if ds:
                d = {k: round(float(np.nanmean([x[k] for x in ds])), 3) for k in ds[0]}
                ctrl_first = (d["first_wrong"] + d["first_unrelated"]) / 2
                d["first_drift_share"] = round(ctrl_first / d["first_correct"], 3) if d["first_correct"] else None
                d["span_content_share"] = round(1 - d["span_control"] / d["span_correct"], 3) if d["span_correct"] else None
                dec.append({"source": src, "signal": sig, "n": len(ds), **d})
    return rows, dec


def write(recs, rows, dec, args, secs):
    """signal_controls.csv (locations), signal_drift.csv (decomposition), signal_controls.md (signal_items.jsonl is
    written item by item as they are scored)."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, table in (("signal_controls.csv", rows), ("signal_drift.csv", dec)):
        with open(out / name, "w", newline="", encoding="utf-8") as fh:
            w = csv.DictWriter(fh, fieldnames=list(table[0]))
            w.writeheader()
            w.writerows(table)
    lines = [f"# The hinted teacher's signal with controls ({args.model}, {len(recs)} items, {secs / 60:.1f} min, "
             f"1 thread)", "", f"Command: `{' '.join(sys.argv)}`", "",
             "## Where the most negative token lands", "",
             "| source | signal | removal | n | hit | first | first outside | neg in span |", "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['source']} | {r['signal']} | {r['removal']} | {r['n']} | {r['hit']} | {r['first']} | "
              f"{r['first_outside']} | {r['neg_in_span']} |" for r in rows]
    lines += ["", "## The correction's gap: drift (mean of the two controls) and content", "",
              "| " + " | ".join(dec[0]) + " |", "|" + "---|" * len(dec[0])]
    lines += ["| " + " | ".join(str(v) for v in d.values()) + " |" for d in dec]
    from claw_lib.utils import limits_section

    lines += ["", limits_section(LIMITS)]
    (out / "signal_controls.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


#: what this page does not establish (the closing section: claw_lib.utils.limits_section)
LIMITS = [
    "that OPD makes a real model more correct: this measures where the hinted teacher's signal lands, without training",
    'a target met: none was fixed before the run; the hit is 0.686 over all 86 items, 0.93 on the 43 real-output items, 0.24 and 0.58 on the constructed long and v2 items',
    'other models: one model (Qwen2.5-Coder-0.5B-Instruct), one pass',
]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="/work/models/qwen05")
    ap.add_argument("--real", type=int, default=60, help="real-world questions answered wrongly")
    ap.add_argument("--long", type=int, default=30, help="rows of data/probe_long.jsonl")
    ap.add_argument("--v2", type=int, default=40, help="rows of data/probe_v2.jsonl")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=str(OUT), help="folder of the results (default: results/real_model)")
    ap.add_argument("--minutes", type=float, default=0, help="stop after this many minutes (0: score every item)")
    ap.add_argument("--summarise-only", action="store_true", help="re-read signal_items.jsonl, rewrite the tables")
    args = ap.parse_args(argv)
    if args.summarise_only:
        path = Path(args.out) / "signal_items.jsonl"
        recs = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        rows, dec = summarise(recs)
        write(recs, rows, dec, args, float(args.minutes) * 60)
        return 0
    import torch

    from claw_lib.models.lm import load_causal_lm

    torch.set_num_threads(args.threads)
    model, tok = load_causal_lm(args.model)
    items = interleave(add_controls(real_items(args.real, args.seed)
                                    + probe_items(ROOT / "data" / "probe_long.jsonl", args.long, args.seed, "probe_long")
                                    + probe_items(ROOT / "data" / "probe_v2.jsonl", args.v2, args.seed, "probe_v2")))
    t0, recs = time.time(), []
    Path(args.out).mkdir(parents=True, exist_ok=True)
    with open(Path(args.out) / "signal_items.jsonl", "w", encoding="utf-8") as fh:
        for k, it in enumerate(items):
            recs.append(score_item(model, tok, it))
            fh.write(json.dumps(recs[-1], ensure_ascii=False) + "\n")
            fh.flush()
            print(f"{k + 1}/{len(items)} {it['id']} {time.time() - t0:.0f}s", flush=True)
            if args.minutes and time.time() - t0 > 60 * args.minutes:
                print(f"stopped after {args.minutes} minutes: {k + 1} of {len(items)} items", flush=True)
                break
    rows, dec = summarise(recs)
    write(recs, rows, dec, args, time.time() - t0)
    print((Path(args.out) / "signal_controls.md").read_text(encoding="utf-8"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
