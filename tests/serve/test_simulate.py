"""``claw simulate`` (claw_lib.serve.simulate): the metric against brute force, the session's shape against a
recording driver, the flags and their one-line errors, and, through a real server on a free localhost port, the
session semantics as the server records them (GET /v1/claw/sessions/{id})."""
import argparse
import itertools
import json
import socket

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from claw_lib.serve import simulate as sim


# --------------------------------------------------------------------------- the metric, no server
def brute_force(holds, k=3):
    """The first i with holds[i:i+k] all true, by trying every i."""
    for i in range(len(holds)):
        if len(holds[i:i + k]) == k and all(holds[i:i + k]):
            return i
    return None


def test_sessions_until_stable_written_out():
    # scores per session written out; a session holds when every question scored 1
    scores = [[1, 0.5, 1], [1, 1, 1], [1, 1, 1], [0, 1, 1], [1, 1, 1], [1, 1, 1], [1, 1, 1], [1, 1, 1]]
    holds = [all(s == 1 for s in row) for row in scores]
    assert holds == [False, True, True, False, True, True, True, True]
    assert sim.sessions_until_stable(holds) == 4 == brute_force(holds)
    assert sim.sessions_until_stable([True] * 3) == 0
    assert sim.sessions_until_stable([True, True, False, True, True]) is None
    assert sim.sessions_until_stable([]) is None
    assert sim.counted_sessions(None, 40) == 40 and sim.counted_sessions(7, 40) == 7
    with pytest.raises(ValueError, match="k must be"):
        sim.sessions_until_stable([True], k=0)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.booleans(), max_size=30), st.integers(1, 4))
def test_sessions_until_stable_matches_brute_force(holds, k):
    assert sim.sessions_until_stable(holds, k) == brute_force(holds, k)


def test_every_short_sequence():
    for n in range(9):
        for holds in itertools.product([False, True], repeat=n):
            assert sim.sessions_until_stable(holds) == brute_force(list(holds))


def test_summary_counts_never_at_the_run_length():
    rows = [sim.SessionRow(i, f"s{i}", "teacher", ["q"], ["a"], ["r"], [1.0 if i % 2 else 0.0], bool(i % 2),
                           bool(i % 2), float(i % 2), [0, 0], 0, 0.1) for i in range(6)]
    res = sim.SimulationResult("http://x", "teacher", 6, 1, 0, "tiny", rows, None, 1.0)
    text = res.summary()
    assert "never within 6 sessions (counted as 6)" in text and "sessions that hold: 3/6" in text
    lines = [json.loads(x) for x in res.rows_jsonl().splitlines()]
    assert [x["session"] for x in lines] == list(range(6)) and lines[0]["sessions_to_stable"] is None
    res.sessions_to_stable = 2
    assert "3 sessions in a row: 2 (sessions 3-5 hold)" in res.summary()


def test_server_idle():
    base = {"samples_pending": 0, "samples_scored": 3, "batch_size": 4, "training": "running"}
    assert sim.server_idle(base)
    assert not sim.server_idle({**base, "samples_pending": 1})
    assert not sim.server_idle({**base, "samples_scored": 4})  # a full batch waits for the trainer
    assert sim.server_idle({**base, "samples_scored": 9, "training": "off"})
    assert sim.server_idle({**base, "samples_scored": 9, "training": "stopped"})
    assert not sim.server_idle({**base, "updating": True})


@pytest.mark.parametrize("url, root", [("http://127.0.0.1:8000", "http://127.0.0.1:8000"),
                                       ("http://127.0.0.1:8000/", "http://127.0.0.1:8000"),
                                       ("https://h.example/v1/", "https://h.example")])
def test_normalise_url(url, root):
    assert sim.normalise_url(url) == root


@pytest.mark.parametrize("url", ["", "127.0.0.1:8000", "ftp://h", "http://", "http://h:99999", "localhost"])
def test_bad_url_is_one_line(url):
    with pytest.raises(ValueError) as e:
        sim.normalise_url(url)
    assert "\n" not in str(e.value) and "--url" in str(e.value)


# --------------------------------------------------------------------------- the session's shape, no server
class RecordingDriver:
    """Stands in for the HTTP driver: answers every call with a fixed text and records what was sent."""

    def __init__(self, answer):
        self.answer, self.calls = answer, []

    def chat(self, messages, session_id, turn_type, done, where):
        self.calls.append((json.loads(json.dumps(messages)), session_id, turn_type, done))
        return self.answer, {"policy_version": 0}, 0.01


