"""tools/personal_agent.py on the tiny GPT (CI's path of the personal-agent experiment): each arm's server, the stream,
the held-out side turns and done.json; the same command after a kill goes on; the summary's shape."""
import json
from pathlib import Path

import pytest

from claw_lib.utils import limits_section
from tests.tool_module import load_tool

SAMPLE = str(Path(__file__).resolve().parents[2] / "data" / "gsm8k" / "sample.jsonl")
COMMON = ["--problems", SAMPLE, "--heldout", "3", "--max-tokens", "8", "--batch-size", "2", "--concurrency", "2",
          "--max-turns", "2"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tool = load_tool("personal_agent")
    root = tmp_path_factory.mktemp("pa")
    for arm, n in (("combined", 4), ("no_training", 3)):
        assert tool.main(["run", "--arm", arm, "--runs", str(root), "--sessions", str(n)] + COMMON) == 0
    return tool, root


def test_each_arm_writes_its_sessions_heldout_and_numbers(runs):
    tool, root = runs
    done = json.loads((root / "student_en" / "combined" / "seed0" / "done.json").read_text())
    held = [json.loads(x) for x in (root / "student_en" / "combined" / "seed0" / "heldout.jsonl").read_text()
            .splitlines()]
    assert done["sessions"] == 4 and len(done["first_accepted"]) == 4 and done["heldout_n"] == 3 == len(held)
    assert done["heldout_style"] == sum(r["accepted"] for r in held) / 3
    assert done["policy_version"] >= 1  # combined trained on the stream
    cache = done["prefix_cache"]  # the engine's counters since the server's start: the held-out prompts were looked up
    assert cache["lookups"] >= 3 and 0 <= cache["reused_tokens"] <= cache["prompt_tokens"]
    idle = json.loads((root / "student_en" / "no_training" / "seed0" / "done.json").read_text())
    assert idle["policy_version"] == 0 and {r["version"] for r in map(json.loads, (
        root / "student_en" / "no_training" / "seed0" / "heldout.jsonl").read_text().splitlines())} == {0}


def test_the_same_command_goes_on_after_a_kill(runs, capsys):
    """A run killed after its stream (done.json and the last held-out lines missing) finishes with the same
    command: the held-out problems already answered are not asked again."""
    tool, root = runs
    folder = root / "student_en" / "combined" / "seed0"
    before = (folder / "heldout.jsonl").read_text().splitlines()
    (folder / "done.json").unlink()
    (folder / "heldout.jsonl").write_text(before[0] + "\n")
    assert tool.main(["run", "--arm", "combined", "--runs", str(root), "--sessions", "4"] + COMMON) == 0
    after = (folder / "heldout.jsonl").read_text().splitlines()
    assert after[0] == before[0] and len(after) == 3 and json.loads((folder / "done.json").read_text())["sessions"] == 4
    capsys.readouterr()
    assert tool.main(["run", "--arm", "combined", "--runs", str(root), "--sessions", "4"] + COMMON) == 0
    assert "done already" in capsys.readouterr().out


def test_the_summary_has_the_experiments_shape(runs, tmp_path):
    tool, root = runs
    assert tool.main(["summary", "--runs", str(root), "--out", str(tmp_path / "s.json")]) == 0
    s = json.loads((tmp_path / "s.json").read_text())
    arms = s["personas"]["student"]["arms"]
    assert s["model"] == "tiny" and set(arms) == {"combined", "no_training"}
    for arm in arms.values():
        assert {"seeds", "sessions_to_adaptation", "heldout_style", "heldout_style_se", "heldout_correct",
                "heldout_correct_se", "cpu_minutes"} <= set(arm)
    with pytest.raises(ValueError, match="exists"):  # a summary already there is not replaced by default
        tool.main(["summary", "--runs", str(root), "--out", str(tmp_path / "s.json")])


def test_bad_settings_are_one_line():
    tool = load_tool("personal_agent")
    with pytest.raises(ValueError, match="--max-turns must be at least 1"):
        tool.parse(["run", "--max-turns", "0"])
    with pytest.raises(ValueError, match="--wait-trained must be 0 or more seconds"):
        tool.parse(["run", "--wait-trained", "-1"])


def test_the_report_shows_the_ceiling_the_landing_and_the_runs(runs, tmp_path):
    tool, root = runs
    cond = {"n": 8, "too_long": 0, "cut": 0, "accepted": 1, "correct": 5, "tokens": 200.0}
    ceiling = tmp_path / "ceiling"
    ceiling.mkdir()
    per = {c: {"negative_share": 0.25, "most_negative": 2} for c in ("first", "style", "number", "other")}
    (ceiling / "student_en.json").write_text(json.dumps({"split": "dev", "results": [
        {"persona": "student", "lang": "en", "problems": list(range(8)),
         "greedy": {"untrained": cond, "prompted": {**cond, "accepted": 3}, "hinted": {**cond, "n": 7}},
         "landing": {"replies": 7, "too_long": 0, "classes": {"raw": per}}}]}))
    assert tool.main(["summary", "--runs", str(root), "--ceiling", str(ceiling), "--out", str(tmp_path / "s.json")]) == 0
    s = json.loads((tmp_path / "s.json").read_text())
    assert s["personas"]["student"]["ceiling"]["prompted"]["rate"] == 3 / 8
    student = (ceiling / "student_en.json").read_text()
    (ceiling / "no_latex_en.json").write_text(student.replace('"student"', '"no_latex"'))
    s2 = tmp_path / "s2.json"
    assert tool.main(["summary", "--runs", str(root), "--ceiling", str(ceiling), "--out", str(s2)]) == 0
    measured_only = json.loads(s2.read_text())["personas"]["no_latex"]  # a ceiling, no run yet
    assert measured_only["arms"] == {} and measured_only["stream"] is None and measured_only["ceiling"]["prompted"]
    assert tool.main(["report", "--summary", str(tmp_path / "s.json"), "--ceiling", str(ceiling), "--runs", str(root),
                      "--out", str(tmp_path / "report.md")]) == 0
    text = (tmp_path / "report.md").read_text()
    assert "| student | en | 8 | 1/8, 5/8 | 3/8, 5/8 | 1/7, 5/7 |" in text
    assert "| student | en | raw | 7 | 0.25 (2)" in text and "| student | combined | 1 | 4 | [" in text
    assert s["personas"]["student"]["arms"]["combined"]["updates"][0] >= 1
    assert (tmp_path / "curves.png").stat().st_size > 1000 and text.rstrip().endswith(limits_section(tool.LIMITS))


def test_the_runs_table_gives_each_seeds_updates_as_median_and_range():
    tool = load_tool("personal_agent")
    assert tool.spread([0.3, 0.1, 0.2, 0.6], 2) == "0.25 (0.10-0.60)"
    assert tool.spread([120.0], 1) == "120.0 (120.0-120.0)"
    assert tool.spread([], 2) == "-"
    arm = {"seeds": [0, 1], "sessions": [36, 20], "partial": [False, True], "sessions_to_adaptation": [None, None],
           "first_accepted": [0, 1], "heldout_style": 0.0, "heldout_style_se": 0.0, "heldout_correct": 0.1,
           "heldout_correct_se": 0.04, "cpu_minutes": [80.0, 30.0], "updates": [2, 0], "update_s": [[60.0, 180.0], []],
           "tis_abs_diff": [[0.3, 0.5], []], "staleness_mean": [[0.0, 1.0], []]}
    lines = tool.runs_table({"personas": {"teacher": {"arms": {"combined": arm}}}})
    assert lines[-1] == ("| teacher | combined | 2 | 36, 20 (cut) | [0, 1] | never, not yet | 0.0 (0.0) | 0.1 (0.04) | "
                         "[80.0, 30.0] | 2 (2.0 (1.0-3.0)); 0 (-) | 0.40 (0.30-0.50); - | 0.50 (0.00-1.00); - |")


def test_a_run_cut_short_is_summarised_from_its_sessions_so_far(runs, tmp_path):
    """A run killed in its stream (no done.json, no held-out answers) shows in the summary as partial."""
    import shutil

    tool, root = runs
    copy = tmp_path / "runs"
    shutil.copytree(root / "student_en" / "combined", copy / "no_latex_en" / "opd")
    for name in ("done.json", "heldout.jsonl"):
        (copy / "no_latex_en" / "opd" / "seed0" / name).unlink()
    assert tool.main(["summary", "--runs", str(copy), "--out", str(tmp_path / "s.json")]) == 0
    arm = json.loads((tmp_path / "s.json").read_text())["personas"]["no_latex"]["arms"]["opd"]
    assert arm["partial"] == [True] and arm["sessions"] == [4] and arm["heldout_n"] == [0]
    assert arm["heldout_style"] is None


def test_the_heldout_table_pairs_each_arm_with_the_untrained_model_problem_by_problem(tmp_path):
    tool = load_tool("personal_agent")
    rows = {"no_training": [(1, 0, 1), (2, 0, 0), (3, 1, 1), (4, 0, 0)],  # (problem, accepted, correct)
            "prompt_only": [(1, 1, 1), (2, 1, 0), (3, 1, 0), (4, 0, 0)]}
    for arm, rs in rows.items():
        folder = tmp_path / "teacher_en" / arm / "seed0"
        folder.mkdir(parents=True)
        (folder / "heldout.jsonl").write_text("".join(json.dumps({"problem": p, "accepted": bool(a), "correct": bool(c)})
                                                      + "\n" for p, a, c in rs))
    lines = tool.heldout_table(tmp_path)
    # prompt_only: accepted 3/4, s.e. sqrt(.75 * .25 / 3) = 0.25; correct 1/4 (0.25); accepted - untrained per problem
    # (+1, +1, 0, 0): +0.50, s.e. sqrt(1/3) / 2 = 0.29; correct (0, 0, -1, 0): -0.25, s.e. 0.25
    assert "| teacher_en | 0 | prompt_only | 4 | 0.75 (0.25) | 0.25 (0.25) | +0.50 (0.29) | -0.25 (0.25) |" in lines
    assert "| teacher_en | 0 | no_training | 4 | 0.25 (0.25) | 0.50 (0.29) | - | - |" in lines
    # a second seed with no untrained run of its own is paired with seed 0's, and says so
    folder = tmp_path / "teacher_en" / "combined" / "seed1"
    folder.mkdir(parents=True)
    (folder / "heldout.jsonl").write_text("".join(json.dumps({"problem": p, "accepted": p == 2, "correct": True}) + "\n"
                                                  for p in (1, 2, 3, 4)))
    lines = tool.heldout_table(tmp_path)
    # accepted (0, 1, 0, 0) - (0, 0, 1, 0) = (0, +1, -1, 0): 0.00, s.e. sqrt(2/3) / 2 = 0.41; correct (0, +1, 0, +1):
    # +0.50, s.e. 0.29
    assert "| teacher_en | 1 (vs 0) | combined | 4 | 0.25 (0.25) | 1.00 (0.00) | +0.00 (0.41) | +0.50 (0.29) |" in lines


def test_the_checks_table_counts_each_check_and_the_replies_cut_at_the_cap(tmp_path):
    """Held-out replies read again check by check (the teacher: opener, close, steps) and those that stopped at the
    run's token cap; a run with no done.json has no cap to compare with ('-')."""
    tool = load_tool("personal_agent")
    steps = "First 3 + 4 = 7. Then 7 * 2 = 14."
    replies = {"combined": [("Great question! " + steps + " Keep it up!", 40), ("Great question! " + steps, 320),
                            (steps, 320)],
               "no_training": [(steps, 30), ("Hello.", 5)]}
    for arm, rs in replies.items():
        folder = tmp_path / "teacher_en" / arm / "seed0"
        folder.mkdir(parents=True)
        (folder / "heldout.jsonl").write_text("".join(json.dumps({"problem": k, "reply": r, "tokens": t}) + "\n"
                                                      for k, (r, t) in enumerate(rs)))
    (tmp_path / "teacher_en" / "combined" / "seed0" / "done.json").write_text(json.dumps({"max_tokens": 320}))
    lines = tool.checks_table(tmp_path)
    assert "| persona | seed | arm | problems | friendly_opener | encouraging_close | shows_work | cut at the token " \
           "cap |" in lines
    assert "| teacher_en | 0 | combined | 3 | 2 | 1 | 3 | 2 |" in lines
    assert "| teacher_en | 0 | no_training | 2 | 1 | 0 | 1 | - |" in lines


def test_the_token_colours_are_the_adapters_log_prob_change(runs, tmp_path):
    """tools/personal_agent_tokens.py: the problem chosen by its rule, both replies' tokens, and each token's change
    log pi_adapter - log pi_base against a direct computation with and without the adapter; the figure is drawn."""
    import shutil

    import numpy as np
    import torch

    from claw_lib.models.lm import TINY_LM_DIR, load_causal_lm, response_logprobs
    from claw_lib.models.peft_lora import add_peft_lora, save_adapter
    tokens = load_tool("personal_agent_tokens")
    _, root = runs
    run, control = tmp_path / "student_en" / "combined" / "seed0", tmp_path / "student_en" / "no_training" / "seed0"
    for src, dst in ((root / "student_en" / "combined" / "seed0", run),
                     (root / "student_en" / "no_training" / "seed0", control)):
        dst.mkdir(parents=True)
        for name in ("done.json", "heldout.jsonl"):
            shutil.copy(src / name, dst / name)
    model, tok = load_causal_lm(str(TINY_LM_DIR))
    pm = add_peft_lora(model, r=4, seed=0)
    with torch.no_grad():
        for n, p in pm.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.05, generator=torch.Generator().manual_seed(1))
    save_adapter(model, run / "server" / "adapters" / "v2")
    (run / "server" / "adapters" / "v1").mkdir()  # an older version: the highest is read
    out = tmp_path / "tokens.json"
    assert tokens.main(["--model", str(TINY_LM_DIR), "--run", str(run), "--control", str(control), "--problems", SAMPLE,
                        "--out", str(out), "--png", str(tmp_path / "tokens.png")]) == 0
    data = json.loads(out.read_text())
    held = [json.loads(x) for x in (run / "heldout.jsonl").read_text().splitlines()]
    before = {r["problem"]: r for r in map(json.loads, (control / "heldout.jsonl").read_text().splitlines())}
    assert data["problem"] == tokens.choose(held, list(before.values()))[0] and data["adapter"].endswith("/v2")
    prompt = tokens.prompt_text(tok, "student", "en", data["problem"], 0, None, SAMPLE)
    replies = [before[data["problem"]]["reply"], next(r for r in held if r["problem"] == data["problem"])["reply"]]
    with_adapter = response_logprobs(model, tok, [prompt] * 2, replies)
    with pm.disable_adapter():
        base = response_logprobs(model, tok, [prompt] * 2, replies)
    for i, key in enumerate(("before", "after")):
        assert data[key]["tokens"] == [t.text for t in base.tokens[i]]
        assert np.allclose(data[key]["delta"], with_adapter.logprobs[i] - base.logprobs[i], atol=2e-4)
    assert any(abs(x) > 1e-3 for x in data["before"]["delta"] + data["after"]["delta"])
    assert (tmp_path / "tokens.png").stat().st_size > 10_000
    with pytest.raises(ValueError, match="exists"):
        tokens.main(["--model", str(TINY_LM_DIR), "--run", str(run), "--control", str(control), "--problems", SAMPLE,
                     "--out", str(out)])


