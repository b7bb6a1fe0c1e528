"""OpenAI's parameters through real HTTP with the official openai client: streaming as tokens are decoded (with
stream_options.include_usage), n, stop, top_p, seed, logprobs + top_logprobs, the refused ones, GET /v1/models/{id},
and concurrent requests decoded together."""
import math
import threading
import time

import httpx
import numpy as np
import openai
import pytest

Q = [{"role": "user", "content": "土耳其的首都是哪里？"}]


def client(srv):
    return openai.OpenAI(base_url=srv.base_url, api_key="none", max_retries=0)


def test_a_stream_sends_tokens_as_they_are_decoded(server):
    c = client(server)
    plain = c.chat.completions.create(model="tiny", messages=Q, temperature=0, max_tokens=40)
    stream = c.chat.completions.create(model="tiny", messages=Q, temperature=0, max_tokens=40, stream=True,
                                       logprobs=True, stream_options={"include_usage": True})
    chunks, arrived = [], []
    for ch in stream:
        chunks.append(ch)
        arrived.append(time.perf_counter())
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert text == plain.choices[0].message.content
    lps = [e.logprob for ch in chunks if ch.choices and ch.choices[0].logprobs for e in ch.choices[0].logprobs.content]
    assert len(lps) == plain.usage.completion_tokens  # one chunk per decoded token
    assert np.allclose(lps, [e.logprob for e in c.chat.completions.create(
        model="tiny", messages=Q, temperature=0, max_tokens=40, logprobs=True).choices[0].logprobs.content], atol=1e-5)
    finish = [ch for ch in chunks if ch.choices and ch.choices[0].finish_reason]
    assert finish[0].choices[0].finish_reason == plain.choices[0].finish_reason
    assert finish[0].model_extra["claw"]["policy_version"] == plain.model_extra["claw"]["policy_version"]
    last = chunks[-1]
    assert last.choices == [] and last.usage.completion_tokens == plain.usage.completion_tokens
    assert last.usage.prompt_tokens == plain.usage.prompt_tokens


def test_the_first_token_arrives_before_the_answer_is_finished(server, monkeypatch):
    """With decoding slowed to >= 5 ms a token and no stop token (80 tokens: >= 0.4 s), the first token reaches
    the client long before the last: the stream is not the finished answer cut into chunks."""
    engine = server.system.engine
    decode = engine._decode
    monkeypatch.setattr(engine, "stops", ())
    monkeypatch.setattr(engine, "_decode", lambda ids: (time.sleep(0.005), decode(ids))[1])
    t0 = time.perf_counter()
    arrived = [time.perf_counter() - t0 for ch in client(server).chat.completions.create(
        model="tiny", messages=Q, temperature=1.0, max_tokens=80, seed=3, stream=True) if ch.choices]
    assert len(arrived) == 1 + 80 + 1  # role, one per token, finish
    assert arrived[1] < 0.5 * arrived[-1] and arrived[-2] - arrived[1] > 0.3


def test_a_stream_without_include_usage_has_no_usage_chunk(server):
    chunks = list(client(server).chat.completions.create(model="tiny", messages=Q, stream=True, max_tokens=5))
    assert all(ch.choices for ch in chunks) and all(ch.usage is None for ch in chunks)


def test_n_gives_n_choices_and_the_seed_makes_them_reproducible(server):
    c = client(server)
    r = c.chat.completions.create(model="tiny", messages=Q, n=3, seed=11, temperature=2.0, max_tokens=20)
    again = c.chat.completions.create(model="tiny", messages=Q, n=3, seed=11, temperature=2.0, max_tokens=20)
    texts = [ch.message.content for ch in r.choices]
    assert [ch.index for ch in r.choices] == [0, 1, 2] and len(set(texts)) > 1
    assert texts == [ch.message.content for ch in again.choices]
    other = c.chat.completions.create(model="tiny", messages=Q, n=3, seed=12, temperature=2.0, max_tokens=20)
    assert texts != [ch.message.content for ch in other.choices]
    assert r.usage.completion_tokens >= 3


def test_stop_cuts_the_answer_before_the_stop_string(server):
    c = client(server)
    full = c.chat.completions.create(model="tiny", messages=Q, temperature=0).choices[0].message.content
    assert "首都" in full  # the greedy answer names the capital: 土耳其的首都是...
    r = c.chat.completions.create(model="tiny", messages=Q, temperature=0, stop=["首都"])
    assert r.choices[0].message.content == full[:full.index("首都")] and r.choices[0].finish_reason == "stop"
    s = c.chat.completions.create(model="tiny", messages=Q, temperature=0, stop="首都", stream=True)
    assert "".join(ch.choices[0].delta.content or "" for ch in s if ch.choices) == r.choices[0].message.content


def test_top_logprobs_are_the_real_alternatives(server):
    c = client(server)
    r = c.chat.completions.create(model="tiny", messages=Q, temperature=0, logprobs=True, top_logprobs=5,
                                  max_tokens=8)
    for e in r.choices[0].logprobs.content:
        top = [t.logprob for t in e.top_logprobs]
        assert len(top) == 5 and top == sorted(top, reverse=True)
        assert e.logprob == pytest.approx(top[0], abs=1e-6)  # greedy: the chosen token is the most likely
        assert sum(math.exp(x) for x in top) <= 1 + 1e-5


