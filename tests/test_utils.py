"""Shared helpers: cache folder, device choice, seeding, stable printing."""
import random

import numpy as np
import pytest
import torch

from claw_lib.alignment.encoders import load_encoder
from claw_lib.utils import cache_dir, mean_se, resolve_device, seed_everything, stable_printing


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


def test_atomic_write_keeps_the_mode_and_follows_a_link(tmp_path):
    """A replaced file keeps its permissions (mkstemp's 0600 used to replace them); a new one gets 0666 minus the
    umask; through a symlink the target is replaced and the link kept."""
    import os
    import stat

    from claw_lib.utils import atomic_write

    f = tmp_path / "a.txt"
    f.write_text("old")
    os.chmod(f, 0o640)
    with atomic_write(f) as fh:
        fh.write("new")
    assert f.read_text() == "new" and stat.S_IMODE(os.stat(f).st_mode) == 0o640
    mask = os.umask(0o022)
    try:
        with atomic_write(tmp_path / "b.txt") as fh:
            fh.write("b")
    finally:
        os.umask(mask)
    assert stat.S_IMODE(os.stat(tmp_path / "b.txt").st_mode) == 0o644
    (tmp_path / "link").symlink_to("a.txt")
    with atomic_write(tmp_path / "link") as fh:
        fh.write("through")
    assert (tmp_path / "link").is_symlink() and f.read_text() == "through"


def test_an_output_folders_marker_never_reaches_outside_it(tmp_path):
    """A marker edited to list "../victim.txt" or "/etc/x" lists nothing: remove_own (what --force does) removes only
    names inside the folder, and a marker that is not a map of files is refused in one line."""
    import json

    from claw_lib.utils import MARKER, OutputFolder

    d, victim = tmp_path / "run", tmp_path / "victim.txt"
    d.mkdir()
    victim.write_text("mine")
    (d / "metrics.csv").write_text("kit's")
    (d / MARKER).write_text(json.dumps({"claw": "train", "files": ["metrics.csv", "../victim.txt", "/etc/x", ".."]}))
    folder = OutputFolder.claim(d, "train", force=True)
    assert folder.own == {"metrics.csv"}
    folder.remove_own()
    assert victim.read_text() == "mine" and not (d / "metrics.csv").exists()
    (d / MARKER).write_text(json.dumps({"claw": "train", "files": "metrics.csv"}))
    with pytest.raises(ValueError, match="cannot be read"):
        OutputFolder.claim(d, "train")


def test_report_scripts_refuse_an_existing_out_before_any_work(tmp_path):
    """The benchmarks and tools/probe_report.py share add_report_args / report_path: an existing --out is refused
    with one line (exit 1) before the measurement starts; --force lets it through; no --out is None."""
    import argparse

    from claw_lib.utils import add_report_args, report_path

    ap = argparse.ArgumentParser()
    add_report_args(ap)
    f = tmp_path / "r.md"
    f.write_text("mine")
    with pytest.raises(SystemExit) as e:
        report_path(ap.parse_args(["--out", str(f)]))
    assert str(e.value).startswith("error: --out") and "already exists" in str(e.value) and f.read_text() == "mine"
    assert report_path(ap.parse_args(["--out", str(f), "--force"])) == f
    assert report_path(ap.parse_args([])) is None
    with pytest.raises(SystemExit):
        report_path(ap.parse_args(["--out", str(tmp_path)]))  # a folder


@pytest.mark.parametrize("values", [[1, 0, 0, 1, 1], [0.5, 2.0, -1.0], [3.0, 3.0], [True, False, False]])
def test_mean_se_is_numpys_mean_and_sample_sd_over_root_n(values):
    m, se = mean_se(values)
    x = np.asarray(values, dtype=float)
    assert m == pytest.approx(x.mean())
    assert se == pytest.approx(x.std(ddof=1) / np.sqrt(len(x)))


def test_mean_se_of_zero_one_values_is_the_binomial_formula_and_nan_where_undefined():
    xs = [1] * 7 + [0] * 13
    m, se = mean_se(xs)
    assert se == pytest.approx(np.sqrt(m * (1 - m) / (len(xs) - 1)))
    assert all(np.isnan(mean_se([])))
    one = mean_se([2.5])
    assert one[0] == 2.5 and np.isnan(one[1])


def test_release_freed_memory_hands_back_what_was_freed():
    """glibc keeps freed blocks for reuse; malloc_trim(0) returns them (Linux with glibc: True; elsewhere a no-op)."""
    import ctypes
    import platform

    from claw_lib.utils import release_freed_memory

    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        assert isinstance(release_freed_memory(), bool)
        return

    def rss_kb():
        return int(next(x for x in open("/proc/self/status") if x.startswith("VmRSS")).split()[1])

    blocks = [ctypes.create_string_buffer(60_000) for _ in range(3000)]  # small blocks: the heap, not mmap
    for b in blocks[:-1]:
        ctypes.memset(b, 1, 60_000)
    held = rss_kb()
    del blocks[:-1]  # the last block stays, so the freed ones sit below the top of the heap
    kept = rss_kb()
    assert release_freed_memory() is True
    assert rss_kb() < kept - 50_000 and kept > held - 50_000  # freed was kept until the call, handed back by it
