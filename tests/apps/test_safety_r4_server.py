"""Fourth reliability review (issue 43, ids as in ``../shared/notes/review-reliability-4.md``; see tests/README.md):
``claw serve`` through real HTTP. One request validator checks every string of a body before anything is recorded;
a turn is recorded and answered, or neither; a retried main turn gets the recorded answer and records nothing; only
``application/json`` bodies, only this server's Host; a bind failure is one line."""
import errno
import json
import socket

import httpx
import openai
import pytest

from claw_lib.config import PPOConfig
from claw_lib.serve import LiveServer, ServeConfig

Q = [{"role": "user", "content": "法国的首都是哪里？"}]
J = {"Content-Type": "application/json"}


def _cfg(**kw) -> ServeConfig:
    return ServeConfig(ppo=PPOConfig(strategy="combined", batch_size=2, progress=False, threads=1, max_new_tokens=8),
                       **kw)


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    s = LiveServer(_cfg(max_message_chars=100, max_messages=4), port=0,
                   out=tmp_path_factory.mktemp("r4") / "run").start()
    yield s
    s.stop()


def _post(srv, body, headers=J, **kw):
    data = body if isinstance(body, (bytes, str)) else json.dumps(body)
    return httpx.post(srv.url + "/v1/chat/completions", content=data, headers=headers, timeout=60, **kw)


def _error(r, status, *words):
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert err["type"] == "invalid_request_error" and "\n" not in err["message"], err
    for w in words:
        assert w in err["message"], err["message"]
    return err


def _lines(srv):
    path = srv.system.folder.path / "turns.jsonl"
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def test_R4_01_deeply_nested_json_is_a_400(srv):
    """H08: 100000 nested arrays (20000 here, within the body limit) gave a plain-text 500 (RecursionError)."""
    _error(_post(srv, '{"messages": ' + "[" * 20000 + "]" * 20000 + "}"), 400, "not valid JSON")


@pytest.mark.parametrize("content", [[{"type": "text", "text": 5}], [{"type": "text", "text": ["a"]}]])
def test_R4_02_a_text_part_whose_text_is_not_a_string_is_a_400(srv, content):
    """H22, T22: a 500 (TypeError in message_text)."""
    _error(_post(srv, {"messages": [{"role": "user", "content": content}]}), 400, "messages[0].content[0].text")


@pytest.mark.parametrize("where", ["user", "side"])
def test_R4_04_a_lone_surrogate_in_a_message_is_a_400(srv, where):
    """H90, H91: a 500 from the tokenizer."""
    head = {**J, "X-Session-Id": "sur-main"} if where == "user" else J
    before = len(_lines(srv))
    _error(_post(srv, '{"messages":[{"role":"user","content":"\\ud800 hi"}]}', head), 400,
           "messages[0].content is not valid Unicode")
    assert len(_lines(srv)) == before


def test_R4_05_a_lone_surrogate_anywhere_is_refused_before_anything_is_recorded(srv):
    """S01, S02: a surrogate in a system message or in session_id gave a 500 after the turn entered memory; it was
    then judged and trained with no line in turns.jsonl."""
    served = srv.system.status()["turns_served"]
    body = '{"messages":[{"role":"system","content":"\\ud800"},{"role":"user","content":"法国的首都是哪里？"}],' \
           '"session_id":"sys-sur"}'
    _error(_post(srv, body), 400, "messages[0].content is not valid Unicode")
    _error(_post(srv, '{"messages":[{"role":"user","content":"hi"}],"session_id":"\\ud800"}'), 400,
           "session_id is not valid Unicode")
    assert srv.system.status()["turns_served"] == served
    assert httpx.get(srv.url + "/v1/claw/sessions/sys-sur").status_code == 404
    assert not any(k.startswith("sys-sur") for k in srv.system.turns)


def test_R4_06_a_client_that_hangs_up_leaves_no_traceback(srv, capfd):
    """slowloris: 1000 tracebacks (starlette ClientDisconnect) from connections that sent part of a body."""
    capfd.readouterr()
    for _ in range(5):
        with socket.create_connection(("127.0.0.1", srv.port)) as s:
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                      b"Content-Length: 1000\r\n\r\n{\"messages\": [")
    assert httpx.get(srv.url + "/v1/claw/status").status_code == 200  # still answering
    err = capfd.readouterr().err
    assert "Traceback" not in err and "ClientDisconnect" not in err, err


