"""TensorBoard event files beside metrics.csv: read back with TensorBoard's own reader, they hold every numeric
metric of every step, the same numbers as metrics.csv; a resumed run's file holds the whole run once."""
import csv
import math

import pytest

from claw_lib.config import PPOConfig
from claw_lib.rl.events import TB_DIR, TB_FILE, scalars, write_events
from claw_lib.rl.run import train
from tests.tensorboard_events import read_events


def read_csv(path):
    """{column: [(step, value), ...]} of metrics.csv, numeric cells only."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    out = {}
    for row in rows:
        for k, v in row.items():
            if k != "step" and v not in ("", None):
                out.setdefault(k, []).append((int(row["step"]), float(v)))
    return out


def test_a_run_writes_the_metrics_of_every_step_as_tensorboard_scalars(tmp_path):
    hist = train(PPOConfig(strategy="combined", steps=2, batch_size=4, eval_prompts=8, progress=False), tmp_path)
    files = list((tmp_path / TB_DIR).iterdir())
    assert [p.name for p in files] == [TB_FILE]  # one file, no temporary left
    events, table = read_events(tmp_path / TB_DIR), read_csv(tmp_path / "metrics.csv")
    assert set(events) == {k for h in hist for k in h if k != "step"}
    assert [s for s, _ in events["eval/score"]] == [0, 1, 2]
    for tag, points in table.items():
        got = events[tag]
        assert [s for s, _ in got] == [s for s, _ in points], tag
        for (_, a), (_, b) in zip(got, points):
            assert math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-6), (tag, a, b)  # float32 in the event file


def test_a_resumed_run_holds_each_step_once(tmp_path):
    cfg = PPOConfig(strategy="binary_rl", steps=3, batch_size=4, eval_prompts=8, save_every=1, progress=False)
    train(cfg, tmp_path, stop_after=2)
    train(cfg, tmp_path)
    assert [s for s, _ in read_events(tmp_path / TB_DIR)["eval/score"]] == [0, 1, 2, 3]


def test_scalars_keep_finite_numbers_only():
    rows = [{"step": 0, "a": 1, "b": float("nan"), "c": "text", "d": True}, {"a": 2.5, "e": float("inf")}]
    assert scalars(rows) == [("a", 1.0, 0), ("a", 2.5, 1)]
    assert scalars([{"version": 3, "loss": 0.5}]) == [("loss", 0.5, 3)]  # the live server's rows count updates


def test_write_events_replaces_the_file_whole(tmp_path):
    write_events(tmp_path, [{"step": 0, "x": 1.0}, {"step": 1, "x": 2.0}])
    write_events(tmp_path, [{"step": 0, "x": 5.0}])
    assert read_events(tmp_path / TB_DIR) == {"x": [(0, 5.0)]}
    assert [p.name for p in (tmp_path / TB_DIR).iterdir()] == [TB_FILE]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_partial(tmp_path, monkeypatch):
    write_events(tmp_path, [{"step": 0, "x": 1.0}])
    before = (tmp_path / TB_DIR / TB_FILE).read_bytes()

    def full_disk(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("claw_lib.rl.events.os.replace", full_disk)
    with pytest.raises(OSError):
        write_events(tmp_path, [{"step": 0, "x": 2.0}])
    assert (tmp_path / TB_DIR / TB_FILE).read_bytes() == before
    assert [p.name for p in (tmp_path / TB_DIR).iterdir()] == [TB_FILE]
