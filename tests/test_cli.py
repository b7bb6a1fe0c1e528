"""`claw align` as a user runs it."""
import json
import subprocess
import sys

import pytest

from claw_lib.cli import main


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
    rc, out, _ = run(["align", "--input", str(f)], capsys)
    lines = [json.loads(x) for x in out.splitlines()]
    assert rc == 0 and len(lines) == 2
    assert lines[1]["ops"] == [{"op": "insert", "i": None, "j": 0, "cost": 0.5}]


def test_align_batch_bad_line(tmp_path):
    f = tmp_path / "bad.jsonl"
    f.write_text('{"output": "a", "correction": "b"}\n{oops\n', encoding="utf-8")
    with pytest.raises(SystemExit, match=r"bad.jsonl:2: not valid JSON"):
        main(["align", "--input", str(f)])
    f.write_text('{"output": "a"}\n', encoding="utf-8")
    with pytest.raises(SystemExit, match="'output' and 'correction'"):
        main(["align", "--input", str(f)])


def test_missing_encoder_exit_code(capsys):
    rc, _, err = run(["align", "a", "b", "--encoder", "no-such-org/none"], capsys)
    assert rc == 2 and "never downloads" in err


def test_console_script_runs():
    r = subprocess.run([sys.executable, "-m", "claw_lib.cli", "align", "a b", "a c", "--json"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["ops"][0]["op"] == "match"


def test_smoke_reproduce_one_setting_one_strategy(capsys, tmp_path):
    """`claw reproduce` with a chosen setting and strategy writes the table, CSV and curves."""
    rc, out, _ = run(["reproduce", "--out", str(tmp_path), "--users", "correcting-pair", "--strategies", "binary",
                      "--seeds", "0", "--steps", "1"], capsys)
    assert rc == 0 and "| correcting-pair | binary |" in out
    rows = (tmp_path / "ablation.csv").read_text().splitlines()
    assert len(rows) == 2 and rows[0].startswith("strategy,user,questions,seed,base_score")
    assert rows[1].startswith("binary,correcting-pair,pair,0,")
    assert (tmp_path / "curves_correcting-pair.png").exists()
    with pytest.raises(SystemExit):
        main(["reproduce", "--strategies", "nonsense"])