def test_the_token_colours_choose_by_their_rule():
    tokens = load_tool("personal_agent_tokens")
    before = [{"problem": p, "accepted": a, "reply": r} for p, a, r in ((1, False, "x"), (2, False, "y"), (3, True, "z"))]
    after = [{"problem": p, "accepted": a, "reply": r} for p, a, r in ((1, False, "x"), (2, False, "w"), (3, True, "z"))]
    assert tokens.choose(after, before) == (2, "the replies differ")
    after[2]["accepted"], before[2]["accepted"] = True, False
    assert tokens.choose(after, before) == (3, "accepted after, not before")
    assert tokens.choose(before, before) == (1, "the first problem")
    with pytest.raises(ValueError, match="share no"):
        tokens.choose(after, [{"problem": 9, "accepted": False, "reply": ""}])


def test_the_report_draws_the_token_colours_beside_it(runs, tmp_path):
    """A tokens.json beside the report (tools/personal_agent_tokens.py) becomes its token section and tokens.png, the
    counts of tokens moved by more than 0.1 nats read from it; without one the section is absent."""
    tool, root = runs
    assert tool.main(["summary", "--runs", str(root), "--out", str(tmp_path / "s.json")]) == 0
    (tmp_path / "ceiling").mkdir()
    args = ["report", "--summary", str(tmp_path / "s.json"), "--ceiling", str(tmp_path / "ceiling"), "--runs", str(root)]
    assert tool.main(args + ["--out", str(tmp_path / "plain.md")]) == 0
    assert "token by token" not in (tmp_path / "plain.md").read_text()
    (tmp_path / "tokens.json").write_text(json.dumps({
        "problem": 7, "chosen_by": "the replies differ", "adapter": "student_en/combined/seed0/server/adapters/v3",
        "run": "student_en/combined/seed0", "control": "student_en/no_training/seed0",
        "before": {"accepted": False, "correct": True, "tokens": ["A", " b", "\nc"], "delta": [0.5, -0.05, -0.2]},
        "after": {"accepted": True, "correct": True, "tokens": ["Hi", "!"], "delta": [0.01, 0.3]}}))
    assert tool.main(args + ["--out", str(tmp_path / "report.md")]) == 0
    text = (tmp_path / "report.md").read_text()
    assert "Held-out problem 7 (chosen by the rule: the replies differ)" in text
    assert "Tokens moved by more than 0.1 nats: 2 of 3 before, 1 of 2 after." in text
    assert (tmp_path / "tokens.png").stat().st_size > 5000