def test_session_alternates_questions_and_replies():
    from claw_lib.config import TaskConfig
    from claw_lib.toy.envs import make_env

    env = make_env(TaskConfig(user="teacher"), seed=5)
    drv = RecordingDriver("Paris.")
    row = sim._run_session(drv, env, 0, "sid", turns=3, side_turns=1)
    main = [c for c in drv.calls if c[2] == "main"]
    side = [c for c in drv.calls if c[2] == "side"]
    assert len(main) == 6 and len(side) == 3 and all(c[1] == "sid" for c in drv.calls)
    assert [c[3] for c in main] == [False] * 5 + [True]  # only the last reply says the session is done
    ref = make_env(TaskConfig(user="teacher"), seed=5)
    tasks = ref.sample(3)
    for i, t in enumerate(tasks):
        q_msgs, r_msgs = main[2 * i][0], main[2 * i + 1][0]
        assert q_msgs[-1] == {"role": "user", "content": t.fact.question()}  # the bare question
        fb = ref.step(t, "Paris.")
        assert r_msgs[-1] == {"role": "user", "content": fb.next_state}  # the reply is the next main message
        assert r_msgs[:-1] == q_msgs + [{"role": "assistant", "content": "Paris."}]
        assert row.scores[i] == fb.score and row.replies[i] == fb.next_state
    assert side[0][0][:-1] == main[0][0] + [{"role": "assistant", "content": "Paris."}]
    assert row.holds is False and row.versions == [0] * 6 and row.side_turns == 3 and row.request_s == [0.01] * 9


# --------------------------------------------------------------------------- flags and errors, no server
def parser():
    p = argparse.ArgumentParser(prog="claw simulate")
    sim.add_arguments(p)
    return p


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("flags", [["--sessions", "0"], ["--sessions", "x"], ["--turns", "0"], ["--seed", "-1"],
                                   ["--wait-trained", "-1"], ["--wait-trained", "nan"], ["--user", "boss"],
                                   ["--temperature", "3"], ["--side-turns", "11"]])
def test_bad_numbers_are_refused_by_the_parser(flags, capsys):
    with pytest.raises(SystemExit) as e:
        parser().parse_args(["--url", "http://127.0.0.1:1"] + flags)
    assert e.value.code == 2
    assert flags[0] in capsys.readouterr().err


def test_defaults():
    a = parser().parse_args(["--url", "http://127.0.0.1:1"])
    # --sessions unset: 40 for the fact-world users (run_from_args), every problem of the split for --stream gsm8k
    assert (a.user, a.sessions, a.turns, a.seed, a.wait_trained, a.out) == ("teacher", None, 3, 0, 120.0, None)


def test_library_refuses_bad_settings():
    for kw, what in ((dict(sessions=0), "--sessions"), (dict(turns=True), "--turns"), (dict(user="x"), "--user"),
                     (dict(wait_trained=float("inf")), "--wait-trained")):
        with pytest.raises(ValueError, match=what):
            sim.simulate("http://127.0.0.1:1", **kw)


def test_unreachable_server_is_one_line():
    a = parser().parse_args(["--url", f"http://127.0.0.1:{free_port()}", "--timeout", "5", "--no-progress"])
    with pytest.raises(ValueError) as e:
        sim.run_from_args(a)
    msg = str(e.value)
    assert "cannot reach a server at http://127.0.0.1:" in msg and "\n" not in msg


def test_bad_url_from_the_cli():
    with pytest.raises(ValueError, match="--url must be an http"):
        sim.run_from_args(parser().parse_args(["--url", "localhost:8000", "--no-progress"]))


def test_existing_out_is_refused_before_any_request(tmp_path):
    out = tmp_path / "rows.jsonl"
    out.write_text("mine\n")
    a = parser().parse_args(["--url", f"http://127.0.0.1:{free_port()}", "--out", str(out), "--no-progress"])
    with pytest.raises(ValueError, match="already exists"):
        sim.run_from_args(a)
    assert out.read_text() == "mine\n"


# --------------------------------------------------------------------------- through a real server on localhost
@pytest.fixture(scope="module")
def live():
    """One live server (tiny GPT, combined, batches of 4, training on) for the tests below; stopped at the end."""
    from claw_lib.config import PPOConfig
    from claw_lib.serve import LiveServer, ServeConfig

    with LiveServer(ServeConfig(ppo=PPOConfig(strategy="combined", batch_size=4, progress=False)), port=0) as srv:
        yield srv


