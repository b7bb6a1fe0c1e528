"""Hit rate / precision / recall of the reward strategies on every probe set, dev and test side by side: v1
(45 pairs), v2 (200 one-sentence pairs, issue 16), the long-output set (180 pairs of 2-5 sentences, issue 23) and,
when it is there, the real-output set (issue 35); per language and per correction style; the defaults against the
one-sentence rules (the long-output rules of issue 23 off) and the article's rules.

With ``--reviser MODEL`` also the reviser (issue 35, :mod:`claw_lib.signals.reviser`) on v2, the long set and the
real-output set, beside the baselines (:mod:`claw_lib.signals.baselines`: the last content word, a lexical edit
distance, and with ``--contrast`` the perplexity contrast with a control on the dev splits). Every reply of the LM is
kept in ``results/probe_reviser_cache.jsonl`` (the contrast's word scores in ``results/probe_contrast_cache.jsonl``),
so a second run, or the tuning grid on dev, runs without the LM::

    python tools/probe_report.py                                                # the rules only, printed
    OMP_NUM_THREADS=1 nice -n 5 python tools/probe_report.py --reviser /work/models/qwen05 --fill --splits dev
    python tools/probe_report.py --reviser /work/models/qwen05 --out results/probe_sets.md --force
"""
from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from claw_lib.alignment.encoders import load_encoder
from claw_lib.config import REVISER_COMBINES, RewardConfig, ReviserConfig
from claw_lib.signals.rewards import ARTICLE_RULES
from claw_lib.text.claims import sentence_spans
from claw_lib.toy import probe
from claw_lib.toy.probe import (PROBE_LONG, PROBE_SET, PROBE_V2, judge_can_read, load_probe_set, probe_metrics,
                                quality_table)
from claw_lib.utils import LIMITS_HEADING, add_report_args, limits_section, publish_report, report_path

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "results" / "probe_reviser_cache.jsonl"
CONTRAST_CACHE = ROOT / "results" / "probe_contrast_cache.jsonl"
#: the learned localiser's section (tools/probe_localiser.py), copied into the report when it is there
LOCALISER_SECTION = ROOT / "results" / "probe_localiser.md"
#: targets on test, one set per probe set: v2's (per language and style), the long set's (per language; the rules
#: and the reviser are held to the same one), the real-output set's (recall at precision)
TARGETS = {"v2": {"hit_rate": 0.9, "precision": 0.8, "recall": 0.85},
           "long": {"hit_rate": 0.8, "precision": 0.75, "recall": 0.7}}
REVISER_TARGETS = {"long": TARGETS["long"], "real": {"precision": 0.85, "recall": 0.8}}
#: the long-output rules of issue 23, switched off: the one-sentence rules (the kit's defaults of 2026-11)
ONE_SENTENCE = {"local": False, "quotes": False, "polarity": False, "swaps": False, "premise": False}
CONFIGS = {"defaults": RewardConfig(), "one-sentence rules": replace(RewardConfig(), **ONE_SENTENCE),
           "article rules": replace(RewardConfig(), **ARTICLE_RULES)}
SETS = {"v1": (PROBE_SET, (None,)), "v2": (PROBE_V2, ("dev", "test")), "long": (PROBE_LONG, ("dev", "test"))}
if getattr(probe, "PROBE_REAL", None) is not None and Path(probe.PROBE_REAL).exists():
    SETS["real"] = (probe.PROBE_REAL, ("dev", "test"))
REVISER_SETS = [s for s in ("v2", "long", "real") if s in SETS]
#: a criterion within this of the best is a tie, which goes to the defaults (ReviserConfig's: no change without
#: evidence); one row of a dev set moves the criterion by about 0.001
TIE = 1e-3
#: the tuning grid on dev (the LM's replies from the cache): min_similarity x retry x combine x gate
GRID = {"min_similarity": (0.6, 0.7, 0.8, 0.9), "retry": (True, False), "combine": REVISER_COMBINES,
        "gate": (0.0, 0.4)}


