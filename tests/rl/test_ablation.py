"""The ablation runner: summaries and paired differences by hand, settings reaching PPOConfig, results round-trip."""
import json

import numpy as np
import pytest

from claw_lib.apps.grid import reproduce
from claw_lib.rl.ablation import (UNTIL_STABLE, markdown_table, ordering_report, paired, plot_until_stable, speed_report,
                                  steps_to_stable, steps_to_target, summarise, until_stable)


def test_ablation_helpers(tmp_path):
    assert steps_to_target([(0, 0.2), (2, 0.5), (4, 0.95)], 0.9) == 4
    assert steps_to_target([(0, 0.2)], 0.9) is None
    rows = [{"strategy": "opd", "user": "teacher", "seed": s, "base_score": 0.2, "score_at_8": 0.5, "final_score": f,
             "steps_to_target": None} for s, f in [(0, 0.6), (1, 0.8)]]
    s = summarise(rows)[("teacher", "opd")]
    assert s["final"] == pytest.approx(0.7) and s["final_std"] == pytest.approx(0.1) and s["reached"] == 0
    assert "0.25 / 0.72" not in markdown_table(rows)  # the paper ran no such setting: no paper column there
    assert "0.25 / 0.72" in markdown_table([dict(r, user="teacher-vague") for r in rows])
    with pytest.raises(ValueError, match="unknown setting"):
        reproduce(tmp_path, users=["boss"], progress=False)
    with pytest.raises(ValueError, match="grid must be one of"):
        reproduce(tmp_path, grid="huge", progress=False)
    with pytest.raises(ValueError, match="unknown strategy"):
        reproduce(tmp_path, strategies=["ppo"], users=["teacher"], progress=False)


def test_steps_to_stable_by_hand():
    """The first evaluation from which the target holds three evaluations in a row; summarise averages it over all
    the seeds, a seed that never gets there counted at the run length (16), with the s.e. and the seeds that got
    there (never a mean over the lucky seeds only: that would say 8.0 here)."""
    curve = [(0, 0.2), (2, 0.95), (4, 0.8), (6, 0.9), (8, 0.92), (10, 1.0), (12, 0.7)]
    assert steps_to_stable(curve, 0.9) == 6 and steps_to_stable(curve, 0.9, k=1) == 2
    assert steps_to_stable(curve, 0.9, k=4) is None and steps_to_stable([], 0.9) is None
    rows = [{"strategy": "opd", "user": "teacher", "seed": k, "base_score": 0.2, "score_at_8": 0.5, "final_score": 0.9,
             "steps_to_target": 2, "steps_to_stable": st, "batch_size": 16, "steps": 16}
            for k, st in enumerate([6, 10, None])]
    s = summarise(rows)[("teacher", "opd")]
    x = np.array([6, 10, 16.0])
    assert s["until_stable"] == pytest.approx(x.mean()) and s["stable"] == 2 and s["n"] == 3
    assert s["until_stable_se"] == pytest.approx(x.std(ddof=1) / np.sqrt(3))
    assert [until_stable(r) for r in rows] == [6, 10, 16]
    assert "| 10.7 +- 2.9 (2/3) |" in markdown_table(rows)


def test_speed_is_paired_per_seed_with_never_at_the_cap():
    """paired(key=UNTIL_STABLE) pairs the capped steps per seed; the speed table counts a's faster seeds first; a
    method that got there only on its lucky seeds is not shown faster than one that got there on most."""
    a = [4, None, None, None]   # mean over the seeds that got there: 4 (looks fastest); capped: 13.0
    b = [8, 8, 10, None]        # mean over the seeds that got there: 8.7; capped: 10.5
    rows = [{"strategy": m, "user": "u", "seed": k, "steps_to_stable": v, "steps": 16}
            for m, vs in (("a", a), ("b", b)) for k, v in enumerate(vs)]
    p = paired(rows, "u", "a", "b", UNTIL_STABLE)
    d = np.array([4 - 8, 16 - 8, 16 - 10, 0.0])
    assert p["mean"] == pytest.approx(d.mean()) == 2.5 and p["se"] == pytest.approx(d.std(ddof=1) / 2)
    assert (p["wins"], p["ties"], p["losses"]) == (2, 1, 1)  # a slower on 2 seeds, faster on 1
    rep = speed_report(rows, pairs=[("a", "b")])
    assert "| u | a - b | +2.5 +- 2.8 | 1 / 1 / 2 |" in rep


def test_until_stable_bars_are_never_zero_height():
    """plot_until_stable: a method that never got there is a white hatched bar at the cap, one with some seeds
    never is hatched, one where every seed got there is plain."""
    from matplotlib.figure import Figure

    ax = Figure().add_subplot()
    stats = [{"until_stable": 16.0, "stable": 0, "n": 3, "steps": 16},
             {"until_stable": 10.7, "stable": 2, "n": 3, "steps": 16},
             {"until_stable": 4.0, "stable": 3, "n": 3, "steps": 16}]
    bars = plot_until_stable(ax, ["never", "some", "all"], stats)
    assert [b.get_height() for b in bars] == [16.0, 10.7, 4.0]
    assert [b.get_hatch() for b in bars] == ["//", "//", None]
    assert bars[0].get_facecolor()[:3] == (1.0, 1.0, 1.0)