def test_top_p_keeps_the_nucleus(server):
    """top_p near 0 keeps only the most likely token: the sampled answer is the greedy one."""
    c = client(server)
    greedy = c.chat.completions.create(model="tiny", messages=Q, temperature=0).choices[0].message.content
    for seed in range(3):
        r = c.chat.completions.create(model="tiny", messages=Q, temperature=1.0, top_p=1e-4, seed=seed)
        assert r.choices[0].message.content == greedy


@pytest.mark.parametrize("extra,param", [({"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools"),
                                         ({"response_format": {"type": "json_object"}}, "response_format"),
                                         ({"presence_penalty": 0.5}, "presence_penalty"),
                                         ({"top_logprobs": 21, "logprobs": True}, "top_logprobs"),
                                         ({"top_logprobs": 2}, "top_logprobs"),
                                         ({"stream_options": {"include_usage": True}}, "stream_options")])
def test_what_cannot_be_honoured_is_refused_by_name(server, extra, param):
    r = httpx.post(server.url + "/v1/chat/completions", json={"messages": Q, **extra})
    assert r.status_code == 400 and r.json()["error"]["code"] == f"bad_{param}"
    assert param in r.json()["error"]["message"]


def test_models_retrieve(server):
    c = client(server)
    m = c.models.retrieve("tiny")
    assert m.id == "tiny" and m.created > 0
    with pytest.raises(openai.NotFoundError):
        c.models.retrieve("gpt-4o")
    assert httpx.get(server.url + "/v1/models/gpt-4o").json()["error"]["code"] == "model_not_found"


def test_concurrent_requests_get_their_alone_answers(server):
    """Eight clients at once (decoded together) get the greedy answers each gets alone."""
    c = client(server)
    qs = [f"{x}的首都是哪里？" for x in ("土耳其", "法国", "日本", "德国", "英国", "意大利", "中国", "美国")]
    ask = lambda q: c.chat.completions.create(model="tiny", messages=[{"role": "user", "content": q}],
                                              temperature=0, max_tokens=30).choices[0].message.content
    solo = [ask(q) for q in qs]
    got = [None] * len(qs)
    threads = [threading.Thread(target=lambda k=k: got.__setitem__(k, ask(qs[k]))) for k in range(len(qs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert got == solo


def test_a_retried_main_turn_streams_its_recorded_answer(server):
    """A main turn sent again (its answer lost to the client) is answered from the records: a stream carries the
    recorded text although nothing is decoded."""
    c = client(server)
    h = {"X-Session-Id": "retry-stream"}
    first = c.chat.completions.create(model="tiny", messages=Q, temperature=1.0, extra_headers=h)
    chunks = list(c.chat.completions.create(model="tiny", messages=Q, temperature=1.0, stream=True, extra_headers=h))
    assert "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices) == first.choices[0].message.content
    finish = [ch for ch in chunks if ch.choices and ch.choices[0].finish_reason][0]
    assert finish.model_extra["claw"]["turn"] == 0 == first.model_extra["claw"]["turn"]


def test_a_stream_of_n_choices_adds_up_to_each_choice(server):
    c = client(server)
    kw = dict(model="tiny", messages=Q, n=2, seed=5, temperature=2.0, max_tokens=16)
    plain = c.chat.completions.create(**kw)
    texts = {0: "", 1: ""}
    for ch in c.chat.completions.create(stream=True, **kw):
        for choice in ch.choices:
            texts[choice.index] += choice.delta.content or ""
    assert [texts[0], texts[1]] == [ch.message.content for ch in plain.choices]


def test_a_repeated_conversation_is_read_from_the_prefix_cache_and_answers_the_same():
    """Through the openai client, training off: the same side turn twice, then the conversation's next turn; the
    status's prefix cache counts what was not prefilled, and the answers are those of a server without the cache."""
    from tests.serve.conftest import make_server

    def talk(srv):
        c = client(srv)
        first = c.chat.completions.create(model="tiny", messages=Q, temperature=0, max_tokens=12, logprobs=True)
        again = c.chat.completions.create(model="tiny", messages=Q, temperature=0, max_tokens=12, logprobs=True)
        turn = Q + [{"role": "assistant", "content": first.choices[0].message.content},
                    {"role": "user", "content": "日本呢？"}]
        nxt = c.chat.completions.create(model="tiny", messages=turn, temperature=1.0, seed=5, max_tokens=12,
                                        logprobs=True)
        st = httpx.get(srv.url + "/v1/claw/status").json()["prefix_cache"]
        return [(r.choices[0].message.content, [e.logprob for e in r.choices[0].logprobs.content])
                for r in (first, again, nxt)], st, first.usage.prompt_tokens

    with make_server(train=False) as on, make_server(train=False, prefix_cache_tokens=0) as off:
        (got, st, n), (ref, st_off, _) = talk(on), talk(off)
    for (text, lps), (text_ref, lps_ref) in zip(got, ref):
        assert text == text_ref and np.allclose(lps, lps_ref, atol=1e-5)
    assert st["budget_tokens"] > 0 and st["hits"] >= 1 and st["reused_tokens"] >= n - 1
    assert st_off["reused_tokens"] == 0 and st_off["budget_tokens"] == 0