def measure() -> dict:
    """{(strategy, config, set, split): probe_metrics result}, and the tiny judge on the long rows it can read."""
    e5 = load_encoder("e5")
    res = {}
    for strategy in ("binary", "continuous"):
        for cname, cfg in CONFIGS.items():
            for sname, (path, splits) in SETS.items():
                for split in splits:
                    res[(strategy, cname, sname, split)] = probe_metrics(load_probe_set(path, split), strategy, cfg,
                                                                         encoder=e5)
    from claw_lib.models.lm import load_causal_lm

    tiny = load_causal_lm("tiny")
    for split in ("dev", "test"):
        rows = [r for r in load_probe_set(PROBE_LONG, split) if judge_can_read(r, tiny)]
        res[("perplexity (tiny judge)", "defaults", "long*", split)] = probe_metrics(rows, "perplexity", encoder=e5,
                                                                                      judge=tiny)
        res[("binary + tiny judge 0.5", "defaults", "long*", split)] = probe_metrics(
            rows, "binary", RewardConfig(judge_weight=0.5), encoder=e5, judge=tiny)
        res[("binary", "defaults", "long*", split)] = probe_metrics(rows, "binary", encoder=e5)
    return res


# --------------------------------------------------------------------------- the reviser
def _labeller(sets: dict):
    """conversation -> {"set", "split", "id"} of the probe row it was asked about (for readers of the cache)."""
    def label(messages):
        text = messages[-1]["content"]
        for (sname, split), rows in sets.items():
            for r in rows:
                if r["correction"] in text and (r["output"] in text or any(
                        r["output"][a:b] in text for a, b in sentence_spans(r["output"]))):
                    return {"set": sname, "split": split, "id": r["id"]}
        return {}
    return label


def _rows(sname: str, split: str) -> list:
    return load_probe_set(SETS[sname][0], split)


_RULES = {}


def _rules(rows, strategy: str, e5) -> list:
    """The rules' rewards of ``rows`` (computed once per set and strategy: the grid reuses them)."""
    from claw_lib.signals.rewards import token_rewards

    key = (tuple(r["id"] for r in rows), strategy)
    if key not in _RULES:
        _RULES[key] = [token_rewards(r["output"], r["correction"], strategy, encoder=e5, question=r.get("question"))
                       for r in rows]
    return [copy.deepcopy(tr) for tr in _RULES[key]]


def reviser_results(rows, lm, settings: ReviserConfig, e5, strategy: str = "binary"):
    """(TokenRewards of every row through the reviser, LM seconds per pair)."""
    from claw_lib.signals.reviser import Reviser, revised_rewards

    spent = lm.spent
    out = revised_rewards(rows, strategy, Reviser(lm, settings), RewardConfig(reviser=settings), encoder=e5,
                          rules=_rules(rows, strategy, e5))
    return out, (lm.spent - spent) / max(len(rows), 1)


def fill(lm, settings: ReviserConfig, e5, splits, gate: bool) -> None:
    """Ask the LM everything the tuning grid reads, on ``splits``: the gate's P(yes) of every pair (``gate``), the
    first prompt and the retry for every pair (``min_similarity`` 1 refuses every candidate, so each pair is
    retried; ``combine`` "revision" asks for the pairs where the rules find a contradiction too)."""
    from claw_lib.signals.reviser import Reviser, _GATE, _messages

    for sname in REVISER_SETS:
        for split in splits:
            rows = _rows(sname, split)
            t0 = time.time()
            if gate:
                lm.yes_probability([_messages(_GATE, r.get("question"), r["output"], r["correction"], "")
                                    for r in rows], settings.batch_size)
            reviser_results(rows, lm, replace(settings, min_similarity=1.0, gate=0.0, retry=True, combine="revision"),
                            e5)
            print(f"filled {sname} {split}: {len(rows)} rows, {time.time() - t0:.0f} s", file=sys.stderr, flush=True)


def _score(ms) -> float:
    """The tuning criterion: the mean of hit rate, precision and recall over the dev sets."""
    return float(np.nanmean([[m[k] for k in ("hit_rate", "precision", "recall")] for m in ms]))


def tune(lm, e5, base: ReviserConfig) -> tuple:
    """The grid (:data:`GRID`) on the dev splits, from the cache; returns (rows of the table, the settings chosen: the
    best criterion, or ``base`` when it ties with the best, :data:`TIE`)."""
    import itertools

    table = []
    gates = GRID["gate"] if _has_gate(lm) else (0.0,)
    for ms, retry, combine, gate in itertools.product(GRID["min_similarity"], GRID["retry"], GRID["combine"], gates):
        st = replace(base, min_similarity=ms, retry=retry, gate=gate, combine=combine)
        res = {s: probe_metrics(_rows(s, "dev"), "binary", results=reviser_results(_rows(s, "dev"), lm, st, e5)[0])
               for s in REVISER_SETS}
        table.append((st, _score(res.values()), res))
    top = max(score for _, score, _ in table)
    tied = [st for st, score, _ in table if score >= top - TIE]
    return table, base if base in tied else next(st for st, score, _ in table if score == top)


