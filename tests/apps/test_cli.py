"""The `claw` command as a user runs it: tables, JSON, batches, errors, exit codes."""
import json
import subprocess
import sys

import pytest

from claw_lib.apps.cli import main

SEED_OUT, SEED_COR = "法国的首都是伦敦。", "不对，法国的首都是巴黎。"


def run(args, capsys):
    rc = main(args)
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_align_table(capsys):
    rc, out, _ = run(["align", "法国的首都是伦敦。", "不对，法国的首都是巴黎。"], capsys)
    assert rc == 0
    line = [ln for ln in out.splitlines() if ln.startswith("replace")]
    assert len(line) == 1 and "伦敦" in line[0] and "巴黎" in line[0]
    assert "total cost" in out


def test_align_json_schema(capsys):
    rc, out, _ = run(["align", "The capital of France is London.", "No, the capital of France is Paris.", "--json"], capsys)
    d = json.loads(out)
    assert set(d) == {"output_tokens", "correction_tokens", "ops", "total_cost"}
    text = "The capital of France is London."
    for t in d["output_tokens"]:
        assert set(t) == {"text", "start", "end"} and text[t["start"]:t["end"]] == t["text"]
    for o in d["ops"]:
        assert set(o) == {"op", "i", "j", "cost"}
    assert abs(sum(o["cost"] for o in d["ops"]) - d["total_cost"]) < 1e-9


def test_align_batch(tmp_path, capsys):
    f = tmp_path / "pairs.jsonl"
    rows = [{"output": "法国的首都是伦敦。", "correction": "不对，是巴黎。"}, {"output": "", "correction": "x"}]
    f.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n\n", encoding="utf-8")
    rc, out, err = run(["align", "--input", str(f)], capsys)
    lines = [json.loads(x) for x in out.splitlines()]
    # one output line per input line: the blank third line gives an error record (exit code 1)
    assert rc == 1 and len(lines) == 3 and lines[2] == {"line": 3, "error": "blank line"} and "1 of 3" in err
    assert lines[1]["ops"] == [{"op": "insert", "i": None, "j": 0, "cost": 0.5}]


def test_align_batch_bad_line(tmp_path, capsys):
    f = tmp_path / "bad.jsonl"
    f.write_text('{"output": "a", "correction": "b"}\n{oops\n{"output": "a"}\n', encoding="utf-8")
    rc, out, _ = run(["align", "--input", str(f)], capsys)
    lines = [json.loads(x) for x in out.splitlines()]
    assert rc == 1 and len(lines) == 3 and "ops" in lines[0]
    assert lines[1]["line"] == 2 and lines[1]["error"].startswith("not valid JSON")
    assert lines[2] == {"line": 3, "error": "needs string fields 'output' and 'correction'"}


def test_missing_encoder_exit_code(capsys):
    rc, _, err = run(["align", "a", "b", "--encoder", "no-such-org/none"], capsys)
    assert rc == 2 and "never downloads" in err


