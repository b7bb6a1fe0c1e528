"""tools/real_model_train.py's reading of a run (issue 36), without a real model: correctness apart from each style
check, the samples' first-token signal, the adapter's update size, and the summaries a group writes."""
import json
from pathlib import Path

import numpy as np
import pytest

from tests.tool_module import load_tool


@pytest.fixture(scope="module")
def tool():
    return load_tool("real_model_train")


def _lines(path: Path, rows) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def _run(folder: Path) -> Path:
    """A student-user run: two evaluations of three answers, one step of two samples."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"strategy": "opd_kl", "lr": 5e-5, "batch_size": 2,
                                                    "task": {"user": "student"}}))
    au, zh = "What is the capital of Australia?", "澳大利亚的首都是哪里？"
    _lines(folder / "eval.jsonl", [
        {"step": 0, "question": au, "answer": "The capital of Australia is Canberra.", "score": 0.0},
        {"step": 0, "question": zh, "answer": "澳大利亚的首都是堪培拉。", "score": 0.0},
        {"step": 0, "question": "What is 7 times 8?", "answer": "56", "score": 1.0},
        {"step": 2, "question": au, "answer": "Canberra", "score": 1.0},
        {"step": 2, "question": zh, "answer": "悉尼", "score": 0.0},
        {"step": 2, "question": "What is 7 times 8?", "answer": "7 times 8 is 56", "score": 0.5}])
    _lines(folder / "samples.jsonl", [
        {"step": 1, "question": au, "response": "Canberra.", "score": 0.5, "signal": [-3.0, 1.0, 0.5],
         "mask": [True, True, True]},
        {"step": 1, "question": zh, "response": "悉尼", "score": 0.0, "signal": [-1.0, -2.0], "mask": [True, False]}])
    _lines(folder / "metrics.jsonl", [{"step": 0, "eval/score": 1 / 3},
                                      {"step": 1, "reward/score": 0.25, "policy/loss": 0.5, "timing/rollout_s": 1.5}])
    return folder


def test_eval_splits_correctness_from_each_style_check(tool, tmp_path):
    ev = tool.read_eval(_run(tmp_path / "r"), "student", checks=True)
    assert [e["step"] for e in ev] == [0, 2] and ev[0]["n"] == 3
    # step 0: all three right; only "56" meets the student's checks (no restating, no full stop)
    assert ev[0]["correct"] == 1.0 and ev[0]["style"] == pytest.approx(round(1 / 3, 3))
    assert ev[0]["check/no_restating"] == pytest.approx(round(1 / 3, 3)) and ev[0]["style_all"] == pytest.approx(0.333)
    # step 2: Canberra (right, both checks), 悉尼 (wrong, both checks), "7 times 8 is 56" (right, restates)
    assert ev[1]["correct"] == pytest.approx(0.667) and ev[1]["check/no_full_stop"] == 1.0
    assert ev[1]["check/no_restating"] == pytest.approx(0.667) and ev[1]["style"] == pytest.approx(round(5 / 6, 3))
    assert ev[1]["style_en"] == 0.75 and ev[1]["style_zh"] == 1.0
    assert ev[1]["score"] == 0.5                                         # the user's own score, as recorded
    assert "style_all" not in tool.read_eval(tmp_path / "r", "student")  # the first summary's columns only


def test_steps_read_the_first_tokens_signal_and_the_samples(tool, tmp_path):
    steps = tool.read_steps(_run(tmp_path / "r"), extra=True)
    assert len(steps) == 1 and steps[0]["step"] == 1 and steps[0]["policy/loss"] == 0.5
    s = steps[0]
    assert s["samples/scored"] == 0.5 and s["samples/first_signal"] == -2.0      # mean of -3.0 and -1.0
    assert s["samples/rest_signal"] == 0.75                                       # 1.0 and 0.5; -2.0 is masked
    assert s["samples/style"] == 0.75 and s["timing/rollout_s"] == 1.5           # Canberra. 1/2, 悉尼 2/2


def test_adapter_size_is_the_norm_of_alpha_over_r_b_a(tool, tmp_path):
    import torch
    from safetensors.torch import save_file

    g = torch.Generator().manual_seed(0)
    a1, b1 = torch.randn(4, 6, generator=g), torch.randn(5, 4, generator=g)
    a2, b2 = torch.randn(4, 3, generator=g), torch.zeros(7, 4)
    save_file({"m.q.lora_A.weight": a1, "m.q.lora_B.weight": b1, "m.v.lora_A.weight": a2, "m.v.lora_B.weight": b2},
              str(tmp_path / "adapter_model.safetensors"))
    (tmp_path / "adapter_config.json").write_text(json.dumps({"lora_alpha": 8, "r": 4}))
    n1 = np.linalg.norm(2.0 * (b1.double().numpy() @ a1.double().numpy()))
    got = tool.adapter_size(tmp_path)
    assert got["modules"] == 2 and got["dW_fro_max"] == pytest.approx(n1, abs=1e-5)
    assert got["dW_fro_mean"] == pytest.approx(n1 / 2, abs=1e-5)               # B = 0: no update yet


def test_a_group_writes_its_table_and_figure(tool, tmp_path, monkeypatch):
    monkeypatch.setattr(tool, "OUT", tmp_path)
    _run(tmp_path / "runs" / "pilot_x")
    monkeypatch.setitem(tool.GROUPS, "learning_pilots", ["pilot_x", "pilot_missing"])
    rows = tool.summarise("learning_pilots")
    assert [r["step"] for r in rows] == [0, 2] and rows[1]["run"] == "pilot_x"
    md = (tmp_path / "learning_pilots.md").read_text(encoding="utf-8")
    assert "## pilot_x: opd_kl, student user" in md and "check/no_restating" in md and "samples/first_signal" in md
    assert (tmp_path / "learning_pilots.csv").read_text().splitlines()[0].startswith("run,strategy,user,lr,")
    assert (tmp_path / "learning_pilots.png").stat().st_size > 0
