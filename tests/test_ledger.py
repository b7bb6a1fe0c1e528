"""The reproduction ledger (docs/reproduction.md) is what tools/ledger.py writes from the committed results; its
verdict rule by hand; its numbers against a computation from the CSVs that does not use claw_lib.rl.ablation; the
READMEs and notebook 09a link it."""
import csv
import importlib.util
import json
import re
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _ledger():
    spec = importlib.util.spec_from_file_location("ledger", ROOT / "tools" / "ledger.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_committed_ledger_is_what_the_script_writes():
    mod = _ledger()
    assert (ROOT / "docs" / "reproduction.md").read_text(encoding="utf-8") == mod.render(), \
        "docs/reproduction.md is stale: run .venv/bin/python tools/ledger.py --write"
    assert mod.main(["--check"]) == 0


def test_verdict_and_evidence_rules_by_hand():
    mod = _ledger()
    p = lambda mean, se, n=10, **k: {"mean": mean, "se": se, "n": n, **k}  # noqa: E731
    assert mod.verdict(p(0.3, 0.1), +1) == "reproduced"               # 3.0 s.e. > t(9) = 2.26
    assert mod.verdict(p(0.1, 0.1), +1) == "direction only"           # within noise
    assert mod.verdict(p(0.215, 0.1), +1) == "direction only"         # 2.15 s.e.: beyond 2, not beyond t(9)
    assert mod.verdict(p(0.3, 0.01, n=3), +1) == "direction only"     # fewer seeds than fixed: never reproduced
    assert mod.verdict(p(-0.3, 0.01, n=3), +1) == "inconclusive"      # ... and never not reproduced
    assert mod.verdict(p(-0.3, 0.1), +1) == "not reproduced"          # the same evidence the other way
    assert mod.verdict(p(0.0, 0.0), +1) == "tie"
    assert mod.verdict(p(-9.8, 4.1, n=5), -1) == "direction only"     # five seeds are fewer than fixed
    # within noise, a direction needs more seeds its way than the other: 5 / 0 / 5 is a tie (the step-8 grid's final
    # score, +0.022 +- 0.053); 3 / 0 / 7 against a claim of a negative difference is its direction; the opposite
    # sign within noise is inconclusive, not "not reproduced"
    assert mod.verdict(p(0.022, 0.053, wins=5, ties=0, losses=5), +1) == "tie"
    assert mod.verdict(p(-0.128, 0.085, wins=3, ties=0, losses=7), -1) == "direction only"
    assert mod.verdict(p(0.065, 0.045, wins=6, ties=2, losses=2), +1) == "direction only"
    assert mod.verdict(p(-0.8, 0.6, wins=0, ties=8, losses=2), -1) == "direction only"
    assert mod.verdict(p(-0.05, 0.1, wins=3, ties=0, losses=7), +1) == "inconclusive"
    # a claim of no difference (sign 0): within noise a tie, beyond it on ten seeds not reproduced
    assert mod.verdict(p(-0.128, 0.085), 0) == "tie" and mod.verdict(p(0.186, 0.072), 0) == "not reproduced"
    assert mod.verdict(p(0.0, 0.0, n=3, wins=0, ties=3, losses=0), 0) == "tie"
    # a grid extended after a look: the seeds added after it must pass alone
    passes, fails = p(0.24, 0.05, n=7), p(-11.0, 4.5, n=5)
    assert mod.verdict(p(0.142, 0.06, second=passes), +1) == "reproduced"
    assert mod.verdict(p(-9.8, 3.1, second=fails), -1) == "direction only"
    assert mod.verdict(p(-0.3, 0.1, second=p(0.1, 0.2, n=5)), +1) == "inconclusive"
    assert mod.evidence(p(0.3, 0.1)).startswith("10 seeds, paired, 3.00 s.e. > t(9) = 2.26 /")
    assert mod.evidence(p(0.2, 0.1)).startswith("10 seeds, paired, 2.00 s.e. <= t(9) = 2.26, borderline")
    assert "borderline" not in mod.evidence(p(0.1, 0.1)) and "borderline" not in mod.evidence(p(0.3, 0.1))
    assert mod.evidence(p(0.2, 0.1, n=3)).startswith("3 seeds, paired, 2.00 s.e. <= t(2) = 4.30")
    assert "extended after a look at 3 seeds, the 7 added alone +0.240 +- 0.050" in mod.evidence(p(0.142, 0.06, second=passes))


def test_t_critical_values_against_a_table_and_an_integral():
    """Student's t two-sided 95 % critical values: a printed table (Fisher & Yates) and the t density integrated
    with numpy (the tail beyond t(n - 1) holds 2.5 %)."""
    from math import gamma, pi, sqrt

    mod = _ledger()
    for n, t in ((2, 12.706), (3, 4.303), (5, 2.776), (7, 2.447), (10, 2.262), (30, 2.045)):
        assert abs(mod.t_crit(n) - t) < 1e-3, (n, mod.t_crit(n))
        nu = n - 1
        x = np.linspace(mod.t_crit(n), 2000.0, 2_000_001)
        dens = gamma((nu + 1) / 2) / (sqrt(nu * pi) * gamma(nu / 2)) * (1 + x * x / nu) ** (-(nu + 1) / 2)
        tail = float(np.sum((dens[1:] + dens[:-1]) / 2 * np.diff(x)))
        assert abs(tail - 0.025) < 2e-3 if nu == 1 else abs(tail - 0.025) < 1e-4, (n, tail)


def test_the_legend_states_the_rule_and_multiplicity():
    text = (ROOT / "docs" / "reproduction.md").read_text(encoding="utf-8")
    head = text.split("| # | source |")[0]
    for words in ("fixed before looking", "t(9) = 2.26", "**tie**", "**inconclusive**", "borderline",
                  "the seeds added after the look are reported alone"):
        assert words in head, words
    rows = _ledger().ledger_rows()
    tested = sum(" s.e. " in r[5] for r in rows)
    assert f"**Multiplicity / 多重比较:** {len(rows)} rows, {tested} of them" in text and tested >= 20
    assert f"about {tested * 0.05:.1f} of them" in text


def _csv(folder):
    with open(ROOT / "results" / folder / "ablation.csv", newline="") as f:
        return list(csv.DictReader(f))


def _pair(rows_a, rows_b, value):
    a = {r["seed"]: value(r) for r in rows_a}
    b = {r["seed"]: value(r) for r in rows_b}
    d = np.array([a[k] - b[k] for k in sorted(set(a) & set(b))])
    return d.mean(), d.std(ddof=1) / np.sqrt(len(d))


def test_ledger_numbers_against_the_csvs():
    """Three rows recomputed from the raw CSVs with numpy: a score, a speed (never = 16) and the live row."""
    text = (ROOT / "docs" / "reproduction.md").read_text(encoding="utf-8")
    t3 = _csv("table3")
    pick = lambda rows, u, s: [r for r in rows if r["user"] == u and r["strategy"] == s]  # noqa: E731
    m, se = _pair(pick(t3, "teacher-vague", "opd"), pick(t3, "teacher-vague", "binary_rl"), lambda r: float(r["final_score"]))
    assert f"{m:+.3f} +- {se:.3f} (9 / 0 / 1 of 10" in text
    ta = _csv("ta")
    steps = lambda r: float(r["steps_to_stable"]) if r["steps_to_stable"] not in ("", "None") else float(r["steps"])  # noqa: E731
    m, se = _pair(pick(ta, "ta-v2", "combined"), pick(ta, "ta-v2", "binary_rl"), steps)
    assert (round(m, 1), round(se, 1)) == (-0.8, 0.6) and f"{m:+.1f} +- {se:.1f} steps (2 / 8 / 0 of 10" in text
    # the live system: sessions until three holding sessions in a row, never = the run's length
    with open(ROOT / "results" / "serve" / "sessions_to_stable.csv", newline="") as f:
        live = list(csv.DictReader(f))
    counted = {}
    for (s, k) in {(r["strategy"], r["seed"]) for r in live}:
        holds = [r["holds"] == "True" for r in sorted((r for r in live if (r["strategy"], r["seed"]) == (s, k)),
                                                     key=lambda r: int(r["session"]))]
        first = next((i for i in range(len(holds) - 2) if all(holds[i:i + 3])), len(holds))
        counted[(s, k)] = first
    d = np.array([counted[("combined", k)] - counted[("binary_rl", k)] for k in sorted({k for _, k in counted})])
    assert f"{d.mean():+.1f} +- {d.std(ddof=1) / np.sqrt(len(d)):.1f} sessions" in text


def _row(text, words):
    (line,) = [ln for ln in text.splitlines() if ln.startswith("| ") and words in ln]
    return line


def test_the_rows_the_fourth_reading_asked_for_against_the_files():
    """Every number of the rows added or corrected after the fourth reading, recomputed from the committed files
    without claw_lib: step 8 in the paper's regime, the seeds added after a look, the probe sets, the serving
    benchmark, OPD's per-token direction on the real model, every real-model run's correctness, the style against
    a one-line prompt, and the censored interactions row."""
    text = (ROOT / "docs" / "reproduction.md").read_text(encoding="utf-8")
    t3, ab = _csv("table3"), _csv("pair_ab")
    pick = lambda rows, u, s, f=lambda r: True: [r for r in rows if r["user"] == u and r["strategy"] == s and f(r)]  # noqa: E731
    m, se = _pair(pick(t3, "teacher-vague", "opd"), pick(t3, "teacher-vague", "binary_rl"), lambda r: float(r["score_at_8"]))
    row = _row(text, "the paper's regime: teacher user, sparse hints (half the complaints vague)")
    assert f"{m:+.3f} +- {se:.3f} (8 / 0 / 2 of 10" in row and "**not reproduced**" in row
    assert "**tie**" in _row(text, "nine in ten complaints vague, `results/step8/`, score at step 8")
    late = lambda r: int(r["seed"]) >= 3  # noqa: E731
    m, se = _pair(pick(ab, "correcting-pair", "binary", late), pick(ab, "correcting-pair", "sentence", late),
                  lambda r: float(r["final_score"]))
    assert f"the 7 added alone {m:+.3f} +- {se:.3f}" in _row(text, "token-level (binary) beats")
    assert "the 5 added alone -11.0 +- 4.5" in _row(text, "the live system, its loops run in lock-step")
    # the probe sets' test splits
    metrics = json.loads((ROOT / "results" / "probe_reviser.json").read_text(encoding="utf-8"))["metrics"]
    row = _row(text, "the alignment locates the corrected words in general")
    for key in ("rules, binary | v2 | test", "rules, binary | long | test", "rules, binary | real | test",
                "reviser, binary | real | test"):
        mm = metrics[key]
        assert f"{mm['hit_rate']:.2f} / {mm['precision']:.2f} / {mm['recall']:.2f}" in row, key
    assert "0.46 / 0.55 / 0.34" in row and "**not reproduced**" in row
    # the serving benchmark: every number of the row is in the committed page
    bench = (ROOT / "results" / "serve" / "bench_serve.md").read_text(encoding="utf-8")
    row = _row(text, "the asynchronous, non-blocking system")
    for number in re.findall(r"\d+\.\d+", row.split("|")[5]):
        assert number in bench, number
    assert "x1.25" in row and "x1.49" in row and "= 0.96" in row
    # OPD's direction with controls
    with open(ROOT / "results" / "real_model" / "signal_controls.csv", newline="") as f:
        sig = {(r["source"], r["signal"], r["removal"]): r for r in csv.DictReader(f)}
    row = _row(text, "OPD's advantage is negative on the token")
    assert f"on {sig[('all', 'opd', 'raw')]['hit']} of 86 items" in row and "0.686" in row
    assert f"{sig[('real', 'opd', 'contrast_unrelated')]['hit']} with the unrelated contrast" in row
    # the slow start's cause: the accepted share of hinted turns in steps 1-4
    health = json.loads((ROOT / "results" / "opd_health.json").read_text(encoding="utf-8"))
    row = _row(text, "OPD starts slowly because strict filtering")
    for user in ("teacher", "student"):
        shares = [r["opd/accepted_fraction"] for runs in health[user].values() for r in runs
                  if r["step"] <= 4 and "opd/accepted_fraction" in r]
        assert len(shares) == 12 and f"{user} {np.mean(shares):.2f}" in row


@pytest.mark.parametrize("words, files", [
    ("OPD's advantage is negative on the token", ["real_model/signal_controls.csv"]),
    ("token rewards from the user's corrections make a real model", ["real_model/train_runs.csv"]),
    ("the asynchronous, non-blocking system", ["serve/bench_serve.md"]),
    ("the alignment locates the corrected words in general", ["probe_sets.md"]),
])
def test_every_number_of_a_measurement_row_is_in_its_file(words, files):
    """Each decimal number of these rows' results is written in the committed file the row reads."""
    text = (ROOT / "docs" / "reproduction.md").read_text(encoding="utf-8")
    result = _row(text, words).split(" | ")[4]
    source = "\n".join((ROOT / "results" / f).read_text(encoding="utf-8") for f in files)
    numbers = re.findall(r"\d+\.\d+", result.replace("0.5B", ""))
    assert numbers and all(n in source for n in numbers), [n for n in numbers if n not in source]


def test_the_real_model_rows_against_the_csvs():
    text = (ROOT / "docs" / "reproduction.md").read_text(encoding="utf-8")
    runs = {}
    for name in ("train_runs.csv", "learning_pilots.csv", "learning.csv"):
        with open(ROOT / "results" / "real_model" / name, newline="") as f:
            for r in csv.DictReader(f):
                runs.setdefault(r["run"], []).append(r)
    first_last = {k: (float(min(v, key=lambda r: int(r["step"]))["correct"]),
                      float(max(v, key=lambda r: int(r["step"]))["correct"])) for k, v in runs.items()}
    assert not any(b > a for a, b in first_last.values())  # no run answered more correctly
    lowered = sum(b < a for a, b in first_last.values())
    row = _row(text, "the model gets better from users' next messages")
    assert f"0 of {len(runs)} runs raised correctness" in row and f"{lowered} lowered it" in row
    final = [max(v, key=lambda r: int(r["step"])) for k, v in runs.items() if k.startswith("final")]
    style = np.mean([float(r["style"]) for r in final])
    correct = np.mean([float(r["correct"]) for r in final])
    with open(ROOT / "results" / "real_model" / "learning_reference.csv", newline="") as f:
        ref = [r for r in csv.DictReader(f) if (r["split"], r["user"], r["prompt"]) == ("heldout", "student", "hinted")][0]
    row = _row(text, "OPD teaches a real model the user's style")
    assert f"-> {style:.3f}" in row and f"-> {correct:.3f}" in row and style <= float(ref["style"])
    assert f"style {ref['style']}, correct {ref['correct']}" in row and correct < float(ref["correct"])
    # the censored interactions row: Fisher's exact p of 3 / 10 against 0 / 10, by the hypergeometric sum
    from math import comb

    probs = [comb(10, k) * comb(10, 3 - k) / comb(20, 3) for k in range(4)]
    p = sum(q for q in probs if q <= probs[3] + 1e-12)
    assert f"Fisher's exact p = {p:.2f}" in _row(text, "the student user needs more interactions")


def _stored_outputs(stem: str) -> str:
    (path,) = (ROOT / "notebooks").glob(f"{stem}_*.ipynb")
    nb = json.loads(path.read_text(encoding="utf-8"))
    out = []
    for c in nb["cells"]:
        for o in c.get("outputs", []):
            out.append("".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", "")))
    return "\n".join(out)


def test_worked_example_rows_hold_the_notebooks_numbers():
    """The rows whose result is a notebook's worked example are typed into tools/ledger.py, not computed from a CSV:
    every number of such a result must be printed by that notebook (its stored outputs), so that a re-executed notebook
    whose number moved fails here instead of leaving the ledger stale."""
    rows = [r for r in _ledger().ledger_rows() if re.match(r"nb \w+", r[3])]
    assert len(rows) >= 8
    for r in rows:
        stem = re.match(r"nb (\w+)", r[3]).group(1)
        outputs = _stored_outputs(stem)
        for number in re.findall(r"-?\d+\.\d+", r[4]):
            assert number in outputs, (stem, number, r[1])


def test_source_numbers_are_the_sources():
    """A claim quotes its source's numbers: v2's from docs/openclaw_v2.md's transcription tables, the digest's from the
    seed digest (when ../shared/seeds is present) or the paper's Table 3 as claw_lib.rl.grids.PAPER holds it."""
    from claw_lib.rl.grids import PAPER

    rows = _ledger().ledger_rows()
    v2_doc = (ROOT / "docs" / "openclaw_v2.md").read_text(encoding="utf-8")
    for r in (r for r in rows if r[0].startswith("v2")):
        for number in re.findall(r"\d+\.\d+", r[1]):
            assert f"| {number}" in v2_doc or f" {number} " in v2_doc, (number, r[1])
    table3 = {f"{x:.2f}" for pair in PAPER.values() for x in pair}
    seeds = sorted((ROOT.parent / "shared" / "seeds").glob("003_*.txt"))
    digest = seeds[0].read_text(encoding="utf-8") if seeds else None
    for r in (r for r in rows if r[0] == "digest"):
        for number in re.findall(r"\d+(?:\.\d+)?", r[1].replace("Table 3", "")):
            if "Table 3" in r[1] and number in table3:
                continue  # the paper's Table 3: its 8-step column is not in the digest
            assert digest is None or number in digest, (number, r[1])


def test_ledger_has_every_kind_of_row():
    rows = _ledger().ledger_rows()
    sources = {r[0] for r in rows}
    assert sources == {"article", "digest", "v2 (transcription)"}
    assert any("live system" in r[1] for r in rows) and any("sessions_to_stable" in r[3] for r in rows)
    assert {r[-1] for r in rows} == set(_ledger().VERDICTS)


@pytest.mark.parametrize("readme", ["README.md", "README.zh-CN.md"])
def test_readmes_link_the_ledger_at_the_top(readme):
    head = (ROOT / readme).read_text(encoding="utf-8").split("\n## ", 1)[0]
    assert "docs/reproduction.md" in head and "2603.10165" in head


def test_notebook_09a_opens_with_the_ledger():
    nb = json.loads((ROOT / "notebooks" / "09a_table3.ipynb").read_text(encoding="utf-8"))
    first = "".join(nb["cells"][0]["source"])
    assert "docs/reproduction.md" in first and "For the story, read this table and the Q/A lines" in first
    assert "想看结论，读这张表和每节的问答行" in first
