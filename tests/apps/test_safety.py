"""A careless user: nothing they have is overwritten by default, batches are whole and line-aligned,
and every bad option or input gives one line on stderr naming the problem (exit code 2), never a
traceback. Each test hashes the files the user had before and after."""
import hashlib
import json
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from claw_lib.apps.cli import main
from claw_lib.config import PPOConfig
from claw_lib.models.lm import TINY_LM_DIR
from claw_lib.rl.run import train
from claw_lib.utils import FolderLock

PAIR = {"output": "法国的首都是伦敦。", "correction": "不对，法国的首都是巴黎。"}


def digest(*paths) -> str:
    h = hashlib.sha256()
    for p in paths:
        for f in sorted(Path(p).rglob("*")) if Path(p).is_dir() else [Path(p)]:
            if f.is_file() and f.name != ".lock":
                h.update(f.name.encode() + f.read_bytes())
    return h.hexdigest()


def run(args, capsys):
    capsys.readouterr()  # only what this command prints
    rc = main(args)
    out = capsys.readouterr()
    return rc, out.out, out.err


def one_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def small(**kw) -> PPOConfig:
    return PPOConfig(**{"steps": 1, "batch_size": 2, "eval_prompts": 2, "max_new_tokens": 8, "progress": False, **kw})


# --------------------------------------------------------------------------- 1. --out reused
def test_train_refuses_a_folder_holding_another_run(tmp_path, capsys):
    d = tmp_path / "run"
    train(small(strategy="combined", save_every=1), d)
    before = digest(d)
    with pytest.raises(ValueError, match=r"other settings \(strategy 'combined' \(saved\) vs 'opd'"):
        train(small(strategy="opd", save_every=1), d)
    rc, _, err = run(["train", "--strategy", "opd", "--steps", "1", "--out", str(d)], capsys)
    line = one_line(err)
    assert rc == 2 and "other settings" in line and "--force" in line and digest(d) == before
    # the same settings resume (and extend); --force starts over
    hist = train(small(strategy="combined", save_every=1, steps=2), d)
    assert [h["step"] for h in hist] == [0, 1, 2]
    hist = train(small(strategy="opd", save_every=1), d, force=True)
    assert [h["step"] for h in hist] == [0, 1] and json.loads((d / "config.json").read_text())["strategy"] == "opd"


def test_a_locked_folder_is_refused(tmp_path, capsys):
    d = tmp_path / "run"
    with FolderLock(d):
        rc, _, err = run(["train", "--steps", "1", "--out", str(d)], capsys)
    assert rc == 2 and "another run is writing to" in one_line(err)
    assert not (d / "metrics.csv").exists()


def test_a_corrupt_checkpoint_is_one_line(tmp_path, capsys):
    d = tmp_path / "run"
    train(small(save_every=1), d)
    (d / "checkpoint.pt").write_bytes(b"not a checkpoint")
    before = digest(d)
    with pytest.raises(ValueError, match=r"checkpoint\.pt cannot be read .*--force"):
        train(small(save_every=1, steps=2), d)
    assert digest(d) == before


# --------------------------------------------------------------------------- 2. shipped data
def test_pretrain_never_defaults_to_the_shipped_checkpoint(tmp_path, capsys, monkeypatch):
    shipped = digest(TINY_LM_DIR)
    monkeypatch.chdir(tmp_path)
    rc, out, _ = run(["pretrain", "--steps", "1", "--no-eval"], capsys)
    assert rc == 0 and (tmp_path / "tiny-gpt" / "manifest.json").exists() and "saved to tiny-gpt" in out
    mine = digest(tmp_path / "tiny-gpt")
    rc, _, err = run(["pretrain", "--steps", "1", "--no-eval"], capsys)
    assert rc == 2 and "already holds results" in one_line(err) and "--force" in err
    assert digest(tmp_path / "tiny-gpt") == mine and digest(TINY_LM_DIR) == shipped


def test_a_changed_shipped_checkpoint_is_detected(tmp_path, monkeypatch):
    import claw_lib.models.lm as lm
    from claw_lib.models.loading import ModelNotAvailableError

    copy = tmp_path / "tiny-gpt"
    shutil.copytree(TINY_LM_DIR, copy)
    with open(copy / "model.safetensors", "r+b") as f:
        f.seek(1000)
        f.write(b"\x00\x01\x02")
    monkeypatch.setattr(lm, "TINY_LM_DIR", copy)
    with pytest.raises(ModelNotAvailableError, match="does not match .*manifest.json"):
        lm.load_causal_lm("tiny")