def _has_gate(lm) -> bool:
    return any(True for v in lm.cache.values() if isinstance(v, float))


def contrast_results(rows, sname: str, judge, margin: float = 0.0):
    """The perplexity contrast with a control on ``rows`` (word scores cached per row in CONTRAST_CACHE)."""
    from claw_lib.signals.baselines import contrast_from_scores
    from claw_lib.signals.opd import unrelated_hint
    from claw_lib.signals.rewards import token_rewards
    from claw_lib.text.corrections import clean_correction, guess_lang

    cache = {}
    if CONTRAST_CACHE.exists():
        cache = {(r["set"], r["id"]): r for r in map(json.loads, CONTRAST_CACHE.read_text("utf-8").splitlines()) if r}
    cfg = RewardConfig(contrast=False, clean=False)
    out, spent = [], 0.0
    for r in rows:
        got = cache.get((sname, r["id"]))
        if got is None:
            t0 = time.perf_counter()
            control = unrelated_hint(guess_lang(r["output"], r["correction"]), 0)
            sc = [token_rewards(r["output"], text, "perplexity", cfg, judge=judge, question=r.get("question"))
                  .info.get("word_scores") for text in (clean_correction(r["correction"]).text or r["correction"],
                                                          control)]
            got = {"set": sname, "id": r["id"], "control": control, "seconds": round(time.perf_counter() - t0, 3),
                   "with": [round(float(x), 4) for x in sc[0]], "control_scores": [round(float(x), 4) for x in sc[1]]}
            with open(CONTRAST_CACHE, "a", encoding="utf-8") as f:
                f.write(json.dumps(got, ensure_ascii=False) + "\n")
        spent += got["seconds"]
        out.append(contrast_from_scores(r["output"], got["with"], got["control_scores"], margin))
    return out, spent / max(len(rows), 1)


def measure_reviser(spec: str, splits, contrast: bool, tune_grid: bool) -> dict:
    """Everything the reviser's sections show: the baselines, the rules and the reviser on each set and split, the
    tuning grid on dev, the settings chosen, s/pair."""
    from claw_lib.signals.baselines import last_word_rewards, lexical_rewards
    from claw_lib.signals.reviser import CachedLM, LocalLM

    e5 = load_encoder("e5")
    sets = {(s, sp): _rows(s, sp) for s in REVISER_SETS for sp in ("dev", "test")}
    lm = CachedLM(_local(spec), CACHE, _labeller(sets))
    base = ReviserConfig()
    out = {"grid": None, "settings": base, "metrics": {}, "seconds": {}}
    if tune_grid:
        out["grid"], out["settings"] = tune(lm, e5, base)
    st = out["settings"]
    for (sname, split), rows in sets.items():
        if split not in splits:
            continue
        m = out["metrics"]
        m[("last content word", sname, split)] = probe_metrics(rows, last_word_rewards, name="last content word")
        m[("lexical edit distance", sname, split)] = probe_metrics(rows, lexical_rewards, name="lexical")
        for strategy in ("binary", "continuous"):
            m[(f"rules, {strategy}", sname, split)] = probe_metrics(rows, strategy, encoder=e5)
            res, sec = reviser_results(rows, lm, st, e5, strategy)
            m[(f"reviser, {strategy}", sname, split)] = probe_metrics(rows, strategy, results=res)
            out["seconds"][(sname, split)] = sec
        # what the LM costs when it reads every pair (combine "revision"), not only where the rules find nothing
        out["seconds"][("every pair", sname, split)] = reviser_results(rows, lm, replace(st, combine="revision"), e5)[1]
        if contrast and split == "dev":
            for margin in (0.0, 1.0):
                res, sec = contrast_results(rows, sname, _judge(spec), margin)
                m[(f"perplexity contrast, margin {margin:g}", sname, split)] = probe_metrics(rows, "perplexity",
                                                                                            results=res)
            out["seconds"][("contrast", sname, split)] = sec
    return out


_LOADED = {}


