"""claw serve through real HTTP with the official openai client (and raw httpx for malformed requests)."""
import threading

import httpx
import numpy as np
import openai
import pytest

Q = "土耳其的首都是哪里？"
WRONG_THEN_RIGHT = "不对，土耳其的首都是安卡拉。"


def client(srv):
    return openai.OpenAI(base_url=srv.base_url, api_key="none", max_retries=0)


def test_models_and_a_plain_completion(server):
    c = client(server)
    assert [m.id for m in c.models.list().data] == ["tiny"]
    r = c.chat.completions.create(model="tiny", messages=[{"role": "user", "content": Q}], logprobs=True,
                                  extra_headers={"X-Session-Id": "plain"})
    claw = r.model_extra["claw"]
    assert claw["session_id"] == "plain" and claw["turn"] == 0 and claw["turn_type"] == "main"
    assert r.choices[0].message.content.startswith("土耳其")
    lps = [t.logprob for t in r.choices[0].logprobs.content]
    assert len(lps) == r.usage.completion_tokens and all(lp <= 0 for lp in lps)
    # the recorded rollout log-probs are the serving weights' own: recomputed independently here
    from claw_lib.models.lm import ids_logprobs

    t = server.system.turns["plain#0"]
    again = ids_logprobs(server.system.engine.serving, [t.prompt_ids], [t.response_ids], 0)[0][0]
    assert np.allclose(again, t.rollout_log_probs, atol=1e-5) or t.policy_version != server.system.engine.version


def test_stream_gives_the_same_answer(server):
    c = client(server)
    msgs = [{"role": "user", "content": "What is the capital of France?"}]
    plain = c.chat.completions.create(model="tiny", messages=msgs, temperature=0).choices[0].message.content
    stream = c.chat.completions.create(model="tiny", messages=msgs, temperature=0, stream=True)
    chunks = list(stream)
    assert "".join(ch.choices[0].delta.content or "" for ch in chunks) == plain
    assert chunks[-1].choices[0].finish_reason in ("stop", "length")


def test_side_turns_are_served_never_recorded(server):
    before = server.system.status()
    r = client(server).chat.completions.create(model="tiny", messages=[{"role": "user", "content": Q}],
                                                extra_headers={"X-Session-Id": "side-1", "X-Turn-Type": "side"})
    assert r.model_extra["claw"]["turn"] is None and r.choices[0].message.content
    after = server.system.status()
    assert after["side_turns_served"] == before["side_turns_served"] + 1
    assert after["turns_served"] == before["turns_served"]
    assert httpx.get(server.url + "/v1/claw/sessions/side-1").status_code == 404
    r = client(server).chat.completions.create(model="tiny", messages=[{"role": "user", "content": Q}])
    assert r.model_extra["claw"]["turn_type"] == "side"  # no session id: a side turn, as upstream


def _session(c, sid, answer_reply, done=True):
    msgs = [{"role": "user", "content": Q}]
    a = c.chat.completions.create(model="tiny", messages=msgs, extra_headers={"X-Session-Id": sid}).choices[0]
    msgs += [{"role": "assistant", "content": a.message.content}, {"role": "user", "content": answer_reply(a)}]
    c.chat.completions.create(model="tiny", messages=msgs,
                              extra_headers={"X-Session-Id": sid, "X-Session-Done": "true" if done else "false"})
    return a.message.content


def test_the_next_message_is_the_next_state(server):
    c = client(server)
    answer = _session(c, "ns-1", lambda a: WRONG_THEN_RIGHT)
    assert server.wait_idle(30)
    view = httpx.get(server.url + "/v1/claw/sessions/ns-1").json()
    first, last = view["turns"]
    assert view["done"] and first["response_text"] == answer and first["next_state"] == WRONG_THEN_RIGHT
    assert last["status"] == "no_sample" and last["next_state"] is None  # the last turn of a finished session
    assert first["status"] in ("scored", "trained", "excluded") and first["votes"]
    assert len(first["advantages"]) == len(first["tokens"])  # one signal per response token
    if "安卡拉" not in answer:  # a wrong answer corrected: the judge says -1 and its tokens are negative
        assert first["score"] == -1 and min(first["advantages"]) < 0
    r = httpx.post(server.url + "/v1/chat/completions",
                   json={"messages": [{"role": "user", "content": "again"}]}, headers={"X-Session-Id": "ns-1"})
    assert r.status_code == 409 and "finished" in r.json()["error"]["message"]