def test_reproduce_refuses_a_folder_with_results(tmp_path, capsys):
    d = tmp_path / "results"
    d.mkdir()
    (d / "ablation.csv").write_text("strategy,user\n")
    before = digest(d)
    args = ["reproduce", "--out", str(d), "--users", "correcting-pair", "--strategies", "binary", "--seeds", "0",
            "--steps", "1"]
    rc, _, err = run(args, capsys)
    assert rc == 2 and "already holds results" in one_line(err) and digest(d) == before
    rc, _, _ = run(args + ["--force"], capsys)
    assert rc == 0 and len((d / "ablation.csv").read_text().splitlines()) == 2


# --------------------------------------------------------------------------- 3. batches
@pytest.fixture()
def pairs(tmp_path):
    f = tmp_path / "pairs.jsonl"
    f.write_text(json.dumps(PAIR, ensure_ascii=False) + "\n", encoding="utf-8")
    return f


def test_out_equal_to_input_is_refused(pairs, capsys):
    before = digest(pairs)
    rc, _, err = run(["rewards", "--input", str(pairs), "--out", str(pairs)], capsys)
    assert rc == 2 and "is the input file" in one_line(err) and digest(pairs) == before


def test_an_existing_out_file_is_kept_without_force(pairs, tmp_path, capsys):
    out = tmp_path / "out.jsonl"
    out.write_text("mine\n")
    rc, _, err = run(["align", "--input", str(pairs), "--out", str(out)], capsys)
    assert rc == 2 and "already exists" in one_line(err) and out.read_text() == "mine\n"
    rc, _, _ = run(["align", "--input", str(pairs), "--out", str(out), "--force"], capsys)
    assert rc == 0 and "ops" in json.loads(out.read_text())


