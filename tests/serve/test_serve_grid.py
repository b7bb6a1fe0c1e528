"""tools/serve_grid.py's table logic against written-out numbers (no server): never reached counted at the run
length, the share of seeds that reached it, the paired difference combined - binary_rl with its mean and standard
error, the "within two standard errors" verdict; the CSV round trip; the refusal of an existing output; and the
committed report is what the committed CSV gives."""
import importlib.util
import math
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def grid():
    spec = importlib.util.spec_from_file_location("serve_grid_under_test", ROOT / "tools" / "serve_grid.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def rows_of(strategy, seed, holds, n=None):
    """CSV-like rows (strings, as csv.DictReader gives them) of one run whose sessions hold as ``holds``."""
    n = len(holds) if n is None else n
    return [{"strategy": strategy, "seed": str(seed), "session": str(i), "session_id": f"{strategy}-{seed}-{i}",
             "scores": "1;1;1" if h else "1;0;1", "mean_score": "1.0000" if h else "0.6667", "holds": str(h),
             "first_holds": "True", "version_first": str(i), "version_last": str(i), "wait_timed_out": "False",
             "run_sessions": str(n), "turns": "3", "batch_size": "4"} for i, h in enumerate(holds)]


T, F = True, False
# run length 8; combined: seed 0 stable from session 1, seed 1 from 4, seed 2 never (counted 8)
# binary_rl: seed 0 from 3, seed 1 never (8), seed 2 never (8)
RUNS = {("combined", 0): [F, T, T, T, F, F, F, F], ("combined", 1): [T, F, T, F, T, T, T, T],
        ("combined", 2): [T, T, F, T, T, F, T, T],
        ("binary_rl", 0): [F, F, F, T, T, T, T, F], ("binary_rl", 1): [F] * 8, ("binary_rl", 2): [T, T, F] + [F] * 5}


def all_rows():
    return [r for (s, k), h in RUNS.items() for r in rows_of(s, k, h)]


def test_per_run_counts_never_at_the_run_length(grid):
    runs = grid.per_run(all_rows())
    assert {k: v["value"] for k, v in runs.items()} == {("combined", 0): 1, ("combined", 1): 4, ("combined", 2): None,
                                                        ("binary_rl", 0): 3, ("binary_rl", 1): None,
                                                        ("binary_rl", 2): None}
    assert {k: v["counted"] for k, v in runs.items()} == {("combined", 0): 1, ("combined", 1): 4, ("combined", 2): 8,
                                                          ("binary_rl", 0): 3, ("binary_rl", 1): 8,
                                                          ("binary_rl", 2): 8}
    assert runs[("combined", 1)]["holds"] == 6 and runs[("binary_rl", 1)]["holds"] == 0
    assert runs[("binary_rl", 0)]["mean_score"] == pytest.approx((4 * 1.0 + 4 * 0.6667) / 8)


def test_summary_and_paired_difference_written_out(grid):
    s = grid.summarise(all_rows())
    assert list(s["strategies"]) == ["combined", "binary_rl"]
    c, b = s["strategies"]["combined"], s["strategies"]["binary_rl"]
    assert c["counted"] == [1, 4, 8] and b["counted"] == [3, 8, 8]
    assert c["reached"] == 2 and b["reached"] == 1
    assert c["mean"] == pytest.approx(13 / 3) and b["mean"] == pytest.approx(19 / 3)
    # s.e. of [1, 4, 8]: deviations -10/3, -1/3, 11/3 -> var (100 + 1 + 121) / 9 / 2 = 111/9 -> se sqrt(111/27)
    assert c["se"] == pytest.approx(math.sqrt(111 / 27))
    d = s["diff"]
    assert d["seeds"] == [0, 1, 2] and d["values"] == [-2, -4, 0]
    assert d["mean"] == pytest.approx(-2.0)
    assert d["se"] == pytest.approx(math.sqrt(4 / 3))  # var of [-2, -4, 0]: (0 + 4 + 4) / 2 = 4; se sqrt(4/3)
    assert abs(d["mean"]) <= 2 * d["se"] and d["within_2se"]
    assert "within two standard errors" in grid.verdict(d)


def test_verdict_outside_two_standard_errors_names_the_faster_strategy(grid):
    d = {"a": "combined", "b": "binary_rl", "values": [-5, -6, -4], "mean": -5.0, "se": grid.mean_se([-5, -6, -4])[1]}
    d["within_2se"] = abs(d["mean"]) <= 2 * d["se"]
    assert d["se"] == pytest.approx(math.sqrt(1 / 3)) and not d["within_2se"]
    v = grid.verdict(d)
    assert "more than two standard errors" in v and "combined reaches" in v
    d.update(values=[3], mean=3.0, se=math.nan, within_2se=True)
    assert "one paired seed" in grid.verdict(d)


def test_mean_se_edges(grid):
    assert grid.mean_se([]) == (pytest.approx(math.nan, nan_ok=True), pytest.approx(math.nan, nan_ok=True))
    m, se = grid.mean_se([7])
    assert m == 7 and math.isnan(se)
    assert grid.mean_se([2, 2, 2]) == (2, 0)


def test_unpaired_seed_left_out_of_the_difference_and_missing_session_refused(grid):
    rows = all_rows() + rows_of("combined", 3, [T, T, T, F, F, F, F, F])
    s = grid.summarise(rows)
    assert s["strategies"]["combined"]["seeds"] == [0, 1, 2, 3] and s["diff"]["seeds"] == [0, 1, 2]
    broken = [r for r in all_rows() if not (r["strategy"] == "combined" and r["seed"] == "0" and r["session"] == "5")]
    with pytest.raises(ValueError, match="expected 0..7"):
        grid.per_run(broken)


def test_report_and_csv_round_trip(grid, tmp_path):
    rows = all_rows()
    p = tmp_path / "rows.csv"
    p.write_text(grid.csv_text(rows), encoding="utf-8")
    back = grid.read_csv(p)
    assert len(back) == 48 and grid.summarise(back)["diff"]["values"] == [-2, -4, 0]
    text = grid.report(grid.summarise(back))
    assert "| combined | 3 | 4.3 +- 2.0 | 2/3 | 1, 4, 8* |" in text
    assert "| binary_rl | 3 | 6.3 +- 1.7 | 1/3 | 3, 8*, 8* |" in text
    assert "-2, -4, +0; mean -2.0, s.e. 1.2" in text


def test_existing_output_refused_before_any_server(grid, tmp_path, capsys):
    out = tmp_path / "r.md"
    out.write_text("keep\n")
    with pytest.raises(SystemExit, match="exists"):
        grid.main(["--out", str(out)])
    assert out.read_text() == "keep\n" and not (tmp_path / "r.csv").exists()


def test_committed_report_is_the_committed_csv(grid, tmp_path):
    csv_path = ROOT / "results" / "serve" / "sessions_to_stable.csv"
    md = ROOT / "results" / "serve" / "sessions_to_stable.md"
    if not csv_path.exists():
        pytest.skip("results/serve/sessions_to_stable.csv not generated yet")
    out = tmp_path / "again.md"
    grid.main(["--from-csv", str(csv_path), "--out", str(out)])
    assert out.read_text(encoding="utf-8") == md.read_text(encoding="utf-8")
