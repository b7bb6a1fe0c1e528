"""Review round 4, OpenAI's parameters on `claw serve` (R4-03, R4-13, R4-14, R4-15 of
shared/notes/review-reliability-4.md): each case through real HTTP against a live server on a free localhost
port, with the official openai client where it can send the case and raw httpx where it cannot (wrong types)."""
import httpx
import openai
import pytest

from claw_lib.config import PPOConfig
from claw_lib.serve import LiveServer, ServeConfig

MSGS = [{"role": "user", "content": "法国的首都是哪里？"}]


@pytest.fixture(scope="module")
def srv():
    s = LiveServer(ServeConfig(ppo=PPOConfig(strategy="combined", batch_size=2, progress=False, threads=1),
                               train=False), port=0).start()
    yield s
    s.stop()


def client(s):
    return openai.OpenAI(base_url=s.base_url, api_key="none", max_retries=0)


def post(s, **body):
    return httpx.post(s.url + "/v1/chat/completions", json={"messages": MSGS, **body}, timeout=60)


def refused(r, param):
    err = r.json()["error"]
    return r.status_code == 400 and err["code"] == f"bad_{param}" and err["message"].startswith(param + " ")


@pytest.mark.parametrize("temperature", [1e-45, 1e-300, 5e-324, 1e-7])
def test_R4_03_a_tiny_temperature_is_greedy(srv, temperature):
    c = client(srv)
    greedy = c.chat.completions.create(model="tiny", messages=MSGS, temperature=0).choices[0].message.content
    r = c.chat.completions.create(model="tiny", messages=MSGS, temperature=temperature)
    assert r.choices[0].message.content == greedy


def test_R4_13_n_two_gives_two_choices(srv):
    r = client(srv).chat.completions.create(model="tiny", messages=MSGS, n=2, temperature=2.0, seed=1)
    assert [c.index for c in r.choices] == [0, 1] and all(c.message.content is not None for c in r.choices)


@pytest.mark.parametrize("body,param", [({"n": 0}, "n"), ({"n": 99}, "n"), ({"top_p": 5}, "top_p"),
                                        ({"top_p": -0.1}, "top_p"), ({"top_logprobs": -1, "logprobs": True},
                                                                     "top_logprobs"),
                                        ({"top_logprobs": 5}, "top_logprobs"), ({"stop": [""]}, "stop"),
                                        ({"stop": ["a", "b", "c", "d", "e"]}, "stop"), ({"stop": 3}, "stop")])
def test_R4_13_out_of_range_is_refused_by_name(srv, body, param):
    assert refused(post(srv, **body), param)


def test_R4_13_stop_string_is_not_in_the_answer(srv):
    c = client(srv)
    full = c.chat.completions.create(model="tiny", messages=MSGS, temperature=0).choices[0].message.content
    assert "的" in full  # 法国的首都是...
    r = c.chat.completions.create(model="tiny", messages=MSGS, temperature=0, stop=["的"])
    assert r.choices[0].message.content == full[:full.index("的")] and r.choices[0].finish_reason == "stop"


def test_R4_13_top_logprobs_lists_five_alternatives(srv):
    r = client(srv).chat.completions.create(model="tiny", messages=MSGS, logprobs=True, top_logprobs=5, max_tokens=6)
    content = r.choices[0].logprobs.content
    assert content and all(len(e.top_logprobs) == 5 for e in content)
    assert all(e.logprob <= e.top_logprobs[0].logprob + 1e-6 for e in content)


def test_R4_14_a_null_max_completion_tokens_does_not_hide_a_bad_max_tokens(srv):
    assert refused(post(srv, max_completion_tokens=None, max_tokens=-1), "max_tokens")
    assert refused(post(srv, max_completion_tokens=0, max_tokens=5), "max_completion_tokens")
    r = post(srv, max_completion_tokens=None, max_tokens=3)
    assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] <= 3


@pytest.mark.parametrize("body,param", [({"stream": "no"}, "stream"), ({"stream": "true"}, "stream"),
                                        ({"logprobs": "false"}, "logprobs"), ({"stream": 1}, "stream")])
def test_R4_15_stream_and_logprobs_must_be_booleans(srv, body, param):
    r = post(srv, **body)
    assert refused(r, param) and f"{param} must be true or false" in r.json()["error"]["message"]