def test_failing_lines_keep_the_line_correspondence(tmp_path, capsys):
    f = tmp_path / "in.jsonl"
    rows = [json.dumps(PAIR, ensure_ascii=False), "", '{"output": "\\ud800", "correction": "x"}',
            json.dumps({"output": "x" * 30, "correction": "y"}), json.dumps(PAIR, ensure_ascii=False)]
    f.write_text("\n".join(rows) + "\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    rc, _, err = run(["rewards", "--input", str(f), "--out", str(out), "--max-chars", "20", "--json"], capsys)
    lines = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert rc == 1 and len(lines) == 5 and "3 of 5 lines failed" in one_line(err)
    assert lines[1] == {"line": 2, "error": "blank line"}
    assert lines[2]["line"] == 3 and "not valid Unicode" in lines[2]["error"]
    assert lines[3]["line"] == 4 and "--max-chars" in lines[3]["error"]
    # --json carries the cleaned correction that the ops' j indices point into
    ok = lines[0]
    assert ok["clean_correction"] == "法国的首都是巴黎。" and ok["correction_tokens"][0]["text"] == "法国"
    assert {o["j"] for o in ok["ops"] if o["j"] is not None} <= set(range(len(ok["correction_tokens"])))


def _latin1(d: Path) -> Path:
    f = d / "latin1.jsonl"
    f.write_bytes(b'{"output": "a", "correction": "b"}\n{"output": "caf\xe9"}\n')
    return f


@pytest.mark.parametrize("make, message", [
    (lambda d: d / "missing.jsonl", "does not exist"),
    (lambda d: d, "is a folder"),
    (_latin1, "latin1.jsonl:2: not UTF-8"),
])
def test_bad_input_files_are_one_line(tmp_path, capsys, make, message):
    rc, out, err = run(["align", "--input", str(make(tmp_path))], capsys)
    assert rc == 2 and message in one_line(err) and out == ""


def test_a_folder_as_out_is_refused(pairs, tmp_path, capsys):
    rc, _, err = run(["align", "--input", str(pairs), "--out", str(tmp_path)], capsys)
    assert rc == 2 and "is a folder" in one_line(err)


# --------------------------------------------------------------------------- 4. numbers
@pytest.mark.parametrize("args, flag", [
    (["opd", "--prompt", "q", "--response", "r", "--next-state", "s", "--clip", "-1"], "--clip"),
    (["opd", "--prompt", "q", "--response", "r", "--next-state", "s", "--kappa", "nan"], "--kappa"),
    (["pretrain", "--steps", "-1"], "--steps"),
    (["train", "--steps", "-1"], "--steps"),
    (["train", "--misconception-share", "5"], "--misconception-share"),
    (["train", "--batch-size", "0"], "--batch-size"),
    (["train", "--lr", "inf"], "--lr"),
    (["align", "a", "b", "--lexical-weight", "2"], "--lexical-weight"),
    (["align", "a", "b", "--strategy", "bogus"], "--strategy"),
])
def test_bad_numbers_and_choices_name_the_option(args, flag, capsys):
    with pytest.raises(SystemExit) as e:
        code = main(args)
        raise SystemExit(code)
    assert e.value.code == 2 and flag in one_line(capsys.readouterr().err)


def test_empty_response_and_missing_things(capsys, tmp_path):
    rc, _, err = run(["opd", "--prompt", "法国的首都是哪里？", "--response", "", "--next-state", "不对"], capsys)
    assert rc == 2 and "the response is empty" in one_line(err)
    rc, _, err = run(["pretrain", "--eval-only", "--out", str(tmp_path / "none")], capsys)
    assert rc == 2 and "no checkpoint" in one_line(err)
    rc, _, err = run(["rewards", "a", "b", "--strategy", "perplexity", "--judge", "no-such/model"], capsys)
    line = one_line(err)
    assert rc == 2 and "never downloads" in line and "'tiny'" in line


def test_cuda_without_a_gpu_is_one_line(capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    rc, _, err = run(["align", "a", "b", "--device", "cuda"], capsys)
    assert rc == 2 and "no CUDA GPU" in one_line(err)


def test_ctrl_c_says_what_was_kept(tmp_path, capsys, monkeypatch):
    import claw_lib.rl.run as run_module

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(run_module, "train", interrupted)
    # before the first checkpoint there is nothing to resume: the advice is --force (issue 24, R04), never a resume
    rc, _, err = run(["train", "--steps", "1", "--out", str(tmp_path / "r")], capsys)
    assert rc == 130 and "interrupted" in one_line(err) and "no checkpoint yet" in err and "--force" in err
    assert "resume" not in err.replace("nothing to resume", "")
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "checkpoint.pt").write_bytes(b"")
    rc, _, err = run(["train", "--steps", "1", "--out", str(tmp_path / "r")], capsys)
    assert rc == 130 and "interrupted" in one_line(err) and "run the same command to resume" in err


# --------------------------------------------------------------------------- property: any --input file
LINES = st.one_of(
    st.binary(max_size=40),
    st.builds(lambda o, c: json.dumps({"output": o, "correction": c}, ensure_ascii=False).encode("utf-8", "surrogatepass"),
              st.text(max_size=30), st.text(max_size=30)),
    st.builds(lambda v: json.dumps(v).encode(), st.one_of(st.integers(), st.lists(st.integers(), max_size=3),
                                                          st.dictionaries(st.text(max_size=5), st.text(max_size=5),
                                                                          max_size=2))),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(LINES, min_size=1, max_size=6))
def test_any_input_file_gives_whole_output_or_one_line(tmp_path_factory, lines):
    d = tmp_path_factory.mktemp("prop")
    f, out = d / "in.jsonl", d / "out.jsonl"
    raw = b"\n".join(lines) + b"\n"
    f.write_bytes(raw)
    n_lines = raw.count(b"\n")  # the file ends with a newline: one line per newline
    before = digest(f)
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = main(["align", "--input", str(f), "--out", str(out)])
    assert digest(f) == before
    if rc == 2:  # refused before writing: one line, nothing written
        assert not out.exists() and len([x for x in err.getvalue().splitlines() if x.strip()]) == 1
    else:  # one output line per input line, each a JSON object
        assert rc in (0, 1)
        got = out.read_text(encoding="utf-8").splitlines()
        assert len(got) == n_lines and all(isinstance(json.loads(x), dict) for x in got)
