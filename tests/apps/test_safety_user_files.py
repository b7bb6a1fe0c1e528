"""Promise 1: nothing a user has is deleted or overwritten, ``--force`` included.

An output folder holds only what claw wrote there (``.claw-run.json`` lists it, :class:`claw_lib.utils.OutputFolder`):
a folder with files claw did not write is refused, ``--force`` replaces only claw's own files, and a file is never
renamed over a symlink, a FIFO or a stream. Each test names the review ids it covers
(``../shared/notes/review-reliability.md``) and hashes the user's files before and after.
"""
import contextlib
import functools
import json
import os
import shutil
import threading

import pytest

from claw_lib.utils import MARKER, FolderLock, is_stream

from .safety import PAIR, digest, message, run


@pytest.fixture()
def small_pretrain(monkeypatch):
    """``claw pretrain`` with a tiny model and corpus (seconds, not minutes)."""
    import claw_lib.toy.pretrain as pt

    monkeypatch.setattr(pt, "PretrainConfig", functools.partial(
        pt.PretrainConfig, n_layer=1, n_embd=32, n_head=2, n_inner=64, vocab_size=400, tokenizer_examples=600,
        batch_size=4, warmup=1))
    return pt


def mine(folder, files):
    """Write the user's own files into ``folder``; returns their digest."""
    for name, text in files.items():
        p = folder / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return digest(*[folder / n for n in files])


# --------------------------------------------------------------------------- claw pretrain
def test_pretrain_out_dot_with_force_deletes_nothing_PT05(tmp_path, capsys, monkeypatch, small_pretrain):
    """PT05: `claw pretrain --out . --force` in a folder of the user's files refuses, deletes nothing; `--out ""`
    is refused too."""
    monkeypatch.chdir(tmp_path)
    before = mine(tmp_path, {"thesis.txt": "mine", "d/a.csv": "x"})
    for out in (".", ""):
        rc, _, err = run(["pretrain", "--out", out, "--force", "--steps", "1", "--no-eval"], capsys)
        line = message(err)
        assert rc == 2 and ("did not write" in line or "is empty" in line), line
    assert digest(tmp_path / "thesis.txt", tmp_path / "d/a.csv") == before
    assert sorted(os.listdir(tmp_path)) == ["d", "thesis.txt"]


def test_pretrain_force_keeps_unrelated_files_PT04(tmp_path, capsys, small_pretrain):
    """PT04: `--force` on a folder of unrelated files refuses; on a checkpoint folder where the user added notes it
    replaces the checkpoint and keeps the notes."""
    d = tmp_path / "d"
    before = mine(d, {"notes.md": "notes"})
    rc, _, err = run(["pretrain", "--out", str(d), "--force", "--steps", "1", "--no-eval"], capsys)
    assert rc == 2 and "did not write (notes.md)" in message(err) and os.listdir(d) == ["notes.md"]
    ck = tmp_path / "ck"
    assert run(["pretrain", "--out", str(ck), "--steps", "1", "--no-eval"], capsys)[0] == 0
    old = digest(ck / "model.safetensors")
    notes = mine(ck, {"notes.md": "my notes on this checkpoint"})
    rc, _, _ = run(["pretrain", "--out", str(ck), "--force", "--steps", "2", "--no-eval"], capsys)
    assert rc == 0 and digest(ck / "notes.md") == notes and digest(ck / "model.safetensors") != old
    assert digest(d / "notes.md") == before
    from claw_lib.models.loading import verify_manifest

    verify_manifest(ck)  # the new checkpoint is whole and matches its manifest


def test_pretrain_keeps_a_file_made_while_it_runs_PT07(tmp_path, capsys, monkeypatch, small_pretrain):
    """PT07: a file the user creates in the folder while pretraining runs stays (no rmtree at the end)."""
    d = tmp_path / "d2"
    real = small_pretrain.train_tokenizer

    def meanwhile(*a, **k):
        (d / "notes.txt").write_text("mine")  # the folder exists (locked) from the start
        return real(*a, **k)

    monkeypatch.setattr(small_pretrain, "train_tokenizer", meanwhile)
    rc, _, _ = run(["pretrain", "--out", str(d), "--steps", "1", "--no-eval"], capsys)
    assert rc == 0 and (d / "notes.txt").read_text() == "mine" and (d / "model.safetensors").exists()