@pytest.mark.parametrize("content", [[1, 2], ["hello"], [{"type": "text"}]])
def test_R4_12_malformed_content_parts_are_a_400_not_an_empty_prompt(srv, content):
    """H19, T20, T21: the parts were dropped and the model answered an empty prompt, as a main turn."""
    before = len(_lines(srv))
    _error(_post(srv, {"messages": [{"role": "user", "content": content}]}, {**J, "X-Session-Id": "s12"}), 400,
           "messages[0].content[0]")
    assert len(_lines(srv)) == before
    # image parts are dropped, as API.md says: the text part is what the policy reads
    ok = _post(srv, {"messages": [{"role": "user", "content": [{"type": "text", "text": "法国的首都是哪里？"},
                                                               {"type": "image_url", "image_url": {"url": "x"}}]}]})
    assert ok.status_code == 200


def test_R4_28_a_body_beyond_the_limits_is_a_413(srv):
    """8 MB bodies of 2000 messages were accepted and written whole into turns.jsonl."""
    before = len(_lines(srv))
    many = [{"role": "user", "content": "x"}] * 5
    _error(_post(srv, {"messages": many}, {**J, "X-Session-Id": "big"}), 413, "5 messages", "at most 4")
    _error(_post(srv, b'{"messages": [], "pad": "' + b"x" * 80_000 + b'"}'), 413, "bytes")
    assert len(_lines(srv)) == before


def test_R4_29_a_bad_query_parameter_gets_the_api_error_shape(srv):
    """H66: FastAPI's {"detail": [...]} shape with a 422."""
    _error(httpx.get(srv.url + "/v1/claw/events?since=abc"), 400, "since")


def test_R4_S1_a_body_that_is_not_application_json_is_refused(srv):
    """H59: a text/plain POST (no CORS preflight needed) queued a false correction for training."""
    body = json.dumps({"messages": Q, "session_id": "csrf-1"})
    _error(_post(srv, body, {"Content-Type": "text/plain;charset=UTF-8", "Origin": "http://evil.example"}), 415,
           "application/json")
    _error(_post(srv, body, {}), 415, "application/json")
    assert httpx.get(srv.url + "/v1/claw/sessions/csrf-1").status_code == 404
    assert _post(srv, body, {"Content-Type": "application/json; charset=utf-8"}).status_code == 200


def test_R4_S2_another_host_header_is_refused(srv):
    """No Host check: a DNS-rebinding page could read every session."""
    for path in ("/v1/claw/status", "/v1/claw/events", "/v1/claw/sessions/csrf-1"):
        _error(httpx.get(srv.url + path, headers={"Host": f"evil.example:{srv.port}"}), 421, "evil.example")
    for host in (f"localhost:{srv.port}", f"127.0.0.1:{srv.port}", "127.0.0.1"):
        assert httpx.get(srv.url + "/v1/claw/status", headers={"Host": host}).status_code == 200


def test_R4_08_a_retried_main_turn_gets_the_recorded_answer_and_records_nothing(srv):
    """k9b: the retry of a turn whose answer was lost was recorded as a second turn, and the orphan was judged by a
    message that answers another turn."""
    c = openai.OpenAI(base_url=srv.base_url, api_key="none", max_retries=0)
    head = {"X-Session-Id": "retry-1"}
    first = c.chat.completions.create(model="tiny", messages=Q, extra_headers=head)
    before = len(_lines(srv))
    again = c.chat.completions.create(model="tiny", messages=Q, extra_headers=head, temperature=1.0)
    assert again.choices[0].message.content == first.choices[0].message.content
    assert again.model_extra["claw"]["turn"] == first.model_extra["claw"]["turn"] == 0
    assert len(_lines(srv)) == before
    nxt = Q + [{"role": "assistant", "content": first.choices[0].message.content},
               {"role": "user", "content": "不对，法国的首都是巴黎。"}]
    second = c.chat.completions.create(model="tiny", messages=nxt, extra_headers={**head, "X-Session-Done": "true"})
    assert second.model_extra["claw"]["turn"] == 1
    # R4-25: the retry of a finished session's last turn is answered from the records, not refused with 409
    retried = c.chat.completions.create(model="tiny", messages=nxt, extra_headers={**head, "X-Session-Done": "true"})
    assert retried.choices[0].message.content == second.choices[0].message.content
    assert [json.loads(x)["turn"] for x in _lines(srv) if json.loads(x)["session_id"] == "retry-1"] == [0, 1]
    with pytest.raises(openai.ConflictError):  # a new turn of the finished session is still refused
        c.chat.completions.create(model="tiny", messages=nxt + [{"role": "user", "content": "再问一次"}],
                                  extra_headers=head)