def _judge(spec: str):
    if spec not in _LOADED:
        from claw_lib.models.lm import load_causal_lm

        _LOADED[spec] = load_causal_lm(spec)
    return _LOADED[spec]


def _local(spec: str):
    """The LM behind the cache: its tokenizer counts the budgets; the model loads only when a reply is missing (a
    cached run needs none)."""
    from claw_lib.models.lm import encode

    class Lazy:
        tok = None

        def length(self, text):
            if self.tok is None:
                from transformers import AutoTokenizer

                self.tok = AutoTokenizer.from_pretrained(spec)
            return len(encode(self.tok, text))

        def _lm(self):
            from claw_lib.signals.reviser import LocalLM

            return LocalLM(*_judge(spec))

        def chat(self, *a):
            return self._lm().chat(*a)

        def yes_probability(self, *a):
            return self._lm().yes_probability(*a)
    return Lazy()


# --------------------------------------------------------------------------- the report
def _key(k) -> str:
    strategy, cname, sname, split = k
    return f"{strategy}, {cname}, {sname}" + (f" {split}" if split else "")


def report(res: dict, rv: dict = None) -> str:
    out = ["# Probe sets: hit rate / precision / recall of the negatively rewarded tokens", "",
           "Generated by `python tools/probe_report.py`. Every default was chosen on a dev split (the evidence rules on "
           "v2's, the long-output rules on the long set's, the reviser's settings on all three); test was computed "
           "after. Cells: hit rate / precision / recall. The "
           "one-sentence rules: the defaults with the long-output rules (local, quotes, polarity, swaps, premise) "
           "switched off, as the kit had them in 2026-11.",
           "Targets on test: v2 (the evidence rules) hit >= 0.9, precision >= 0.8, recall >= 0.85 per language and "
           "style; the long set (the long-output rules and the reviser alike) hit >= 0.8, precision >= 0.75, recall >= "
           "0.7 per language; the real-output set: below.", ""]
    main = {_key(k): v for k, v in res.items() if k[2] != "long*"}
    out += ["## All probe sets, dev and test side by side", "", quality_table(main), ""]
    for sname, title in (("v2", "Probe set v2"), ("long", "Long-output set"), ("real", "Real-output set")):
        part = {_key(k): v for k, v in res.items() if k[2] == sname}
        if part:
            out += [f"## {title}, per language", "", quality_table(part, "lang"), "",
                    f"## {title}, per correction style", "", quality_table(part, "style"), ""]
    judge = {_key(k): v for k, v in res.items() if k[2] == "long*"}
    n = {split: next(v["n"] for k, v in res.items() if k[2] == "long*" and k[3] == split) for split in ("dev", "test")}
    out += ["## A judge LM on the long set", "",
            f"`long*`: the rows whose question and output fit the tiny GPT's 160 positions ({n['dev']} dev, "
            f"{n['test']} test). The tiny GPT knows only its fact world, so its perplexity rewards on real-world "
            "facts are noise, and filling the words the rules leave at 0 with them (`judge_weight`) costs precision.",
            "", quality_table(judge), ""]
    if rv is not None:
        out += reviser_sections(rv)
    if LOCALISER_SECTION.exists():  # tools/probe_localiser.py wrote it
        out += [LOCALISER_SECTION.read_text("utf-8").split(LIMITS_HEADING)[0].strip(), ""]
    out += ["## Targets not reached on test", ""] + (_misses(res, rv) or ["(none)"]) + [""]
    out += [limits_section(LIMITS, LIMITS_CORRECTIONS), ""]
    return "\n".join(out)


_SHOWN = ("scope", "gate", "samples", "min_similarity", "retry", "combine")


