"""The judge loop's other judges and the session timeout, through real HTTP."""
import time

import httpx
import openai

from claw_lib.apps.cli import build_parser
from claw_lib.apps.serve_cli import serve_config
from claw_lib.config import PPOConfig
from claw_lib.serve import LiveServer, ServeConfig
from tests.scripted_judge import ScriptedJudge

Q = [{"role": "user", "content": "土耳其的首都是哪里？"}]


def _cfg(**kw):
    return ServeConfig(ppo=PPOConfig(strategy="combined", batch_size=2, progress=False, threads=1, max_new_tokens=12),
                       **kw)


def test_a_silent_session_gives_no_sample_for_its_open_turn():
    with LiveServer(_cfg(session_timeout_s=0.5), port=0) as srv:
        c = openai.OpenAI(base_url=srv.base_url, api_key="none", max_retries=0)
        c.chat.completions.create(model="tiny", messages=Q, extra_headers={"X-Session-Id": "quiet"})
        t_end = time.time() + 10
        while time.time() < t_end and srv.system.turns["quiet#0"].status != "no_sample":
            time.sleep(0.1)
        view = httpx.get(srv.url + "/v1/claw/sessions/quiet").json()
        assert view["turns"][0]["status"] == "no_sample" and view["turns"][0]["next_state"] is None
        assert not view["done"]  # the session may go on: its next turn starts fresh
        r = c.chat.completions.create(model="tiny", messages=Q, extra_headers={"X-Session-Id": "quiet"})
        assert r.model_extra["claw"]["turn"] == 1
        assert srv.system.turns["quiet#0"].next_state is None  # the late message is not the expired turn's next state


def _corrected_session(srv, sid: str) -> None:
    """Session ``sid``: the question, then the user's correction of the answer, which ends the session."""
    c = openai.OpenAI(base_url=srv.base_url, api_key="none", max_retries=0)
    c.chat.completions.create(model="tiny", messages=Q, extra_headers={"X-Session-Id": sid})
    c.chat.completions.create(model="tiny", messages=Q + [{"role": "assistant", "content": "x"},
                                                          {"role": "user", "content": "不对，是安卡拉。"}],
                              extra_headers={"X-Session-Id": sid, "X-Session-Done": "true"})


def _scripted_reply(messages):
    """The Binary RL prompt gets \\boxed{-1}, the hint prompt a hint and \\boxed{1}."""
    if "HINT_START" in messages[0]["content"]:
        return "[HINT_START]土耳其的首都是安卡拉。[HINT_END] \\boxed{1}"
    return "a correction: \\boxed{-1}"


def test_an_openai_compatible_url_as_judge(tmp_path):
    import json

    endpoint = ScriptedJudge(reply=_scripted_reply)
    with endpoint as url, LiveServer(_cfg(judge=url, judge_model="judge-model", train=False), port=0,
                                     out=tmp_path / "run") as srv:
        _corrected_session(srv, "j")
        assert srv.wait_idle(60)
        t = srv.system.turns["j#0"]
        m = srv.system.ppo.opd.m
        assert t.status == "scored" and t.score == -1 and t.votes == [-1] * m
        assert t.hint == "土耳其的首都是安卡拉。" and len(t.signal) == len(t.response_ids)
    assert {r["model"] for r in endpoint.requests} == {"judge-model"}
    assert sum(r.get("n", 1) for r in endpoint.requests) == 2 * m  # m Binary RL votes and m hint votes
    prm = [json.loads(x) for x in (tmp_path / "run" / "prm.jsonl").read_text().splitlines()]
    opd = [json.loads(x) for x in (tmp_path / "run" / "opd.jsonl").read_text().splitlines()]
    assert prm == [{"session_id": "j", "turn": 0, "score": -1, "votes": [-1] * m,
                    "representative_eval": "a correction: \\boxed{-1}"}]
    assert opd[0]["accepted"] and opd[0]["hint_len"] == len("土耳其的首都是安卡拉。")
    assert opd[0]["teacher_logprob_len"] == len(t.response_ids) and len(opd[0]["votes"]) == m


def _broken(messages):
    raise RuntimeError("the judge's model went away")  # the endpoint answers HTTP 500


def test_a_judge_whose_requests_fail_gives_failed_votes_not_a_crash(tmp_path):
    """The endpoint answers /v1/models (a URL that does not is refused at the start: R4-10,
    tests/apps/test_safety_r4_judge.py), then fails every completion: failed votes, an excluded turn, no crash."""
    with ScriptedJudge(reply=_broken) as url, LiveServer(_cfg(judge=url, train=False), port=0) as srv:
        _corrected_session(srv, "u")
        assert srv.wait_idle(120)
        t = srv.system.turns["u#0"]
        assert t.status == "excluded" and t.score == 0 and all(v is None for v in t.votes)


def test_the_answer_to_a_reply_gives_no_sample_when_the_next_message_is_a_question():
    with LiveServer(_cfg(train=False), port=0) as srv:
        c = openai.OpenAI(base_url=srv.base_url, api_key="none", max_retries=0)
        msgs = list(Q)
        for content in ("不对，土耳其的首都是安卡拉。", "德国的首都是哪里？"):
            a = c.chat.completions.create(model="tiny", messages=msgs, extra_headers={"X-Session-Id": "qq"})
            msgs += [{"role": "assistant", "content": a.choices[0].message.content}, {"role": "user", "content": content}]
        c.chat.completions.create(model="tiny", messages=msgs, extra_headers={"X-Session-Id": "qq", "X-Session-Done": "1"})
        assert srv.wait_idle(60)
        answer, reply_answer, last = httpx.get(srv.url + "/v1/claw/sessions/qq").json()["turns"]
        assert answer["hint"] == "不对，土耳其的首都是安卡拉。" and answer["status"] == "scored"
        assert reply_answer["next_state"] == "德国的首都是哪里？" and reply_answer["hint"] is None
        assert reply_answer["score"] == 0 and reply_answer["status"] == "excluded"
        assert last["status"] == "no_sample"


def test_claw_serve_asks_the_judge_url_for_its_models_once():
    """``claw serve --judge URL`` (the command's two steps: the checked settings, then the server) asks the endpoint
    for ``/v1/models`` once, when the system builds its judge (issue 44; it asked three times: the command's check,
    the system's check and the judge loop's judge), and the judge loop judges with that judge."""
    endpoint = ScriptedJudge(reply=_scripted_reply)
    with endpoint as url:
        a = build_parser().parse_args(["serve", "--judge", url, "--no-train", "--batch-size", "2", "--threads", "1",
                                       "--max-new-tokens", "12", "--port", "0"])
        with LiveServer(serve_config(a), port=0) as srv:
            _corrected_session(srv, "once")
            assert srv.wait_idle(60)
            assert srv.system.turns["once#0"].status == "scored"
    assert endpoint.models_asked == 1
    assert {r["model"] for r in endpoint.requests} == {"scripted-judge"}  # the first model the endpoint lists
