"""The reading helpers of notebooks 09a-09c (claw_lib.rl.ablation_view): printed tables checked against hand-made rows,
the reading checks accepting what a reading states and refusing one number, sign or count off."""
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot  # noqa: E402
import pytest  # noqa: E402

from claw_lib.apps.viz import use_cjk_font  # noqa: E402

from claw_lib.rl.ablation import UNTIL_STABLE, paired, summarise  # noqa: E402
from claw_lib.rl.ablation_view import (FOLDERS, METHOD, NAMES, load_grids, near, paired_reads, plot_pairs,  # noqa: E402
                                       readable_setting, show_means, show_pairs, speed_reads, stable_cell)
from claw_lib.rl.grids import PAPER  # noqa: E402


def _rows(setting, strategy, finals, stable=None):
    stable = stable or [None] * len(finals)
    return [{"user": setting, "strategy": strategy, "seed": k, "base_score": 0.2, "score_at_8": 0.5, "final_score": f,
             "steps_to_target": None, "steps_to_stable": s, "steps": 16, "batch_size": 16}
            for k, (f, s) in enumerate(zip(finals, stable))]


ROWS = _rows("teacher-vague", "opd", [0.9, 0.8, 0.7, 0.6], [4, 6, None, None]) + \
    _rows("teacher-vague", "binary_rl", [0.5, 0.8, 0.9, 0.3])


def test_near_is_the_printed_rounding():
    assert near(0.9649, 0.96) and near(0.9651, 0.97) and not near(0.9449, 0.96)
    assert near(0.0654, 0.065, 0.0005) and not near(0.0656, 0.065, 0.0005)


def test_paired_reads_accepts_the_reading_and_refuses_one_thing_off():
    # by hand: d = (0.4, 0.0, -0.2, 0.3), mean 0.125, std(ddof 1) = 0.275379, se = 0.137689; better/tied/worse 2/1/1
    p = paired(ROWS, "teacher-vague", "opd", "binary_rl")
    paired_reads(p, 0.125, 0.138, (2, 1, 1, 4), within=True)
    for bad in [dict(mean=0.126), dict(se=0.137), dict(counts=(1, 2, 1, 4)), dict(within=False)]:
        args = dict(mean=0.125, se=0.138, counts=(2, 1, 1, 4), within=True) | bad
        with pytest.raises(AssertionError):
            paired_reads(p, **args)


def test_speed_reads_counts_fewer_steps_as_faster():
    rows = _rows("t", "a", [1] * 3, [2, None, 4]) + _rows("t", "b", [1] * 3, [6, 8, 4])
    p = paired(rows, "t", "a", "b", UNTIL_STABLE)  # d = (2-6, 16-8, 4-4) = (-4, 8, 0): mean 1.33, se 3.53
    speed_reads(p, 1.3, 3.5, (1, 1, 1), within=True)
    with pytest.raises(AssertionError):
        speed_reads(p, 1.3, 3.5, (1, 1, 1), within=False)


def test_stable_cell_counts_never_at_the_run_length():
    v = summarise(ROWS)[("teacher-vague", "opd")]
    assert stable_cell(v) == f"{(4 + 6 + 16 + 16) / 4:.1f} (2/4)" == "10.5 (2/4)"


def test_show_means_prints_the_paper_only_on_its_setting(capsys):
    s = summarise(ROWS + [dict(r, user="teacher") for r in ROWS])
    show_means(s, ["teacher-vague", "teacher"], ["opd", "binary_rl"])
    lines = capsys.readouterr().out.splitlines()
    paper = f"{PAPER['opd'][0]:.2f} / {PAPER['opd'][1]:.2f}"
    assert [paper in line for line in lines[1:]] == [True, False, False, False]
    assert lines[1].startswith(NAMES["teacher-vague"]) and METHOD["opd"] in lines[1] and "10.5 (2/4)" in lines[1]


def test_show_pairs_returns_what_it_prints(capsys):
    rows = ROWS + [dict(r, user="teacher-vague-clip2") for r in ROWS if r["strategy"] == "opd"]
    P = show_pairs(rows, [("teacher-vague", "opd", "binary_rl"), ("teacher-vague", ("teacher-vague-clip2", "opd"), "opd")])
    out = capsys.readouterr().out
    assert set(P) == {("teacher-vague", "opd", "binary_rl"), ("teacher-vague", ("teacher-vague-clip2", "opd"), "opd")}
    assert "+0.125 +- 0.138  better/tied/worse 2/1/1 of 4" in out and "+0.000 +- 0.000  better/tied/worse 0/4/0 of 4" in out
    use_cjk_font()  # the x label is bilingual
    fig = plot_pairs(P, "t")
    assert len(fig.axes[0].get_yticklabels()) == 2
    matplotlib.pyplot.close(fig)


def test_readable_setting_names_the_v2_variants():
    assert readable_setting("teacher-vague-v2") == "teacher, sparse hints, v2 loss"
    assert readable_setting("teacher-v2-overlap, 3 candidates") == "teacher, dense hints, v2, overlap, 3 candidates"
    assert readable_setting("ta-v2") == "ta-v2"  # not a named setting: as it is


def test_load_grids_reads_the_committed_results():
    R, S = load_grids(Path(__file__).resolve().parents[2] / "results")
    assert set(R) == set(S) == set(FOLDERS)
    assert {len({r["seed"] for r in R[name][0]}) for name in ("table3", "extra")} == {10}
    assert S["table3"][("teacher-vague", "opd")]["n"] == 10