def test_R4_08_R4_25_a_retry_after_a_restart_is_answered_from_the_records(tmp_path):
    """k9b / k9d: the server dies after writing a turn and before answering; the client's retry reaches the
    restarted server (the same command) and must not record the turn again."""
    out = tmp_path / "run"
    with LiveServer(_cfg(), port=0, out=out) as s:
        r = s.system.serve(_turn(s, "k9", done=False))  # recorded, the answer never sent
        text = r[0].text
    with LiveServer(_cfg(), port=0, out=out) as s:
        c = openai.OpenAI(base_url=s.base_url, api_key="none", max_retries=0)
        a = c.chat.completions.create(model="tiny", messages=Q, extra_headers={"X-Session-Id": "k9"})
        assert a.choices[0].message.content == text and a.model_extra["claw"]["turn"] == 0
        lines = (out / "turns.jsonl").read_text(encoding="utf-8").splitlines()
        assert [json.loads(x)["session_id"] for x in lines] == ["k9"]


def _turn(s, sid, done):
    from claw_lib.serve.app import parse_chat

    return parse_chat({"messages": Q, "session_id": sid, "session_done": done}, {}, s.system)


class _FullDisk:
    """A raw file whose writes fail with ENOSPC after ``room`` bytes, as a full disk does (partial write first)."""

    def __init__(self, f, room: int):
        self.f, self.room = f, room

    def write(self, b):
        if self.room <= 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        n = self.f.write(bytes(b[:self.room]))
        self.room -= n
        return n

    def __getattr__(self, name):
        return getattr(self.f, name)


def test_R4_27_a_full_disk_records_nothing_answers_507_and_a_retry_later_records_once(tmp_path):
    """disk 2: the correction got a plain-text 500 while its turn was served and kept in memory; its line reached
    turns.jsonl on a later flush, so after a restart the session showed a turn the client never saw."""
    with LiveServer(_cfg(train=False), port=0, out=tmp_path / "run") as s:
        c = openai.OpenAI(base_url=s.base_url, api_key="none", max_retries=0)
        first = c.chat.completions.create(model="tiny", messages=Q, extra_headers={"X-Session-Id": "disk"})
        log = s.system.logs["turns.jsonl"]
        size = log.path.stat().st_size
        real = log._f
        log._f = _FullDisk(real, room=7)  # a torn line would be left by a partial write
        nxt = Q + [{"role": "assistant", "content": first.choices[0].message.content},
                   {"role": "user", "content": "不对，法国的首都是巴黎。"}]
        r = _post(s, {"messages": nxt}, {**J, "X-Session-Id": "disk"})
        err = _error(r, 507, "not recorded", "No space left on device", "turns.jsonl")
        assert err["code"] == "insufficient_storage"
        assert log.path.stat().st_size == size  # cut off again: no torn line
        assert s.system.status()["turns_served"] == 1 and s.system.turns["disk#0"].status == "awaiting_next_state"
        log._f = real  # space again: the client's retry is recorded once, as turn 1
        ok = c.chat.completions.create(model="tiny", messages=nxt, extra_headers={"X-Session-Id": "disk"})
        assert ok.model_extra["claw"]["turn"] == 1
        assert [json.loads(x)["turn"] for x in log.path.read_text(encoding="utf-8").splitlines()] == [0, 1]