def test_console_script_runs():
    r = subprocess.run([sys.executable, "-m", "claw_lib.apps.cli", "align", "a b", "a c", "--json"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["ops"][0]["op"] == "match"


def test_smoke_reproduce_one_setting_one_strategy(capsys, tmp_path):
    """`claw reproduce` with a chosen setting and strategy writes the table, CSV and curves."""
    rc, out, _ = run(["reproduce", "--out", str(tmp_path), "--users", "correcting-pair", "--strategies", "binary",
                      "--seeds", "0", "--steps", "1"], capsys)
    assert rc == 0 and "| correcting-pair | binary |" in out
    rows = (tmp_path / "ablation.csv").read_text().splitlines()
    assert len(rows) == 2 and rows[0].startswith("strategy,user,engine,questions,seed,base_score")
    assert rows[1].startswith("binary,correcting-pair,kit,pair,0,")
    assert (tmp_path / "curves_correcting-pair.png").exists()
    with pytest.raises(SystemExit):
        main(["reproduce", "--strategies", "nonsense"])


def test_cli_opd_json(capsys):
    from claw_lib.apps.cli import main

    rc = main(["opd", "--prompt", "法国的首都是哪里？", "--response", "法国的首都是伦敦。",
               "--next-state", "不对，法国的首都是巴黎。", "--json"])
    d = json.loads(capsys.readouterr().out)
    assert rc == 0 and d["accepted"] and d["hint"] == "不对，法国的首都是巴黎。"
    assert "".join(t["text"] for t in d["tokens"]) == "法国的首都是伦敦。"
    assert all(set(t) == {"text", "start", "end", "student_logprob", "teacher_logprob", "advantage"} for t in d["tokens"])
    worst = min(d["tokens"], key=lambda t: t["advantage"])
    assert worst["text"] in ("伦", "敦") and worst["advantage"] < -5
    rc = main(["opd", "--prompt", "法国的首都是哪里？", "--response", "法国的首都是巴黎。", "--next-state", "谢谢！", "--json"])
    d = json.loads(capsys.readouterr().out)
    assert not d["accepted"] and all(t["advantage"] == 0 for t in d["tokens"])


def test_cli_rewards_json(capsys):
    rc = main(["rewards", SEED_OUT, SEED_COR, "--strategy", "continuous", "--json"])
    d = json.loads(capsys.readouterr().out)
    assert rc == 0 and d["strategy"] == "continuous"
    assert "".join(t["text"] for t in d["tokens"]) == SEED_OUT
    assert all(set(t) == {"text", "start", "end", "reward"} for t in d["tokens"])
    assert min(d["tokens"], key=lambda t: t["reward"])["text"] == "伦敦"
    assert {o["op"] for o in d["ops"]} >= {"match", "replace"}
    rc = main(["rewards", SEED_OUT, SEED_COR, "--no-color"])
    out = capsys.readouterr().out
    assert "伦敦[-1.00]" in out and "法国[+0.50]" in out


def test_cli_rewards_batch(tmp_path, capsys):
    f = tmp_path / "in.jsonl"
    f.write_text(json.dumps({"output": SEED_OUT, "correction": SEED_COR}, ensure_ascii=False) + "\n", encoding="utf-8")
    assert main(["rewards", "--input", str(f), "--strategy", "binary"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["tokens"][4]["reward"] == -1.0


def test_help_imports_no_torch():
    """Building the parser (and `claw --help`) must not import torch, transformers or jieba."""
    code = ("import sys\nfrom claw_lib.apps.cli import build_parser\nbuild_parser()\n"
            "print(sorted(m for m in ('torch', 'transformers', 'jieba') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stdout + r.stderr
    r = subprocess.run([sys.executable, "-m", "claw_lib.apps.cli", "train", "--help"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and "--kl-coef" in r.stdout


def test_cli_opd_batch_loads_the_model_once(tmp_path, capsys):
    f = tmp_path / "turns.jsonl"
    rows = [{"prompt": "法国的首都是哪里？", "response": "法国的首都是伦敦。", "next_state": "不对，法国的首都是巴黎。"},
            {"prompt": "问：法国的首都是哪里？答：", "response": "法国的首都是巴黎。", "next_state": "谢谢！"},
            {"prompt": "x"}]
    f.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    assert main(["opd", "--input", str(f), "--out", str(tmp_path / "out.jsonl")]) == 1   # one bad line
    out = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()]
    assert out[0]["accepted"] and min(out[0]["tokens"], key=lambda t: t["advantage"])["text"] in ("伦", "敦")
    assert out[1]["form"] == "inline" and not out[1]["chat_template"] and not out[1]["accepted"]
    assert out[2] == {"line": 3, "error": "needs string fields 'prompt' and 'response' and 'next_state'"}
    assert main(["opd", "--input", str(f), "--prompt", "q"]) == 2
    assert "not both" in capsys.readouterr().err
    assert main(["opd", "--prompt", "q"]) == 2
    assert "need --prompt, --response and --next-state" in capsys.readouterr().err


def test_cli_train_flags_and_the_lr_warning(tmp_path, capsys):
    """The real-model flags reach the config; an lr far above the model's recommended one gets one warning line;
    the summary reports the peak memory."""
    rc = main(["train", "--strategy", "binary_rl", "--steps", "1", "--batch-size", "2", "--eval-size", "3",
               "--max-new-tokens", "5", "--threads", "1", "--dtype", "float32", "--lr", "1", "--save-every", "0",
               "--out", str(tmp_path / "run")])
    cap = capsys.readouterr()
    cfg = json.loads((tmp_path / "run" / "config.json").read_text())
    assert rc == 0 and (cfg["eval_prompts"], cfg["max_new_tokens"], cfg["threads"], cfg["dtype"], cfg["lr"],
                        cfg["lora_rank"]) == (3, 5, 1, "float32", 1.0, 0)
    warn = [ln for ln in cap.err.splitlines() if "warning" in ln]
    assert len(warn) == 1 and warn[0].startswith("claw train: warning: lr 1 is 3333x the 0.0003 recommended")
    assert "peak memory" in cap.out and "GiB" in cap.out
    assert main(["train", "--task", "real", "--user", "tool", "--steps", "1"]) == 2
    assert "--task 'real' has the users" in capsys.readouterr().err


def test_cli_rewards_judge_weight(capsys):
    """--judge-weight loads the judge for binary rewards and fills the words the rules leave at 0; out of range is
    refused naming the option."""
    args = ["rewards", "法国的首都是伦敦。它在塞纳河畔。", "巴黎。", "--question", "法国的首都是哪里？", "--json"]
    assert main(args) == 0
    plain = json.loads(capsys.readouterr().out)["tokens"]
    assert main(args + ["--judge-weight", "0.5"]) == 0
    judged = json.loads(capsys.readouterr().out)["tokens"]
    assert len(plain) == len(judged) and [t["reward"] for t in plain] != [t["reward"] for t in judged]
    with pytest.raises(SystemExit) as e:  # argparse refuses it before any work
        main(args + ["--judge-weight", "-1"])
    assert e.value.code == 2 and "--judge-weight" in capsys.readouterr().err