def reviser_sections(rv: dict) -> list:
    from dataclasses import asdict

    st = rv["settings"]
    out = ["## The reviser: an instruct LM reads the correction, the alignment localises", "",
           "Targets on test with the reviser: per language on the long set the rules' own, hit >= 0.8, precision >= "
           "0.75, recall >= 0.7; on the real-output set recall >= 0.8 at precision >= 0.85; >= 0.95 of the no-error rows without a "
           "negative word; every correction style's hit rate above the last content word's; v2 not below the rules.",
           "",
           "Reviser: Qwen2.5-Coder-0.5B-Instruct (fp32, CPU, one thread), greedy. Rows: the baselines (the last "
           "content word; a lexical edit distance between the output's and the correction's words), the rules (the "
           "kit's defaults) and the reviser (`revised_rewards`: its revision where it gave a usable one, the rules "
           "elsewhere). Every LM reply is in `results/probe_reviser_cache.jsonl`.",
           f"Settings chosen on dev: `{ {k: v for k, v in asdict(st).items() if k in _SHOWN} }`.", ""]
    for sname in REVISER_SETS:
        part = {f"{k[0]}, {k[2]}": v for k, v in rv["metrics"].items() if k[1] == sname}
        if not part:
            continue
        out += [f"### {sname}, per language", "", quality_table(part, "lang"), "",
                f"### {sname}, per correction style", "", quality_table(part, "style"), "",
                f"### {sname}: whole-span recall, no-error rows without a negative word, which path", "",
                "| | span recall | no-error ok | revision / rules |", "|---|---|---|---|"]
        for key, m in part.items():
            src = m.get("sources", {})
            out.append(f"| {key} | {m['span_recall']:.2f} | {m['no_error_ok']:.2f} | "
                       f"{src.get('revision', 0)} / {src.get('rules', 0)} |")
        out.append("")
    out += ["### Seconds per pair (this 2-core CPU, shared with other jobs, one thread; the LM's time when its replies "
            "were made, over all pairs of the split: with rules_first the LM reads only the pairs where the rules find "
            "no contradiction; 'every pair': the LM reads them all; 'contrast': the two scoring passes of the "
            "perplexity contrast)", "",
            "| | s/pair |", "|---|---|"] + [f"| {' '.join(k)} | {v:.1f} |" for k, v in rv["seconds"].items()] + [""]
    if rv["grid"]:
        out += ["### The tuning grid on dev (binary; criterion: the mean of hit, precision and recall over the dev "
                "sets; cells: hit / precision / recall)", "",
                "| min_similarity | retry | combine | gate | criterion | " + " | ".join(REVISER_SETS) + " |",
                "|---|---|---|---|---|" + "---|" * len(REVISER_SETS)]
        for st, score, res in rv["grid"]:
            cells = [f"{res[s]['hit_rate']:.2f} / {res[s]['precision']:.2f} / {res[s]['recall']:.2f}" if s in res
                     else "-" for s in REVISER_SETS]
            out.append(f"| {st.min_similarity} | {st.retry} | {st.combine} | {st.gate} | {score:.3f} | "
                       + " | ".join(cells) + " |")
        out.append("")
    return out


def _misses(res: dict, rv: dict) -> list:
    miss = []
    for sname, groups in (("v2", ("lang", "style")), ("long", ("lang",))):
        for strategy in ("binary", "continuous"):
            m = res[(strategy, "defaults", sname, "test")]
            cells = [("all", m)] + [(f"{g}={v}", s) for g, vals in m["groups"].items() if g in groups
                                    for v, s in vals.items()]
            for where, s in cells:
                for key, target in TARGETS[sname].items():
                    if not s[key] >= target:
                        miss.append(f"- {sname}, {strategy}, {where}: {key} {s[key]:.2f} < {target}")
    if rv is not None:
        miss += _reviser_misses(rv["metrics"])
    return miss


def _reviser_misses(metrics: dict) -> list:
    """The reviser's targets on test (issue 35): per language on the long and real sets (:data:`REVISER_TARGETS`),
    >= 0.95 of the no-error rows without a negative word, every correction style's hit rate above the trivial
    baseline's, v2 not lower than the rules."""
    miss = []
    for (name, sname, split), m in metrics.items():
        if name != "reviser, binary" or split != "test":
            continue
        cells = [("all", m)] + [(f"lang={v}", s) for v, s in m["groups"].get("lang", {}).items()]
        for where, s in cells if sname in REVISER_TARGETS else ():
            for key, target in REVISER_TARGETS[sname].items():
                if not s[key] >= target:
                    miss.append(f"- reviser, {sname}, {where}: {key} {s[key]:.2f} < {target}")
        if not m["no_error_ok"] >= 0.95:
            miss.append(f"- reviser, {sname}: no-error rows without a negative word {m['no_error_ok']:.2f} < 0.95")
        trivial = metrics[("last content word", sname, split)]["groups"].get("style", {})
        for style, s in m["groups"].get("style", {}).items():
            base = trivial.get(style, {}).get("hit_rate", float("nan"))
            if base == base and not s["hit_rate"] > base:  # a style without a rejected span has no hit rate
                miss.append(f"- reviser, {sname}, style={style}: hit_rate {s['hit_rate']:.2f} <= the last content "
                            f"word's {base:.2f}")
        rules = metrics[("rules, binary", sname, split)]
        for key in ("hit_rate", "precision", "recall") if sname == "v2" else ():
            if m[key] < rules[key]:
                miss.append(f"- reviser, v2: {key} {m[key]:.2f} below the rules' {rules[key]:.2f}")
    return miss