def get(srv, path):
    import httpx

    r = httpx.get(srv.url + path, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


def test_sessions_as_the_server_records_them(live):
    before = get(live, "/v1/claw/status")
    res = sim.simulate(live.url, user="teacher", sessions=2, turns=2, seed=3, side_turns=1, wait_trained=30)
    after = get(live, "/v1/claw/status")
    assert after["turns_served"] - before["turns_served"] == 2 * 2 * 2  # question and reply turns
    assert after["side_turns_served"] - before["side_turns_served"] == 2 * 2
    assert after["samples_pending"] == 0 and not any(r.wait_timed_out for r in res.rows)
    for row in res.rows:
        view = get(live, f"/v1/claw/sessions/{row.session_id}")
        turns = view["turns"]
        assert view["done"] is True and [t["turn"] for t in turns] == [0, 1, 2, 3]  # side turns never recorded
        for i in range(2):
            answer, reply_turn = turns[2 * i], turns[2 * i + 1]
            assert answer["response_text"] == row.answers[i]
            assert answer["next_state"] == row.replies[i]  # the user's reply is the answer's next state
            assert row.replies[i] in reply_turn["prompt_text"]  # ... and the next main turn's message
            assert answer["status"] in ("scored", "excluded", "trained")
        assert turns[1]["next_state"] == row.questions[1]  # the next question is the next state of the reply's answer
        assert turns[3]["next_state"] is None and turns[3]["status"] == "no_sample"  # the last turn: no sample
        assert row.versions == [t["policy_version"] for t in turns]
        assert row.scores == [float(s) for s in row.scores] and all(0.0 <= s <= 1.0 for s in row.scores)
        assert len(row.request_s) == 4 + 2 and all(x > 0 for x in row.request_s)


def test_waiting_lets_every_full_batch_train_between_sessions(live):
    res = sim.simulate(live.url, user="correcting", sessions=3, turns=2, seed=1, wait_trained=30)
    st = get(live, "/v1/claw/status")
    assert st["samples_pending"] == 0 and st["samples_scored"] < st["batch_size"]
    vs = [v for r in res.rows for v in r.versions]
    assert vs == sorted(vs) and vs[-1] <= st["policy_version"]
    assert res.sessions_to_stable == sim.sessions_until_stable([r.holds for r in res.rows])


def test_waiting_makes_a_run_reproducible():
    """Two fresh servers of the same settings, the same seed, waiting between sessions: the same answers, scores and
    versions (the server's sampling is seeded per request; the updates land where the waits put them)."""
    from claw_lib.config import PPOConfig
    from claw_lib.serve import LiveServer, ServeConfig

    runs = []
    for _ in range(2):
        with LiveServer(ServeConfig(ppo=PPOConfig(strategy="combined", batch_size=4, progress=False)), port=0) as srv:
            res = sim.simulate(srv.url, user="teacher", sessions=3, turns=2, seed=0, wait_trained=30)
        runs.append([(r.answers, r.replies, r.scores, r.versions) for r in res.rows])
    assert runs[0] == runs[1]
    assert runs[0][-1][3][-1] >= 1  # at least one update landed: the runs are equal with training, not without


def test_cli_writes_rows_and_refuses_to_overwrite(live, tmp_path, capsys):
    out = tmp_path / "rows.jsonl"
    flags = ["--url", live.url + "/v1", "--user", "student", "--sessions", "2", "--turns", "1", "--no-progress",
             "--out", str(out)]
    assert sim.run_from_args(parser().parse_args(flags)) == 0
    text = capsys.readouterr().out
    assert "sessions until the preference holds 3 sessions in a row" in text and str(out) in text
    rows = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert [r["session"] for r in rows] == [0, 1] and all(r["user"] == "student" and len(r["scores"]) == 1 for r in rows)
    with pytest.raises(ValueError, match="already exists"):
        sim.run_from_args(parser().parse_args(flags))
    assert sim.run_from_args(parser().parse_args(flags + ["--force", "--sessions", "1"])) == 0
    assert len(out.read_text(encoding="utf-8").splitlines()) == 1


def test_a_server_error_mid_run_is_one_line_and_keeps_the_finished_sessions(live, tmp_path):
    import openai

    client = openai.OpenAI(base_url=live.base_url, api_key="none")
    client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "What is the capital of France?"}],
                                   extra_headers={"X-Session-Id": "dup-0001", "X-Session-Done": "true"})
    out = tmp_path / "part.jsonl"
    a = parser().parse_args(["--url", live.url, "--sessions", "3", "--turns", "1", "--session-prefix", "dup",
                             "--no-progress", "--out", str(out)])
    with pytest.raises(ValueError) as e:
        sim.run_from_args(a)
    assert "HTTP 409 in session 2 (dup-0001)" in str(e.value) and "\n" not in str(e.value)
    assert [json.loads(x)["session_id"] for x in out.read_text(encoding="utf-8").splitlines()] == ["dup-0000"]


