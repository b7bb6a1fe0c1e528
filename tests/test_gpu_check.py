"""tools/gpu_check.py runs its code paths on a CPU (the GPU run itself needs a GPU: results/gpu.md when one ran)."""
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "tools" / "gpu_check.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


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
