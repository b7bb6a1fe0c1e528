"""Requests without a session id (``claw serve --match-sessions``, claw_lib/serve/matching.py), through real HTTP with
the official ``openai`` client: counted and warned about whether or not matching is on; with it on, a conversation
sent without headers is one session whose turns are trained as main-line turns, and interleaved conversations stay
apart; the counter and the sessions survive a restart (the records of the run folder)."""
import json

import httpx
import openai
import pytest

from claw_lib.config import PPOConfig
from claw_lib.serve import LiveServer, ServeConfig
from claw_lib.serve.matching import main_looking, transcript_digest
from tests.serve.conftest import make_server

TR, TR_FIX = "土耳其的首都是哪里？", "不对，土耳其的首都是安卡拉。"
FR, FR_FIX = "What is the capital of France?", "No, the capital of France is Paris."


def client(srv):
    return openai.OpenAI(base_url=srv.base_url, api_key="none", max_retries=0)


def ask(c, msgs):
    """One greedy request without any session header or field: (its answer text, its claw field)."""
    r = c.chat.completions.create(model="tiny", messages=msgs, temperature=0)
    return r.choices[0].message.content, r.model_extra["claw"]


def converse(c, first, replies):
    """A conversation as a headerless client sends it (the whole history each time); the claw field of each turn."""
    msgs, claws = [{"role": "user", "content": first}], []
    for reply in replies + [None]:
        text, claw = ask(c, msgs)
        claws.append(claw)
        if reply is not None:
            msgs = msgs + [{"role": "assistant", "content": text}, {"role": "user", "content": reply}]
    return claws


def status(srv):
    return httpx.get(srv.url + "/v1/claw/status").json()


def test_main_looking_is_a_side_turn_only_for_want_of_a_session_id():
    user = [{"role": "user", "content": "hi"}]
    assert main_looking(None, None, user)
    assert main_looking(None, None, user + [{"role": "assistant", "content": "a"}, {"role": "tool", "content": "3"}])
    assert not main_looking("s", None, user)  # a session id: a main-line turn already
    assert not main_looking(None, "side", user)  # a side turn the client asked for
    assert not main_looking(None, None, user + [{"role": "assistant", "content": "a"}])  # not a user's or tool's turn
    # the digest reads role and stripped text, in order
    assert transcript_digest([{"role": "assistant", "content": " a \n"}]) == \
        transcript_digest([{"role": "assistant", "content": "a"}])
    assert transcript_digest(user) != transcript_digest([{"role": "system", "content": "hi"}])


def test_the_option_from_the_command_line_and_the_library():
    from claw_lib.apps.cli import build_parser
    from claw_lib.apps.serve_cli import serve_config
    from claw_lib.serve.config import check_serve_config

    assert serve_config(build_parser().parse_args(["serve", "--match-sessions"])).match_sessions is True
    assert serve_config(build_parser().parse_args(["serve"])).match_sessions is False
    with pytest.raises(ValueError, match="^match_sessions must be true or false, got 'yes'$"):
        check_serve_config(ServeConfig(match_sessions="yes"))


def test_without_matching_they_are_counted_and_warned_about_once(capfd):
    with make_server(ppo=PPOConfig(strategy="combined", batch_size=2, progress=False, threads=1)) as srv:
        c = client(srv)
        _, claw = ask(c, [{"role": "user", "content": TR}])
        assert claw["turn_type"] == "side" and claw["session_id"] is None and claw["turn"] is None
        ask(c, [{"role": "user", "content": FR}])
        c.chat.completions.create(model="tiny", messages=[{"role": "user", "content": FR}],
                                  extra_headers={"X-Turn-Type": "side"})  # asked for: not counted
        c.chat.completions.create(model="tiny", messages=[{"role": "user", "content": FR}],
                                  extra_headers={"X-Session-Id": "with-id"})  # a session: not counted
        st = status(srv)
        assert st["requests_without_session"] == 2 and st["side_turns_served"] == 3 and st["turns_served"] == 1
        assert st["match_sessions"] is False
    err = capfd.readouterr().err
    lines = [ln for ln in err.splitlines() if "without a session id" in ln]
    assert len(lines) == 1, err  # once per server process
    assert "served as a side turn" in lines[0] and "--match-sessions" in lines[0]


