"""Shared helpers: cache folder, device choice, seeding, stable printing."""
import random

import numpy as np
import pytest
import torch

from claw_lib.alignment.encoders import load_encoder
from claw_lib.utils import cache_dir, resolve_device, seed_everything, stable_printing


def test_cuda_request_without_gpu_is_clear():
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(RuntimeError, match="no CUDA GPU"):
        load_encoder("e5", device="cuda")


def test_resolve_device():
    assert resolve_device("cpu") == "cpu"
    assert resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(ValueError, match="device must be"):
        resolve_device("tpu")


def test_cache_dir_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("CLAW_CACHE", str(tmp_path / "c"))
    assert cache_dir() == tmp_path / "c" and (tmp_path / "c").is_dir()
    monkeypatch.delenv("CLAW_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert cache_dir() == tmp_path / "x" / "claw-kit"


def test_seed_everything_repeats_every_generator():
    threads = torch.get_num_threads()
    try:
        seed_everything(3, threads=1)
        a = (random.random(), np.random.rand(), torch.rand(1).item())
        assert torch.get_num_threads() == 1
        seed_everything(3, threads=None)
        assert (random.random(), np.random.rand(), torch.rand(1).item()) == a
    finally:
        torch.set_num_threads(threads)


def test_stable_printing_never_prints_minus_zero():
    opts = np.get_printoptions()
    try:
        stable_printing(2)
        assert str(np.array([-1e-7, 0.123, -0.5])) == "[0.00 0.12 -0.50]"
    finally:
        np.set_printoptions(**opts)


def test_check_new_file_refuses_an_existing_file_or_a_folder(tmp_path):
    from claw_lib.utils import check_new_file

    new = tmp_path / "report.md"
    assert check_new_file(new) == new
    new.write_text("kept")
    with pytest.raises(ValueError, match="already exists"):
        check_new_file(new)
    assert check_new_file(new, force=True) == new and new.read_text() == "kept"
    with pytest.raises(ValueError, match="is a folder"):
        check_new_file(tmp_path, force=True)
