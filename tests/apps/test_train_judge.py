"""``claw train --judge MODEL|URL`` (claw_lib.apps.train_judge, issue 36): a real judge's votes and hints in the kit's
loop and the TRL engine, against a scripted OpenAI-compatible endpoint on a free localhost port
(tests/scripted_judge.py) and the tiny GPT as a local judge; failed votes counted, never a crash; the run's
config.json records the judge and a resumed run refuses another one."""
import json

import pytest

from claw_lib.apps.cli import main
from claw_lib.config import OPDConfig, PPOConfig
from tests.scripted_judge import CORRECTION_MARKERS, ScriptedJudge, rule_reply

#: one short step of the tiny GPT's combined run (4 samples)
BASE = ["train", "--strategy", "combined", "--steps", "1", "--batch-size", "4", "--eval-size", "4", "--threads", "1"]


def _lines(path):
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def _corrected(next_state: str) -> bool:
    return any(m in next_state for m in CORRECTION_MARKERS)


def _no_box_for_votes(messages):
    """Binary RL's prompt gets an answer without a box (a failed vote); the hint prompt the default script's."""
    return "I am not sure." if "HINT_START" not in messages[0]["content"] else rule_reply(messages)


@pytest.mark.parametrize("engine", ["kit", "trl"])
def test_a_url_judge_votes_and_hints_in_both_engines(engine, tmp_path, capsys):
    """Every sampled turn is judged by the endpoint (one request of n=3 votes, one of n=3 hint votes): the recorded
    votes, score and hint are the script's, the combined signal carries the score, and no vote failed."""
    out, judge = tmp_path / engine, ScriptedJudge()
    with judge as url:
        rc = main(BASE + ["--engine", engine, "--judge", url, "--judge-votes", "3", "--out", str(out)])
    assert rc == 0, capsys.readouterr().err
    assert len(judge.requests) == 8 and all(r["n"] == 3 and r["model"] == "scripted-judge" for r in judge.requests)
    assert "judge votes failed 0%" in capsys.readouterr().out
    samples = _lines(out / "samples.jsonl")
    assert len(samples) == 4
    for s in samples:
        want = -1 if _corrected(s["next_state"]) else 1
        assert s["judge"]["votes"] == [want] * 3 and s["judge"]["score"] == want, s
        hinted = want == -1 and len(s["next_state"].strip()) > 10
        assert s["judge"]["hint"] == (s["next_state"].strip() if hinted else None)
        assert [v["score"] for v in s["judge"]["hint_votes"]] == [1 if want == -1 else -1] * 3
        assert all(m for m in s["mask"]) and s["signal"][0] != 0          # w_rl * r (+ the gap where hinted)
    m = _lines(out / "metrics.jsonl")[-1]
    assert m["judge/failed_share"] == 0.0
    opd = json.loads((out / "config.json").read_text())["opd"]
    assert (opd["judge"], opd["m"]) == (url, 3)


@pytest.mark.parametrize("engine", ["kit", "trl"])
def test_failed_votes_are_counted_never_a_crash(engine, tmp_path, capsys):
    """A judge whose Binary RL answers have no box: every such vote fails (score 0 for the turn), the hint votes
    still count: judge/failed_share = 12 failed of 24 votes = 0.5 exactly, in both engines."""
    out = tmp_path / engine
    with ScriptedJudge(_no_box_for_votes) as url:
        rc = main(BASE + ["--engine", engine, "--judge", url, "--judge-votes", "3", "--out", str(out)])
    assert rc == 0, capsys.readouterr().err
    samples = _lines(out / "samples.jsonl")
    assert all(s["judge"]["votes"] == [None] * 3 and s["judge"]["score"] == 0 for s in samples)
    assert _lines(out / "metrics.jsonl")[-1]["judge/failed_share"] == 0.5


def _broken(messages):
    raise RuntimeError("the judge's model went away")  # the endpoint answers HTTP 500


def test_a_judge_whose_requests_fail_fails_every_vote(tmp_path, capsys):
    """The endpoint answers /v1/models (a URL that does not is refused at the start: R4-09,
    tests/apps/test_safety_r4_judge.py) and then fails every completion: each vote fails, the run goes on."""
    out = tmp_path / "r"
    with ScriptedJudge(reply=_broken) as url:
        assert main(BASE + ["--judge", url, "--out", str(out)]) == 0
    assert "judge votes failed 100%" in capsys.readouterr().out
    m = _lines(out / "metrics.jsonl")[-1]
    assert m["judge/failed_share"] == 1.0 and m["opd/accepted_fraction"] == 0.0 and m["reward/masked_fraction"] == 0.0


