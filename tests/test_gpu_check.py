"""tools/gpu_check.py runs its code paths on a CPU (the GPU run itself needs a GPU: results/gpu.md when one ran)."""

import pytest

from tests.tool_module import load_tool

@pytest.fixture(scope="module")
def gpu_check():
    return load_tool("gpu_check")


def test_dry_run_on_cpu_writes_the_table(gpu_check, tmp_path, capsys):
    out = tmp_path / "gpu.md"
    assert gpu_check.main(["--device", "cpu", "--small", "--no-trl", "--steps", "1", "--batch-size", "2",
                           "--out", str(out)]) == 0
    text = out.read_text()
    rows = [line for line in text.splitlines() if line.startswith("| tiny GPT") or line.startswith("| Qwen2")]
    assert len(rows) == 4 and not any("failed" in r for r in rows)
    assert gpu_check.main(["--device", "cpu", "--out", str(out)]) == 1  # never overwritten by default
    assert "exists" in capsys.readouterr().err


def test_refuses_cuda_without_a_gpu(gpu_check, tmp_path, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert gpu_check.main(["--out", str(tmp_path / "g.md")]) == 1
    assert "no CUDA device" in capsys.readouterr().err


# --------------------------------------------------------------------------- --smoke (issue 36)
SMOKE_CPU = ["--smoke", "--device", "cpu", "--steps", "2", "--batch-size", "2", "--eval-size", "2", "--eval-every", "1",
             "--threads", "1"]


def _rows(text):
    return [line for line in text.splitlines() if line.startswith(("| kit", "| trl"))]


def test_smoke_dry_run_with_the_tiny_gpt(gpu_check, tmp_path):
    """--smoke's code paths on the CPU: both engines train, each row has its verdict, step times, tokens/s, memory."""
    out = tmp_path / "gpu.md"
    assert gpu_check.main(SMOKE_CPU + ["--model", "tiny", "--min-gain", "-1", "--out", str(out)]) == 0
    text = out.read_text()
    rows = _rows(text)
    assert len(rows) == 2 and all("PASS" in r for r in rows), text
    assert "dry run on the CPU" in text and "rises by at least -1" in text
    cells = rows[0].strip("|").split("|")
    assert float(cells[5]) > 0 and float(cells[9]) > 0 and float(cells[10]) > 0  # step s, tokens/s, peak GiB


def test_smoke_fails_a_threshold_not_reached(gpu_check, tmp_path):
    """A Qwen2-shaped random stand-in cannot raise its score by 1.5 in two steps: exit 1, both rows FAIL, the report is
    written all the same."""
    model = tmp_path / "qwen"
    model.mkdir()
    gpu_check.qwen_shaped_model(model, small=True)
    out = tmp_path / "gpu.md"
    assert gpu_check.main(SMOKE_CPU + ["--model", str(model), "--min-gain", "1.5", "--out", str(out)]) == 1
    rows = _rows(out.read_text())
    assert len(rows) == 2 and all("FAIL" in r for r in rows)


def test_smoke_verdict_reads_the_first_and_last_evaluation(gpu_check):
    hist = [{"step": 0, "eval/score": 0.1}, {"step": 1}, {"step": 2, "eval/score": 0.2}, {"step": 3, "eval/score": 0.45}]
    first, last, gain, ok = gpu_check.smoke_verdict({"history": hist}, "eval/score", 0.3)
    assert (first, last, ok) == (0.1, 0.45, True) and abs(gain - 0.35) < 1e-12
    assert gpu_check.smoke_verdict({"history": hist}, "eval/score", 0.4)[3] is False
    assert gpu_check.smoke_verdict({"history": hist[:2]}, "eval/score", 0.0)[3] is False   # one evaluation: no verdict


@pytest.mark.parametrize("args, message", [
    ([], "needs --model"),
    (["--model", "tiny", "--steps", "16"], "at most 15 steps"),
    (["--model", "tiny", "--strategy", "nope"], "strategy must be one of"),
])
def test_smoke_refusals_are_one_line(gpu_check, tmp_path, capsys, monkeypatch, args, message):
    monkeypatch.delenv("CLAW_REAL_MODEL", raising=False)
    out = tmp_path / "gpu.md"
    assert gpu_check.main(["--smoke", "--device", "cpu", "--out", str(out)] + args) == 1
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and not out.exists()
