"""The personal-agent stream driven live (claw_lib/serve/homework_sim.py): the session's turns as the persona's
verdicts say, against a scripted driver; the whole path on the tiny GPT through real HTTP and the `claw` command."""
import json
from pathlib import Path

import httpx
import pytest

from claw_lib.config import PPOConfig
from claw_lib.serve import LiveServer, ServeConfig
from claw_lib.serve import homework_sim as hw
from claw_lib.toy.gsm8k import Problem
from claw_lib.toy.homework import accepts
from claw_lib.toy.homework import first_request

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "gsm8k" / "sample.jsonl"
PLAIN = "She bakes 4 * 6 = 24 muffins and gives away 9, so 24 - 9 = 15 are left. 15"
AI = "**Step 1:** 4 * 6 = 24\n**Step 2:** 24 - 9 = 15\n\\boxed{15}"


class Scripted:
    """A driver that answers from a list and records each request (messages, done)."""

    def __init__(self, answers):
        self.answers, self.calls = list(answers), []

    def completion(self, messages, session_id, turn_type, done, where, max_tokens=None):
        from types import SimpleNamespace as NS

        assert (max_tokens == hw.CLOSING_MAX_TOKENS) == done  # the closing message's answer is cut, nothing else
        self.calls.append((json.loads(json.dumps(messages)), done))
        text = self.answers.pop(0) if self.answers else "ok"
        return NS(choices=[NS(message=NS(content=text))], usage=NS(completion_tokens=len(text.split())),
                  model_extra={"claw": {"policy_version": len(self.calls) - 1}})


PROBLEM = Problem(0, "Mina bakes 4 trays of muffins with 6 muffins on each tray. She gives 9 muffins to her "
                     "neighbours. How many muffins does she have left?", "15")


def test_an_accepted_first_reply_ends_the_session_with_thanks():
    assert accepts("student", PLAIN) and not accepts("student", AI)
    d = Scripted([PLAIN])
    row = hw._session(d, PROBLEM, 0, "s", "student", "en", 0, 8)
    _, request = first_request("student", "en", PROBLEM, 0)
    assert d.calls[0] == (request, False) and len(d.calls) == 2 and d.calls[1][1] is True
    assert d.calls[1][0][-2] == {"role": "assistant", "content": PLAIN}  # the thanks is the reply's next state
    assert row.first_accepted and row.first_correct and row.accepted_at == 0 and row.answers == 1
    assert row.first_tokens == len(PLAIN.split()) and row.first_version == 0


def test_a_rejected_reply_gets_a_complaint_then_the_rewrite_is_read():
    d = Scripted([AI, PLAIN])
    row = hw._session(d, PROBLEM, 0, "s", "student", "en", 0, 8)
    complaint = d.calls[1][0][-1]["content"]
    assert not any(ch.isdigit() for ch in complaint)  # the user never writes a number
    assert [c[1] for c in d.calls] == [False, False, True] and row.answers == 2 and row.accepted_at == 1
    assert not row.first_accepted and row.first_correct  # \\boxed{15}: the final number is the gold answer


def test_a_user_who_is_never_satisfied_gives_up_after_max_turns():
    d = Scripted([AI] * 5)
    row = hw._session(d, PROBLEM, 0, "s", "student", "en", 0, 3)
    assert row.answers == 3 and row.accepted_at is None and [c[1] for c in d.calls] == [False] * 3 + [True]


def test_settings_are_refused_in_one_line():
    with pytest.raises(ValueError, match="--user for the gsm8k stream must be one of"):
        hw.simulate_homework("http://127.0.0.1:1", [PROBLEM], persona="correcting")
    with pytest.raises(ValueError, match="concurrency must be"):
        hw.simulate_homework("http://127.0.0.1:1", [PROBLEM], concurrency=0)


def test_the_stream_through_claw_serve_and_claw_simulate(tmp_path, capsys):
    """CI's path: the scripted stream (data/gsm8k/sample.jsonl) against the tiny GPT, sessions at once."""
    from claw_lib.apps.cli import main

    cfg = ServeConfig(ppo=PPOConfig(strategy="combined", batch_size=2, progress=False, threads=1, max_new_tokens=16))
    with LiveServer(cfg, port=0) as srv:
        out = tmp_path / "rows.jsonl"
        rc = main(["simulate", "--url", srv.url, "--stream", "gsm8k", "--user", "student", "--problems", str(SAMPLE),
                   "--concurrency", "3", "--max-turns", "2", "--max-tokens", "16", "--out", str(out),
                   "--session-prefix", "gs"])
        printed = capsys.readouterr().out
        assert rc == 0 and "persona student (en), 6 sessions" in printed
        rows = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
        assert [r["session"] for r in rows] == list(range(6)) and [r["problem"] for r in rows] == list(range(6))
        for r in rows:  # the server recorded every answer and the closing message of each session
            view = httpx.get(srv.url + f"/v1/claw/sessions/{r['session_id']}").json()
            assert len(view["turns"]) == r["answers"] + 1 and view["done"]
            assert r["first_accepted"] == accepts("student", r["first_reply"])
    assert rows[0]["sessions_to_adaptation"] is None or rows[0]["sessions_to_adaptation"] >= 0


def test_fact_world_flags_refuse_the_streams_flags(capsys):
    from claw_lib.apps.cli import main

    assert main(["simulate", "--url", "http://127.0.0.1:1", "--lang", "zh"]) == 2
    assert "--lang belong to --stream gsm8k" in capsys.readouterr().err