def test_paired_difference_against_hand_computation():
    finals = {"combined": [0.9, 1.0, 0.8, 0.95], "opd": [0.8, 1.0, 0.9], "binary_rl": [0.5, 0.6, 0.7, 0.6]}
    rows = [{"strategy": k, "user": "teacher", "seed": s, "final_score": f}
            for k, v in finals.items() for s, f in enumerate(v)]
    p = paired(rows, "teacher", "combined", "opd")
    d = np.array([0.1, 0.0, -0.1])  # seed 3 has no opd run: not paired
    assert p["n"] == 3 and p["mean"] == pytest.approx(d.mean(), abs=1e-12)
    assert p["se"] == pytest.approx(np.sqrt(((d - d.mean()) ** 2).sum() / 2) / np.sqrt(3))
    assert (p["wins"], p["ties"], p["losses"]) == (1, 1, 1)
    assert paired(rows, "student", "combined", "opd") is None
    one = paired([r for r in rows if r["seed"] == 0], "teacher", "combined", "opd")
    assert one["n"] == 1 and one["se"] == 0.0
    rep = ordering_report(rows)
    assert "| teacher | combined - opd | +0.000 +- 0.058 | 1 / 1 / 1 |" in rep
    assert "| teacher | opd - binary_rl | +0.300 +- 0.058 | 3 / 0 / 0 |" in rep
    assert ordering_report([r for r in rows if r["strategy"] == "combined"]) == ""


def test_reproduce_passes_each_settings_config(tmp_path, monkeypatch):
    import claw_lib.apps.grid as ab  # the grid runner (claw reproduce)

    seen = []

    def fake_train(cfg):
        seen.append(cfg)
        return [{"step": 0, "eval/score": 0.1}, {"step": 1, "eval/score": 0.5 + 0.1 * cfg.seed}]

    monkeypatch.setattr(ab, "train", fake_train)
    rows = ab.reproduce(tmp_path, users=["teacher-rl-pos", "teacher-vague"], strategies=["opd", "combined"],
                        seeds=[0, 1], steps=1, progress=False)
    by = {(c.strategy, c.task.p_vague, c.opd.w_rl_negative) for c in seen}
    assert by == {("combined", None, 0.0), ("opd", 0.5, None), ("combined", 0.5, None)}  # rl-pos runs combined only
    assert len(rows) == 6 and (tmp_path / "ablation.md").exists()
    p = ab.paired(rows, "teacher-rl-pos", "combined", ("teacher-vague", "opd"))
    assert p["n"] == 2 and p["mean"] == pytest.approx(0.0) and p["ties"] == 2
    assert "| teacher-vague | combined - opd | +0.000 +- 0.000 | 0 / 2 / 0 |" in (tmp_path / "ablation.md").read_text()
    back, curves = ab.load_results(tmp_path)
    assert json.dumps(back) == json.dumps(rows) and curves["teacher-vague/opd/1"] == [(0, 0.1), (1, 0.6)]
    with pytest.raises(FileNotFoundError, match="claw reproduce"):
        ab.load_results(tmp_path / "nothing")


def test_reproduce_gives_each_persona_of_a_joint_run_its_row(tmp_path, monkeypatch):
    """A joint run logs eval/score/<persona>: the grid adds a row "<setting>:<persona>" per persona, scored from that
    persona's own curve (steps to 0.9 and until stable computed on it), with the run's time counted once; a grid
    interrupted after that run gives the same rows when it goes on."""
    import claw_lib.apps.grid as ab  # the grid runner (claw reproduce)

    def fake_train(cfg):
        t = [0.2, 0.95, 0.95, 0.95, 0.95]
        s = [0.0, 0.2, 0.4, 0.6, 0.8]
        return [{"step": k, "eval/score": (a + b) / 2, "eval/score/teacher": a, "eval/score/student": b,
                 "timing/rollout_s": 1.0} for k, (a, b) in enumerate(zip(t, s))]

    monkeypatch.setattr(ab, "train", fake_train)
    rows = ab.reproduce(tmp_path / "g", users=["joint-v2"], strategies=["binary_rl"], seeds=[0], steps=4,
                        progress=False)
    by = {r["user"]: r for r in rows}
    assert set(by) == {"joint-v2", "joint-v2:teacher", "joint-v2:student"}
    assert by["joint-v2:teacher"]["final_score"] == 0.95 and by["joint-v2:teacher"]["steps_to_target"] == 1
    assert by["joint-v2:teacher"]["steps_to_stable"] == 1 and by["joint-v2:student"]["steps_to_target"] is None
    assert by["joint-v2"]["rollout_s"] == 5.0 and by["joint-v2:student"]["rollout_s"] == 0
    _, curves = ab.load_results(tmp_path / "g")
    assert curves["joint-v2:student/binary_rl/0"] == [(k, v) for k, v in enumerate([0.0, 0.2, 0.4, 0.6, 0.8])]
    # interrupted after the joint run: the second run (another seed) fails once, then the grid goes on
    calls = []

    def flaky(cfg):
        calls.append(cfg.seed)
        if cfg.seed == 1 and calls.count(1) == 1:
            raise KeyboardInterrupt
        return fake_train(cfg)

    monkeypatch.setattr(ab, "train", flaky)
    with pytest.raises(KeyboardInterrupt):
        ab.reproduce(tmp_path / "h", users=["joint-v2"], strategies=["binary_rl"], seeds=[0, 1], steps=4, progress=False)
    again = ab.reproduce(tmp_path / "h", users=["joint-v2"], strategies=["binary_rl"], seeds=[0, 1], steps=4,
                         progress=False)
    assert calls == [0, 1, 1] and sorted((r["user"], r["seed"]) for r in again) == sorted(
        (u, s) for u in ("joint-v2", "joint-v2:teacher", "joint-v2:student") for s in (0, 1))