#: what this page does not establish (the closing section: claw_lib.utils.limits_section)
LIMITS = [
    "that the alignment locates corrections in general: no test split reaches its targets (the list above); on the "
    "real outputs of a 0.5B model the rules put the most negative word on the corrected one in 0.46 of the pairs "
    "(docs/reproduction.md)",
    "other people's corrections: the correction styles are the kit's, written or generated for these sets, and the "
    "real outputs come from one 0.5B model",
]
LIMITS_CORRECTIONS = [
    ("2026-12-07", "the long set had two target sets, hit >= 0.8 / precision >= 0.75 / recall >= 0.7 (written with "
                   "the long-output rules) and 0.85 / 0.8 / 0.75 (written with the reviser); both are now the first. "
                   "Dev does not meet it either: its hit rate is 0.79, overall and in English"),
]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_report_args(ap, "the report (Markdown)")
    ap.add_argument("--reviser", metavar="MODEL", help="also measure the reviser on this instruct LM (name / folder)")
    ap.add_argument("--splits", nargs="+", default=["dev", "test"], choices=["dev", "test"],
                    help="the splits the reviser is measured on (tune on dev first)")
    ap.add_argument("--fill", action="store_true", help="only ask the LM what the tuning grid reads, into the cache")
    ap.add_argument("--gate", action="store_true", help="--fill: the gate's P(yes) too")
    ap.add_argument("--contrast", action="store_true", help="the perplexity contrast with a control on dev")
    ap.add_argument("--no-tune", action="store_true", help="the reviser's defaults, no grid")
    a = ap.parse_args(argv)
    if a.fill:
        from claw_lib.signals.reviser import CachedLM

        sets = {(s, sp): _rows(s, sp) for s in REVISER_SETS for sp in ("dev", "test")}
        fill(CachedLM(_local(a.reviser), CACHE, _labeller(sets)), ReviserConfig(batch_size=16), load_encoder("e5"), a.splits,
             a.gate)
        return 0
    out = report_path(a)  # refused at once, before minutes of measurement (TL13, TL14)
    rv = measure_reviser(a.reviser, a.splits, a.contrast, not a.no_tune) if a.reviser else None
    publish_report(report(measure(), rv), out, a.force)
    if rv is not None and out is not None:  # the numbers notebook 10 shows (CI has no real model)
        publish_json(rv, out.with_name("probe_reviser.json"), a.force)
    return 0


def _compact(m: dict) -> dict:
    keys = ("n", "hit_rate", "precision", "recall", "span_recall", "no_error_ok", "tp", "fp", "fn")
    return {**{k: m[k] for k in keys}, "sources": m.get("sources", {}),
            "groups": {g: {v: {k: x[k] for k in keys} for v, x in vals.items()} for g, vals in m["groups"].items()
                       if g in ("lang", "style")}}


def publish_json(rv: dict, path: Path, force: bool) -> None:
    """``results/probe_reviser.json``: every metric of the reviser's sections (key "name | set | split"), s/pair,
    the settings chosen on dev, the tuning grid; NaN written as null."""
    from dataclasses import asdict

    from claw_lib.apps.batch import finite
    from claw_lib.utils import atomic_write, check_new_file

    check_new_file(path, force)
    doc = {"settings": asdict(rv["settings"]),
           "metrics": {" | ".join(k): _compact(m) for k, m in rv["metrics"].items()},
           "seconds_per_pair": {" ".join(k): round(v, 2) for k, v in rv["seconds"].items()},
           "grid": [{"min_similarity": st.min_similarity, "retry": st.retry, "combine": st.combine, "gate": st.gate,
                     "criterion": round(score, 4),
                     **{s: [round(res[s][k], 4) for k in ("hit_rate", "precision", "recall")] for s in res}}
                    for st, score, res in rv["grid"] or []]}
    with atomic_write(path, replace=force) as f:
        f.write(json.dumps(finite(doc), ensure_ascii=False, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