def test_prompted_puts_the_preference_before_the_request():
    from claw_lib.toy.homework import preference

    d = Scripted([PLAIN])
    hw._session(d, PROBLEM, 0, "s", "student", "en", 0, 8, prompted=True)
    _, request = first_request("student", "en", PROBLEM, 0)
    assert d.calls[0][0] == [{"role": "system", "content": preference("student", "en")}] + request


def test_resume_keeps_the_finished_sessions_and_runs_the_others(tmp_path, capsys):
    """A killed run's journal (two finished sessions): the same command runs the other four, in stream order."""
    from claw_lib.apps.cli import main

    out = tmp_path / "rows.jsonl"
    cfg = ServeConfig(ppo=PPOConfig(strategy="combined", batch_size=2, progress=False, threads=1, max_new_tokens=8),
                      train=False)
    argv = ["simulate", "--stream", "gsm8k", "--user", "student", "--problems", str(SAMPLE), "--concurrency", "2",
            "--max-turns", "1", "--max-tokens", "8", "--out", str(out), "--session-prefix", "rs", "--resume"]
    with LiveServer(cfg, port=0) as srv:
        assert main(argv[:1] + ["--url", srv.url] + argv[1:] + ["--sessions", "2"]) == 0
        first = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
        assert main(argv[:1] + ["--url", srv.url] + argv[1:]) == 0
        rows = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert [r["session"] for r in rows] == list(range(6))
    assert [r["first_reply"] for r in rows[:2]] == [r["first_reply"] for r in first]  # kept, not asked again
    assert [r["session_id"] for r in rows[:2]] == ["rs-0000", "rs-0001"]
    tags = {r["session_id"].split(".")[1] for r in rows[2:]}  # the resumed call's sessions: fresh ids, one tag
    assert [r["session_id"].split(".")[0] for r in rows[2:]] == [f"rs-{n:04d}" for n in range(2, 6)] and len(tags) == 1
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({**first[0], "persona": "teacher"}) + "\n", encoding="utf-8")
    assert main(["simulate", "--url", "http://127.0.0.1:1"] + argv[1:argv.index("--out")]
                + ["--out", str(other), "--resume"]) == 2
    assert "not of --user student" in capsys.readouterr().err


def test_resume_after_a_kill_between_the_servers_end_of_session_and_the_journal(tmp_path):
    """A kill after the server recorded a session's end (X-Session-Done) but before its row reached the journal:
    the same command runs that session again under a fresh id instead of stopping at the server's 409 for the
    finished one (the 0.5B teacher run of 2026-12-07 stopped there)."""
    from claw_lib.apps.cli import main

    out = tmp_path / "rows.jsonl"
    cfg = ServeConfig(ppo=PPOConfig(strategy="combined", batch_size=2, progress=False, threads=1, max_new_tokens=8),
                      train=False)
    argv = ["simulate", "--stream", "gsm8k", "--user", "student", "--problems", str(SAMPLE), "--concurrency", "1",
            "--max-turns", "1", "--max-tokens", "8", "--out", str(out), "--session-prefix", "k", "--resume",
            "--sessions", "3"]
    with LiveServer(cfg, port=0) as srv:
        assert main(argv[:1] + ["--url", srv.url] + argv[1:]) == 0
        lines = out.read_text(encoding="utf-8").splitlines()
        out.write_text("\n".join(lines[:2]) + "\n", encoding="utf-8")  # session 3 ended on the server, not here
        drv = hw._Driver(srv.url, None, 30.0, None, 8)
        try:
            with pytest.raises(Exception, match="409|finished"):  # its old id is refused by the server
                drv.completion([{"role": "user", "content": "hi"}], "k-0002", "main", False, "again")
        finally:
            drv.close()
        assert main(argv[:1] + ["--url", srv.url] + argv[1:]) == 0
        rows = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert [r["session"] for r in rows] == [0, 1, 2]
    assert rows[2]["session_id"].startswith("k-0002.r") and rows[2]["first_reply"] is not None


def test_wait_trained_lets_each_update_land_before_the_next_session():
    """With ``wait_trained`` each session waits for the server to judge and train what it has, so one session at a
    time meets the policy its predecessors' feedback produced: every full batch is trained before the next session
    starts (the server has nothing left to train when a session ends its wait), and the last sessions are served by
    an updated version."""
    cfg = ServeConfig(ppo=PPOConfig(strategy="combined", batch_size=2, progress=False, threads=1, max_new_tokens=16))
    problems = hw.stream_problems(problems_file=SAMPLE)[:4]
    seen = []
    with LiveServer(cfg, port=0) as srv:
        def check(row):
            st = httpx.get(srv.url + "/v1/claw/status").json()
            seen.append((row.session, st["samples_scored"], st["samples_judging"], st["updates"]))

        res = hw.simulate_homework(srv.url, problems, "student", concurrency=1, max_turns=2, max_tokens=16,
                                   session_prefix="wt", on_session=check, wait_trained=120)
    assert all(scored < 2 and judging == 0 for _, scored, judging, _ in seen)  # nothing left to train after a wait
    assert seen[-1][3] >= 1 and res.rows[-1].first_version >= 1 and all(r.waited_s >= 0 for r in res.rows)
    with pytest.raises(ValueError, match="wait_trained"):
        hw.simulate_homework("http://127.0.0.1:1", [PROBLEM], wait_trained=-1)