def test_a_headerless_conversation_is_one_session_trained_as_main_turns(capfd):
    with make_server(ppo=PPOConfig(strategy="combined", batch_size=2, progress=False, threads=1),
                     match_sessions=True) as srv:
        claws = converse(client(srv), TR, [TR_FIX, TR_FIX])  # 3 turns: both replies say the answer was wrong
        sid = claws[0]["session_id"]
        assert sid.startswith("auto-") and [c["session_id"] for c in claws] == [sid] * 3
        assert [c["turn"] for c in claws] == [0, 1, 2] and {c["turn_type"] for c in claws} == {"main"}
        assert srv.wait_idle(60)
        view = httpx.get(f"{srv.url}/v1/claw/sessions/{sid}").json()
        t0, t1, t2 = view["turns"]
        assert t0["next_state"] == TR_FIX and t1["next_state"] == TR_FIX and t2["status"] == "awaiting_next_state"
        # the two judged turns (score -1: "不对") fill one batch of 2: trained as main-line turns into v1
        assert (t0["score"], t1["score"]) == (-1, -1)
        assert (t0["status"], t1["status"]) == ("trained", "trained") and t0["trained_version"] == 1
        st = status(srv)
        assert st["requests_without_session"] == 3 and st["turns_served"] == 3 and st["side_turns_served"] == 0
        assert st["samples_trained"] == 2 and st["policy_version"] == 1 and st["match_sessions"] is True
    err = capfd.readouterr().err
    lines = [ln for ln in err.splitlines() if "without a session id" in ln]
    assert len(lines) == 1 and "main-line turn of session 'auto-" in lines[0] and "a new session" in lines[0], err


def test_interleaved_conversations_are_kept_apart():
    with make_server(match_sessions=True, train=False) as srv:
        c = client(srv)
        a = [{"role": "user", "content": TR}]
        b = [{"role": "user", "content": FR}]
        seen = {"a": [], "b": []}
        for reply_a, reply_b in ((TR_FIX, FR_FIX), ("对，谢谢！", "Thanks!"), (None, None)):
            for name, msgs, reply in (("a", a, reply_a), ("b", b, reply_b)):
                text, claw = ask(c, msgs)
                seen[name].append((claw["session_id"], claw["turn"]))
                if reply is not None:
                    msgs += [{"role": "assistant", "content": text}, {"role": "user", "content": reply}]
        sa, sb = seen["a"][0][0], seen["b"][0][0]
        assert sa != sb
        assert seen["a"] == [(sa, 0), (sa, 1), (sa, 2)] and seen["b"] == [(sb, 0), (sb, 1), (sb, 2)]
        assert srv.wait_idle(60)
        va = httpx.get(f"{srv.url}/v1/claw/sessions/{sa}").json()["turns"]
        vb = httpx.get(f"{srv.url}/v1/claw/sessions/{sb}").json()["turns"]
        assert [t["next_state"] for t in va[:2]] == [TR_FIX, "对，谢谢！"]
        assert [t["next_state"] for t in vb[:2]] == [FR_FIX, "Thanks!"]
        # a branch (the last reply edited) extends no session's last turn: a new session, the others untouched
        branch = a[:3] + [{"role": "assistant", "content": va[1]["response_text"]}, {"role": "user", "content": "?"}]
        branch[2] = {"role": "user", "content": "Edited."}
        _, claw = ask(c, branch)
        assert claw["session_id"] not in (sa, sb) and claw["turn"] == 0
        # a streamed request is matched the same way: the finish chunk's claw field names the session
        b_next = b + [{"role": "assistant", "content": vb[2]["response_text"]}, {"role": "user", "content": "?"}]
        chunks = list(c.chat.completions.create(model="tiny", messages=b_next, temperature=0, stream=True))
        claw = next(ch.model_extra["claw"] for ch in chunks if (ch.model_extra or {}).get("claw"))
        assert (claw["session_id"], claw["turn"], claw["turn_type"]) == (sb, 3, "main")
        # a retry of a turn still waiting for its next state is answered from the records, recording nothing
        served = status(srv)["turns_served"]
        text, claw = ask(c, a)
        assert (claw["session_id"], claw["turn"]) == (sa, 2) and text == va[2]["response_text"]
        assert status(srv)["turns_served"] == served
        assert status(srv)["requests_without_session"] == 9


def test_the_sessions_and_the_counter_survive_a_restart(tmp_path):
    out = tmp_path / "run"
    cfg = ServeConfig(ppo=PPOConfig(strategy="combined", batch_size=4, progress=False, threads=1), match_sessions=True)
    with LiveServer(cfg, port=0, out=out) as srv:
        c = client(srv)
        msgs = [{"role": "user", "content": TR}]
        text, first = ask(c, msgs)
        ask(c, [{"role": "user", "content": FR}])
    events = [json.loads(x) for x in (out / "events.jsonl").read_text().splitlines()]
    assert sum(bool(e.get("no_session")) for e in events) == 2
    with LiveServer(cfg, port=0, out=out) as srv:
        assert status(srv)["requests_without_session"] == 2
        _, claw = ask(client(srv), msgs + [{"role": "assistant", "content": text}, {"role": "user", "content": TR_FIX}])
        assert (claw["session_id"], claw["turn"]) == (first["session_id"], 1)
        assert status(srv)["requests_without_session"] == 3
