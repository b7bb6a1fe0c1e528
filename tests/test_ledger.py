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
    assert mod.verdict(p(0.3, 0.1), +1) == "reproduced"
    assert mod.verdict(p(0.1, 0.1), +1) == "direction only"        # within two s.e.
    assert mod.verdict(p(0.3, 0.01, n=3), +1) == "direction only"  # three seeds are never enough
    assert mod.verdict(p(-0.3, 0.1), +1) == "not reproduced" and mod.verdict(p(0.0, 0.0), +1) == "not reproduced"
    assert mod.verdict(p(-9.8, 4.1, n=5, live=True), -1) == "reproduced"
    # within two s.e., a direction needs more seeds its way than the other: 5 / 0 / 5 is no effect (the step-8 grid's
    # final score, +0.022 +- 0.053), 3 / 0 / 7 against a claim of a negative difference is its direction
    assert mod.verdict(p(0.022, 0.053, wins=5, ties=0, losses=5), +1) == "not reproduced"
    assert mod.verdict(p(-0.128, 0.085, wins=3, ties=0, losses=7), -1) == "direction only"
    assert mod.verdict(p(0.065, 0.045, wins=6, ties=2, losses=2), +1) == "direction only"
    assert mod.verdict(p(-0.8, 0.6, wins=0, ties=8, losses=2), -1) == "direction only"
    assert mod.evidence(p(0.3, 0.1)).startswith("ten seeds, paired, beyond")
    assert mod.evidence(p(0.2, 0.1)).startswith("ten seeds, paired, within")   # exactly 2 s.e. is within
    assert mod.evidence(p(0.2, 0.1, n=3)).startswith("three seeds")


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
    assert {r[-1] for r in rows} == {"reproduced", "direction only", "not reproduced", "not run"}


@pytest.mark.parametrize("readme", ["README.md", "README.zh-CN.md"])
def test_readmes_link_the_ledger_at_the_top(readme):
    head = (ROOT / readme).read_text(encoding="utf-8").split("\n## ", 1)[0]
    assert "docs/reproduction.md" in head and "2603.10165" in head


def test_notebook_09a_opens_with_the_ledger():
    nb = json.loads((ROOT / "notebooks" / "09a_table3.ipynb").read_text(encoding="utf-8"))
    first = "".join(nb["cells"][0]["source"])
    assert "docs/reproduction.md" in first and "For the story, read this table and the Q/A lines" in first
    assert "想看结论，读这张表和每节的问答行" in first