def test_a_second_pretrain_into_a_locked_folder_is_refused_PT06(tmp_path, capsys, small_pretrain):
    """PT06: pretrain locks its folder for the whole run: a second one is refused at once, the first's files stay."""
    d = tmp_path / "d"
    assert run(["pretrain", "--out", str(d), "--steps", "1", "--no-eval"], capsys)[0] == 0
    before = digest(d)
    with FolderLock(d):
        rc, _, err = run(["pretrain", "--out", str(d), "--force", "--steps", "1", "--no-eval"], capsys)
    assert rc == 2 and "another run is writing to" in message(err) and digest(d) == before


# --------------------------------------------------------------------------- claw train, claw reproduce
def test_train_never_overwrites_a_users_run_files_UF01_O17(tmp_path, capsys, monkeypatch):
    """UF01: a folder holding the user's metrics.csv (or checkpoint.pt) is refused, --force included.
    O17: `--out ""` is refused instead of writing the run into the working folder."""
    r = tmp_path / "r"
    before = mine(r, {"metrics.csv": "epoch,acc\n1,0.9\n", "checkpoint.pt": "my model"})
    for extra in ([], ["--force"]):
        rc, _, err = run(["train", "--steps", "1", "--batch-size", "2", "--out", str(r)] + extra, capsys)
        assert rc == 2 and "did not write (checkpoint.pt, metrics.csv)" in message(err)
    assert digest(r / "metrics.csv", r / "checkpoint.pt") == before and sorted(os.listdir(r)) == ["checkpoint.pt",
                                                                                                "metrics.csv"]
    monkeypatch.chdir(r)
    rc, _, err = run(["train", "--steps", "1", "--batch-size", "2", "--out", ""], capsys)
    assert rc == 2 and "--out is empty" in message(err) and sorted(os.listdir(r)) == ["checkpoint.pt", "metrics.csv"]


def test_train_force_replaces_only_the_runs_own_files(tmp_path, capsys):
    """UF01 (other side): in a run folder the user added notes to, --force starts over and keeps the notes."""
    r = tmp_path / "r"
    args = ["train", "--steps", "1", "--batch-size", "2", "--save-every", "1", "--out", str(r)]
    assert run(args, capsys)[0] == 0
    assert set(json.loads((r / MARKER).read_text())["files"]) == {"checkpoint.pt", "config.json", "metrics.csv",
                                                                 "metrics.jsonl", "samples.jsonl", "eval.jsonl",
                                                                 "adapter", "tensorboard"}
    notes = mine(r, {"notes.md": "what I saw"})
    rc, _, _ = run(args[:-2] + ["--seed", "1", "--out", str(r), "--force"], capsys)
    assert rc == 0 and digest(r / "notes.md") == notes and json.loads((r / "config.json").read_text())["seed"] == 1


def test_reproduce_never_overwrites_a_users_tables_UF02(tmp_path, capsys):
    """UF02: ablation.md and curves.json of the user's (no ablation.csv) are refused, --force included."""
    q = tmp_path / "q"
    before = mine(q, {"ablation.md": "# my analysis", "curves.json": "{}"})
    for extra in ([], ["--force"]):
        rc, _, err = run(["reproduce", "--out", str(q), "--users", "correcting", "--strategies", "binary", "--seeds",
                          "0", "--steps", "1"] + extra, capsys)
        assert rc == 2 and "did not write (ablation.md, curves.json)" in message(err)
    assert digest(q / "ablation.md", q / "curves.json") == before


def test_reproduce_force_removes_the_older_grids_own_files_RP03(tmp_path, capsys, monkeypatch):
    """RP03: --force first removes the older grid's own files (a figure this grid does not draw), never the user's."""
    import claw_lib.apps.grid as ab  # the grid runner (claw reproduce)

    monkeypatch.setattr(ab, "train", lambda cfg: [{"step": 0, "eval/score": 0.5}, {"step": 1, "eval/score": 0.75}])
    g = tmp_path / "g"
    base = ["reproduce", "--out", str(g), "--strategies", "binary", "--seeds", "0", "--steps", "1"]
    assert run(base + ["--users", "teacher"], capsys)[0] == 0 and (g / "curves_teacher.png").exists()
    notes = mine(g, {"bench_mine.md": "my benchmark"})
    rc, _, _ = run(base + ["--users", "correcting", "--force"], capsys)
    assert rc == 0 and not (g / "curves_teacher.png").exists() and (g / "curves_correcting.png").exists()
    assert digest(g / "bench_mine.md") == notes