def test_a_stream_that_stops_is_one_line_and_stops_its_server(tmp_path, monkeypatch):
    """claw simulate exiting non-zero (a server error it printed in one line) ends the run with one line, not a
    traceback; the server is stopped and the CPU time so far kept for the resumed run."""
    import subprocess

    tool = load_tool("personal_agent")
    servers = []
    start = tool.start_server
    monkeypatch.setattr(tool, "start_server", lambda a, folder: servers.append(start(a, folder)) or servers[-1])
    monkeypatch.setattr(tool.subprocess, "run", lambda cmd, **kw: subprocess.CompletedProcess(cmd, 2))
    with pytest.raises(SystemExit, match="^error: claw simulate exited with 2 .*the same command resumes$"):
        tool.main(["run", "--arm", "no_training", "--runs", str(tmp_path), "--sessions", "1"] + COMMON)
    assert servers[0][0].poll() is not None
    assert json.loads((tmp_path / "student_en" / "no_training" / "seed0" / "progress.json").read_text())["cpu_s"] > 0


def test_a_held_out_problem_the_server_refuses_is_one_line(tmp_path, monkeypatch):
    """A held-out request answered with an error (a 500 from a broken serving copy) ends the run in one line naming
    the status and the problem; the server is stopped."""
    import subprocess

    import httpx

    tool = load_tool("personal_agent")
    servers = []
    start = tool.start_server
    monkeypatch.setattr(tool, "start_server", lambda a, folder: servers.append(start(a, folder)) or servers[-1])
    monkeypatch.setattr(tool.subprocess, "run", lambda cmd, **kw: subprocess.CompletedProcess(cmd, 0))
    monkeypatch.setattr(tool, "wait_idle", lambda url, limit: {})
    monkeypatch.setattr(tool.httpx, "post", lambda *a, **kw: httpx.Response(500, json={"error": {"message": "boom"}}))
    with pytest.raises(SystemExit, match=r"^error: the server answered HTTP 500 to held-out problem \d+: .*boom"):
        tool.main(["run", "--arm", "no_training", "--runs", str(tmp_path), "--sessions", "1"] + COMMON)
    assert servers[0][0].poll() is not None
