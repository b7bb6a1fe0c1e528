"""Runs you can read (issue 36): every training run records its sampled responses and its evaluation's answers
(claw_lib.rl.samples), checked against the run's own metrics; a resumed run records each step once."""
import json

import numpy as np
import pytest

from claw_lib.config import PPOConfig
from claw_lib.rl.run import train
from claw_lib.rl.samples import append_records, read_run, trim_records


def _cfg(**kw):
    base = dict(strategy="combined", steps=2, batch_size=4, eval_prompts=4, max_new_tokens=8, progress=False,
                threads=1, save_every=1)
    base.update(kw)
    return PPOConfig(**base)


def _jsonl(path):
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def kit_run(tmp_path_factory):
    """A 2-step kit run of the tiny GPT (combined, 4 prompts a step) in a folder, and its history."""
    out = tmp_path_factory.mktemp("kit-run")
    return out, train(_cfg(), out)


def test_a_kit_run_records_every_sample_with_its_signal(kit_run):
    out, hist = kit_run
    rr = read_run(out)
    assert rr.kind == "train" and sorted(rr.samples) == [1, 2]
    for h in hist[1:]:
        rows = rr.samples[h["step"]]
        assert [r["index"] for r in rows] == [0, 1, 2, 3] and {r["engine"] for r in rows} == {"kit"}
        assert np.mean([r["score"] for r in rows]) == pytest.approx(h["reward/score"], abs=1e-12)
        for r in rows:
            assert len(r["tokens"]) == len(r["signal"]) == len(r["advantage"]) == len(r["mask"]) > 0
            assert r["next_state"] and r["question"] in r["prompt"]
            j = r["judge"]
            assert j["score"] in (-1, 0, 1) and len(j["votes"]) == 1
            if j["hint"] is None:  # combined without a hint: the score alone on every token, masked when 0
                assert r["signal"] == [float(j["score"])] * len(r["tokens"])
                assert r["mask"] == [j["score"] != 0] * len(r["tokens"])
        masked = [v for r in rows for v, m in zip(r["signal"], r["mask"]) if m]
        assert np.mean(masked) == pytest.approx(h["reward/token_mean"], abs=1e-4)  # 4 decimals kept
        assert np.mean([r["judge"]["hint"] is not None for r in rows]) == pytest.approx(h["opd/accepted_fraction"])


def test_a_kit_run_records_the_evaluations_answers(kit_run):
    out, hist = kit_run
    evals = read_run(out).evals
    assert sorted(evals) == [0, 1, 2]
    for h in hist:
        rows = evals[h["step"]]
        assert len(rows) == 4 and all(r["answer"] and r["question"] for r in rows)
        assert np.mean([r["score"] for r in rows]) == pytest.approx(h["eval/score"], abs=1e-12)
    assert [r["question"] for r in evals[0]] == [r["question"] for r in evals[2]]  # the same fixed prompts


def test_a_resumed_run_records_each_step_once(kit_run, tmp_path):
    """Stopped after step 1 (its checkpoint written), a torn step-2 line left behind as by a kill, then resumed:
    the records are the uninterrupted run's, line for line."""
    full, _ = kit_run
    train(_cfg(), tmp_path, stop_after=1)
    append_records(tmp_path / "samples.jsonl", 2, [{"response": "a step that never finished"}])
    with open(tmp_path / "eval.jsonl", "a", encoding="utf-8") as f:
        f.write('{"step": 2, "torn')
    train(_cfg(), tmp_path)
    for name in ("samples.jsonl", "eval.jsonl"):
        assert _jsonl(tmp_path / name) == _jsonl(full / name)


def test_trim_keeps_the_steps_up_to_the_checkpoint(tmp_path):
    append_records(tmp_path / "samples.jsonl", 1, [{"a": 1}, {"a": 2}])
    append_records(tmp_path / "samples.jsonl", 2, [{"a": 3}])
    (tmp_path / "eval.jsonl").write_text('{"step": 0, "x": "法"}\n{"step": 1}\n{"step": 2, "x"', encoding="utf-8")
    trim_records(tmp_path, 1)
    assert _jsonl(tmp_path / "samples.jsonl") == [{"step": 1, "a": 1}, {"step": 1, "a": 2}]
    assert _jsonl(tmp_path / "eval.jsonl") == [{"step": 0, "x": "法"}, {"step": 1}]
    assert "法" in (tmp_path / "eval.jsonl").read_text(encoding="utf-8")  # kept readable, not \\u escapes


def test_reading_a_folder_without_records_is_one_line(tmp_path):
    with pytest.raises(ValueError, match="no run folder"):
        read_run(tmp_path / "missing")
    with pytest.raises(ValueError, match="holds no samples.jsonl or eval.jsonl"):
        read_run(tmp_path)
    (tmp_path / "samples.jsonl").write_text('{"step": 1}\nnot json\n', encoding="utf-8")
    with pytest.raises(ValueError, match="line 2 is not a JSON record"):
        read_run(tmp_path)


@pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning")  # TRL's
def test_a_trl_run_records_what_its_model_said(tmp_path):
    """The TRL engine writes the same files: the samples of its generation batch, the evaluation's answers."""
    pytest.importorskip("trl")
    from claw_lib.integrations.trl import train_trl

    hist = train_trl(_cfg(steps=1, lr=1e-3, save_every=0), tmp_path)
    rr = read_run(tmp_path)
    assert sorted(rr.samples) == [1] and sorted(rr.evals) == [0, 1]
    rows = rr.samples[1]
    assert [r["index"] for r in rows] == [0, 1, 2, 3] and {r["engine"] for r in rows} == {"trl"}
    assert np.mean([r["score"] for r in rows]) == pytest.approx(hist[1]["reward/score"], abs=1e-12)
    assert all(len(r["tokens"]) == len(r["signal"]) == len(r["mask"]) for r in rows)
    for h in hist:
        assert np.mean([r["score"] for r in rr.evals[h["step"]]]) == pytest.approx(h["eval/score"], abs=1e-12)
