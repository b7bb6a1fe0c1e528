"""Fourth reliability review (issue 43, ids as in ``../shared/notes/review-reliability-4.md``): the command line
refuses a flag it would ignore, in one line, before any work."""
from pathlib import Path

from .safety import message, run

PAIR = ("法国的首都是伦敦。", "不对，法国的首都是巴黎。")


def test_R4_11_out_without_input_is_refused_not_ignored(tmp_path, capsys):
    """`claw align OUTPUT CORRECTION --json --out single.json` (also `claw rewards`) printed to stdout with rc 0 and
    wrote no file."""
    for cmd in ("align", "rewards"):
        out = tmp_path / f"{cmd}.json"
        rc, _, err = run([cmd, *PAIR, "--json", "--out", str(out)], capsys)
        assert rc == 2 and not out.exists()
        assert message(err) == (f"claw {cmd}: --out writes the results of --input FILE.jsonl; for OUTPUT CORRECTION "
                                "the result is printed (--json prints it as JSON: redirect it to a file)")


def test_R4_16_a_reviser_the_strategy_never_reads_is_refused(tmp_path, capsys):
    """CL06: `claw train --reviser /nonexistent-model` with strategy combined was stored in config.json and ignored
    (rc 0); with an alignment strategy the same flag was read."""
    rc, _, err = run(["train", "--reviser", "/nonexistent-model", "--steps", "1", "--batch-size", "2",
                      "--out", str(tmp_path / "run")], capsys)
    assert rc == 2 and not Path(tmp_path / "run").exists()
    assert message(err) == ("claw train: --reviser '/nonexistent-model' revises the output for the alignment "
                            "strategies ('binary', 'continuous', 'sentence'); strategy 'combined' reads no revision, "
                            "so it would be ignored: leave it out")