# --------------------------------------------------------------------------- --out files that are links or streams
@pytest.fixture()
def pairs(tmp_path):
    f = tmp_path / "pairs.jsonl"
    f.write_text(json.dumps(PAIR, ensure_ascii=False) + "\n", encoding="utf-8")
    return f


def test_out_through_a_symlink_writes_its_target_O04(pairs, tmp_path, capsys):
    """O04: `--out link --force` writes the file the link points to and keeps the link."""
    (tmp_path / "other.txt").write_text("precious\n")
    (tmp_path / "link").symlink_to("other.txt")
    rc, _, _ = run(["align", "--input", str(pairs), "--out", str(tmp_path / "link"), "--force"], capsys)
    assert rc == 0 and (tmp_path / "link").is_symlink()
    assert "ops" in json.loads((tmp_path / "other.txt").read_text(encoding="utf-8"))


def _read_all(path, got):
    with open(path, "rb") as f:
        got.append(f.read())


def test_out_into_a_fifo_writes_into_it_O07(pairs, tmp_path, capsys):
    """O07: a FIFO stays a FIFO and its reader gets the results (O06, refused without --force, still holds)."""
    import stat

    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    rc, _, err = run(["align", "--input", str(pairs), "--out", str(fifo)], capsys)
    assert rc == 2 and "already exists" in message(err)
    got = []
    reader = threading.Thread(target=_read_all, args=(fifo, got), daemon=True)
    reader.start()
    try:
        rc, _, _ = run(["align", "--input", str(pairs), "--out", str(fifo), "--force"], capsys)
    finally:
        if stat.S_ISFIFO(os.lstat(fifo).st_mode):  # a reader still waiting for a writer: let it go
            with contextlib.suppress(OSError):
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(30)
    assert rc == 0 and stat.S_ISFIFO(os.lstat(fifo).st_mode) and got and "ops" in json.loads(got[0])


def test_out_through_a_link_to_a_stream_is_written_through_O08_O15(pairs, tmp_path, capsys):
    """O08: a link to /proc/self/fd/N stays a link and the stream behind it gets the results. O15 (/dev/stdout,
    a link to /proc/self/fd/1) is the same mechanism: /dev/std* and /proc paths count as streams and need no
    --force. (The test never writes the real /dev/stdout: as root a regression would replace it.)"""
    r, w = os.pipe()
    link = tmp_path / "so"
    link.symlink_to(f"/proc/self/fd/{w}")
    got = []

    def read_to_the_end():
        chunks = []
        while True:
            b = os.read(r, 1 << 16)
            if not b:
                break
            chunks.append(b)
        got.append(b"".join(chunks))

    reader = threading.Thread(target=read_to_the_end, daemon=True)
    reader.start()
    try:
        rc, _, _ = run(["align", "--input", str(pairs), "--out", str(link), "--force"], capsys)
    finally:
        os.close(w)
    reader.join(30)
    os.close(r)
    assert rc == 0 and link.is_symlink() and "ops" in json.loads(got[0])
    from claw_lib.apps.cli import _file_out

    assert is_stream("/dev/stdout") and is_stream("/proc/self/fd/1") and not is_stream(pairs)
    assert str(_file_out("/dev/stdout", force=False)) == "/dev/stdout"  # accepted without --force, never replaced


def test_a_folder_without_a_marker_keeps_the_users_newer_names(tmp_path, capsys):
    """A run folder a kit without markers wrote holds only what that kit wrote (checkpoint, metrics, config): a
    ``tensorboard/`` or ``samples.jsonl`` beside them is the user's, so --force refuses rather than deleting it."""
    r = tmp_path / "old"
    args = ["train", "--steps", "1", "--batch-size", "2", "--out", str(r)]
    assert run(args, capsys)[0] == 0
    for name in ("tensorboard", "samples.jsonl", "eval.jsonl", "adapter", MARKER):  # as a kit without markers left it
        p = r / name
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()
    before = mine(r, {"tensorboard/my_notes.txt": "mine", "samples.jsonl": "{}\n"})
    rc, _, err = run(args + ["--force"], capsys)
    assert rc == 2 and "claw did not write it" in message(err), message(err)
    assert digest(r / "tensorboard" / "my_notes.txt", r / "samples.jsonl") == before