def test_unknown_model_is_one_line(live):
    with pytest.raises(ValueError, match="--model 'nope' is not served"):
        sim.simulate(live.url, model="nope", sessions=1)


def test_any_openai_server_without_claw_status(tmp_path):
    """A plain OpenAI-compatible server (as vLLM is): driven without waiting, no versions reported."""
    import threading
    import time

    import uvicorn
    from fastapi import FastAPI, Request

    app, seen = FastAPI(), []

    @app.get("/v1/models")
    async def models():
        return {"object": "list", "data": [{"id": "echo", "object": "model", "owned_by": "test"}]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        body = await request.json()
        seen.append((request.headers.get("x-session-id"), request.headers.get("x-turn-type"),
                     request.headers.get("x-session-done")))
        return {"id": "x", "object": "chat.completion", "created": 0, "model": "echo",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": body["messages"][-1]["content"]}}]}

    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning",
                                           lifespan="off"))
    server.install_signal_handlers = lambda: None
    th = threading.Thread(target=server.run, daemon=True)
    th.start()
    try:
        while not server.started:
            time.sleep(0.02)
        url = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
        res = sim.simulate(url, user="ta", sessions=2, turns=2, seed=0, session_prefix="plain")
    finally:
        server.should_exit = True
        th.join(timeout=10)
    assert res.model == "echo" and all(r.versions == [None] * 4 and r.waited_s == 0 for r in res.rows)
    assert seen[:4] == [("plain-0000", "main", "false")] * 3 + [("plain-0000", "main", "true")]
    assert "not reported by the server" in res.summary()


# --------------------------------------------------------------------------- the `claw simulate` command itself
@pytest.mark.parametrize("flags, says", [(["--url", "localhost:8000"], "claw simulate: --url must be an http(s) URL"),
                                         (["--url", "http://127.0.0.1:1", "--sessions", "0"], "--sessions"),
                                         (["--url", "http://127.0.0.1:1", "--user", "tool"], "--user")])
def test_claw_simulate_errors_are_one_line(flags, says, capsys):
    from claw_lib.apps.cli import main

    try:
        code = main(["simulate"] + flags + ["--no-progress"])
    except SystemExit as e:  # argparse's refusals exit from the parser
        code = e.code
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1


def test_claw_simulate_unreachable(capsys):
    from claw_lib.apps.cli import main

    assert main(["simulate", "--url", f"http://127.0.0.1:{free_port()}", "--no-progress", "--timeout", "5"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("claw simulate: cannot reach a server at") and len(err.splitlines()) == 1


def test_claw_simulate_runs(live, capsys):
    from claw_lib.apps.cli import main

    assert main(["simulate", "--url", live.url, "--user", "ta", "--sessions", "2", "--turns", "1", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "claw simulate: user ta, 2 sessions x 1 questions" in out and "sessions that hold" in out


# --------------------------------------------------------------------------- the benchmark's refusals (never run here)
def test_bench_serve_refuses_before_any_work(tmp_path):
    import importlib.util
    from pathlib import Path

    from claw_lib.utils import script_main

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_serve.py"
    spec = importlib.util.spec_from_file_location("bench_serve_under_test", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with pytest.raises(SystemExit) as e:
        script_main(mod.main, ["--sessions", "0"])
    assert str(e.value.code).startswith("error: --sessions")
    out = tmp_path / "bench.md"
    out.write_text("mine\n")
    with pytest.raises(SystemExit) as e:
        mod.main(["--out", str(out)])
    assert "already exists" in str(e.value.code) and out.read_text() == "mine\n"