def test_the_tiny_gpt_as_a_local_judge(tmp_path, capsys):
    """A local model loads when the first turn is judged; the tiny GPT's 160 positions cannot hold the judge's prompt,
    so each of its votes fails with the reason in the record and one warning line, and the run goes on."""
    out = tmp_path / "r"
    assert main(BASE + ["--judge", "tiny", "--judge-votes", "2", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert err.count("warning: the judge tiny failed") == 1 and "token positions" in err
    s = _lines(out / "samples.jsonl")[0]["judge"]
    assert s["votes"] == [None, None] and "token positions" in s["representative_eval"]
    assert _lines(out / "metrics.jsonl")[-1]["judge/failed_share"] == 1.0


def test_a_resumed_run_refuses_another_judge(tmp_path, capsys):
    out = tmp_path / "r"
    with ScriptedJudge() as url:
        assert main(BASE + ["--judge", url, "--save-every", "1", "--out", str(out)]) == 0
        capsys.readouterr()
        assert main([*BASE[:4], "2", *BASE[5:], "--save-every", "1", "--out", str(out)]) == 2   # the rule judge
        err = capsys.readouterr().err
        assert "opd.judge" in err and url in err and len(err.strip().splitlines()) == 1
        assert main([*BASE[:4], "2", *BASE[5:], "--judge", url, "--save-every", "1", "--out", str(out)]) == 0
    assert [h["step"] for h in _lines(out / "metrics.jsonl")] == [0, 1, 2]


@pytest.mark.parametrize("args, names", [
    (["--judge", "/nonexistent/judge-model"], "not available"),
    (["--judge", " "], "--judge"),
    (["--judge-model", "m"], "--judge-model"),
    (["--judge", "tiny", "--strategy", "binary"], "--judge"),
])
def test_bad_judge_settings_are_one_line(args, names, tmp_path, capsys):
    out = tmp_path / "r"
    assert main(BASE + args + ["--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert names in err and len(err.splitlines()) == 1
    assert not out.exists()                                    # refused before any run starts


def test_the_library_refuses_a_named_judge_without_the_judge():
    from claw_lib.rl.run import train

    with pytest.raises(ValueError, match="training_judge"):
        train(PPOConfig(strategy="combined", steps=1, batch_size=2, progress=False, opd=OPDConfig(judge="tiny")))


def _plain_reply(messages):
    """The plain hint question (no HINT_START in it): "The answer should ..." quoting the correction, or NONE; the vote
    prompt: the default script's box."""
    from claw_lib.signals.judges import plain_hint_prompt
    text = messages[-1]["content"]
    if "## Next state" in text:
        return rule_reply(messages)
    state = text.split(":\n", 2)[2].rsplit("\n\nDoes that message", 1)[0].strip()
    assert plain_hint_prompt("x", state)[0]["content"].endswith(text.rsplit("\n\n", 1)[1])
    return f"The answer should follow this. {state}" if _corrected(state) else "NONE"


def test_the_plain_hint_question_reaches_the_judge_and_its_answer_is_the_hint(tmp_path, capsys):
    """``--hint-prompt plain``: the endpoint is asked the plain question, and each recorded hint is read from its answer
    (parse_plain_hint); the votes still come from OpenClaw-RL's prompt; config.json records the setting."""
    from claw_lib.signals.judges import parse_plain_hint
    out, judge = tmp_path / "plain", ScriptedJudge(_plain_reply)
    with judge as url:
        rc = main(BASE + ["--judge", url, "--judge-votes", "1", "--hint-prompt", "plain", "--out", str(out)])
    assert rc == 0, capsys.readouterr().err
    hint_asks = [r for r in judge.requests if "NONE" in r["messages"][-1]["content"]]
    assert len(hint_asks) == 4 and all("HINT_START" not in r["messages"][0]["content"] for r in hint_asks)
    samples = _lines(out / "samples.jsonl")
    hinted = 0
    for s in samples:
        reply = f"The answer should follow this. {s['next_state'].strip()}" if _corrected(s["next_state"]) else "NONE"
        want = parse_plain_hint(reply).hint
        assert s["judge"]["hint"] == (want if want and len(want) > 10 else None), s
        hinted += s["judge"]["hint"] is not None
    assert hinted >= 1
    assert json.loads((out / "config.json").read_text())["opd"]["hint_prompt"] == "plain"