@pytest.mark.parametrize("body,headers,status,words", [
    (b"{not json", {}, 400, "not valid JSON"),
    ({"model": "gpt-9", "messages": [{"role": "user", "content": "hi"}]}, {}, 404, "gpt-9"),
    ({"messages": [{"role": "user", "content": "x" * 4001}]}, {}, 413, "4000"),
    ({"messages": [{"role": "user", "content": "hi"}]}, {"X-Turn-Type": "main"}, 400, "session id"),
    ({"messages": [{"role": "wizard", "content": "hi"}]}, {}, 400, "role"),
    ({"messages": []}, {}, 400, "non-empty"),
    ({"messages": [{"role": "user", "content": "hi"}], "temperature": -1}, {}, 400, "temperature"),
    ({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 10**6}, {}, 400, "max_tokens"),
    ({"messages": [{"role": "user", "content": "hi"}]}, {"X-Session-Id": "t", "X-Turn-Type": "sideways"}, 400,
     "X-Turn-Type"),
    ({"messages": [{"role": "user", "content": "hi"}]}, {"X-Session-Id": "t2", "X-Session-Done": "maybe"}, 400,
     "X-Session-Done"),
    ([1, 2], {}, 400, "JSON object"),
])
def test_bad_requests_get_a_4xx_json_error_naming_the_problem(server, body, headers, status, words):
    kw = {"content": body} if isinstance(body, bytes) else {"json": body}
    if isinstance(body, bytes):  # malformed JSON, sent as JSON (another content type is a 415: R4-S1)
        headers = {**headers, "Content-Type": "application/json"}
    r = httpx.post(server.url + "/v1/chat/completions", headers=headers, **kw)
    assert r.status_code == status
    err = r.json()["error"]
    assert words in err["message"] and "\n" not in err["message"] and err["type"] == "invalid_request_error"


def test_unknown_routes_and_the_openai_client_errors(server):
    r = httpx.get(server.url + "/v1/nothing")
    assert r.status_code == 404 and "/v1/nothing" in r.json()["error"]["message"]
    with pytest.raises(openai.NotFoundError):
        client(server).chat.completions.create(model="gpt-9", messages=[{"role": "user", "content": "hi"}])


def test_many_concurrent_sessions_are_served_correctly(server):
    c = client(server)
    answers, errors = {}, []

    def run(k):
        try:
            answers[k] = _session(c, f"conc-{k}", lambda a, k=k: f"不对，第{k}个。", done=True)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and len(answers) == 8
    for k in range(8):
        first, last = httpx.get(server.url + f"/v1/claw/sessions/conc-{k}").json()["turns"]
        assert first["response_text"] == answers[k] and first["next_state"] == f"不对，第{k}个。"


def test_status_has_the_counters(server):
    st = httpx.get(server.url + "/v1/claw/status").json()
    for k in ("policy_version", "turns_served", "samples_pending", "samples_scored", "samples_trained",
              "last_update_s", "training", "stopped_reason", "samples_excluded"):
        assert k in st
    assert st["training"] == "running" and st["stopped_reason"] is None
    ev = httpx.get(server.url + "/v1/claw/events").json()
    assert {e["kind"] for e in ev["events"]} >= {"served", "judged"} and ev["next"] == len(ev["events"])
    assert all(e["end"] >= e["start"] for e in ev["events"])
    page = httpx.get(server.url + "/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