def test_R4_26_a_checkpoint_that_does_not_fit_stops_training_naming_the_disk(tmp_path, monkeypatch):
    """disk 1: stopped_reason was torch's "[enforce fail at inline_container.cc:672] . unexpected pos"."""
    import contextlib

    import claw_lib.serve.resume as resume

    @contextlib.contextmanager
    def full(path, mode="w", **kw):
        class F:
            def write(self, b):
                raise OSError(errno.ENOSPC, "No space left on device", str(path))
        yield F()

    import claw_lib.utils as utils

    with LiveServer(_cfg(), port=0, out=tmp_path / "run") as s:
        for module in (utils, resume):  # the checkpoint's writer, wherever resume.py imports it from
            monkeypatch.setattr(module, "atomic_write", full, raising=False)
        c = openai.OpenAI(base_url=s.base_url, api_key="none", max_retries=0)
        for k in range(2):
            sid = f"fill-{k}"
            a = c.chat.completions.create(model="tiny", messages=Q, extra_headers={"X-Session-Id": sid})
            c.chat.completions.create(model="tiny", messages=Q + [
                {"role": "assistant", "content": a.choices[0].message.content},
                {"role": "user", "content": "不对，法国的首都是巴黎。"}], extra_headers={"X-Session-Id": sid,
                                                                            "X-Session-Done": "true"})
        s.wait_idle(60)
        st = s.system.status()
        assert st["training"] == "stopped", st
        assert "no space left on device in " + str(tmp_path / "run") in st["stopped_reason"]
        assert st["policy_version"] == 0 and not (tmp_path / "run" / "checkpoint.pt").exists()
        assert c.chat.completions.create(model="tiny", messages=Q).choices[0].message.content  # still serving


def test_R4_07_a_port_in_use_or_a_bad_host_is_one_line():
    """O33 (R4-07), O12 and L62 (R4-07b): tracebacks ending in "(is the port in use?)", also for a host that does not
    resolve and for port -1."""
    from claw_lib.serve.server import bind_socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        with pytest.raises(ValueError, match=rf"^port {port} is in use on 127.0.0.1; choose another --port"):
            bind_socket("127.0.0.1", port)
    with pytest.raises(ValueError, match=r"^--host 'bogus.invalid' is not an address of this machine"):
        bind_socket("bogus.invalid", 0)
    with pytest.raises(ValueError, match=r"^port must be an integer in \[0, 65535\]"):
        LiveServer(_cfg(), port=-1)


def test_R4_07_claw_serve_on_a_port_in_use_exits_2_with_one_line(capsys):
    from claw_lib.apps.cli import main

    from .safety import message

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        capsys.readouterr()
        assert main(["serve", "--port", str(port)]) == 2
        assert message(capsys.readouterr().err) == f"claw serve: port {port} is in use on 127.0.0.1; choose another " \
                                                   "--port, or --port 0 for a free one"
    assert main(["serve", "--host", "bogus.invalid", "--port", "0"]) == 2
    assert "--host 'bogus.invalid'" in message(capsys.readouterr().err)


def test_R4_S3_a_server_bound_beyond_this_machine_warns():
    """O13: `claw serve --host 0.0.0.0` printed no warning although every conversation became readable and
    trainable from the network."""
    from claw_lib.serve.server import exposure_warning

    for host in ("0.0.0.0", "::", "192.0.2.1"):
        w = exposure_warning(host)
        assert w.startswith("claw serve: warning: ") and "anyone who can reach the port" in w
    for host in ("127.0.0.1", "localhost", "::1"):
        assert exposure_warning(host) is None


def test_R4_16_a_judge_model_without_a_url_judge_is_refused():
    """O24: `claw serve --judge-model foo` with the rule judge was accepted and ignored."""
    from claw_lib.serve.config import check_serve_config

    with pytest.raises(ValueError, match="judge_model names the model of a URL judge"):
        check_serve_config(_cfg(judge_model="foo"))
    # with a URL judge the model name is read (the URL itself is asked when the system builds its judge: R4-10)
    assert check_serve_config(_cfg(judge="http://127.0.0.1:9/v1", judge_model="foo")).judge_model == "foo"
