"""kill -9 at any moment and the same command resumes: the same version, no scored sample lost, none trained twice."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import openai
import pytest
import torch

CLAW = [sys.executable, "-m", "claw_lib.apps.cli"]
Q = [{"role": "user", "content": "土耳其的首都是哪里？"}]


def _start(out: Path, *extra):
    cmd = CLAW + ["serve", "--out", str(out), "--port", "0", "--batch-size", "2", "--threads", "1",
                  "--max-new-tokens", "12", *extra]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if "listening on" not in line:
        proc.kill()
        pytest.fail(f"claw serve did not start: {line!r} {proc.stderr.read()[-500:]}")
    return proc, line.split("listening on ")[1].split()[0]


def _jsonl(path: Path):
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()] if path.exists() else []


def _sessions(url, prefix, n):
    c = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=30)
    for k in range(n):
        sid = f"{prefix}-{k}"
        a = c.chat.completions.create(model="tiny", messages=Q, extra_headers={"X-Session-Id": sid})
        text = a.choices[0].message.content
        c.chat.completions.create(model="tiny", messages=Q + [{"role": "assistant", "content": text},
                                                              {"role": "user", "content": "不对，土耳其的首都是安卡拉。"}],
                                  extra_headers={"X-Session-Id": sid, "X-Session-Done": "true"})


def _check_folder(out: Path):
    """The invariants a restart must find: no sample in two updates, every update in the checkpoint."""
    trained = _jsonl(out / "trained.jsonl")
    keys = [k for u in trained for k in u["samples"]]
    assert len(keys) == len(set(keys)), "a sample was trained twice"
    assert [u["version"] for u in trained] == list(range(1, len(trained) + 1))
    return trained


def test_kill_9_at_any_moment_loses_nothing(tmp_path):
    out = tmp_path / "run"
    scored_before = set()
    for round_, delay in enumerate((0.0, 0.3, 1.0)):
        proc, url = _start(out)
        st = httpx.get(url + "/v1/claw/status").json()
        if round_:  # the same version as the checkpoint the kill left
            ck = torch.load(out / "checkpoint.pt", weights_only=False) if (out / "checkpoint.pt").exists() else None
            assert st["policy_version"] == (ck["version"] if ck else 0)
            view_keys = set()
            for r in _jsonl(out / "samples.jsonl"):
                view_keys.add(f"{r['session_id']}#{r['turn']}")
            assert scored_before <= view_keys  # no scored sample lost
        _sessions(url, f"r{round_}", 4)
        time.sleep(delay)
        os.kill(proc.pid, signal.SIGKILL)  # in the middle of judging / training / writing
        proc.wait()
        _check_folder(out)
        scored_before = {f"{r['session_id']}#{r['turn']}" for r in _jsonl(out / "samples.jsonl")}
    proc, url = _start(out)
    try:
        t_end = time.time() + 60
        while time.time() < t_end:
            st = httpx.get(url + "/v1/claw/status").json()
            if st["samples_pending"] == 0 and st["samples_scored"] < st["batch_size"]:
                break
            time.sleep(0.2)
        trained = _check_folder(out)
        samples = {f"{r['session_id']}#{r['turn']}": r for r in _jsonl(out / "samples.jsonl")}
        done = {k for u in trained for k in u["samples"]}
        assert st["samples_trained"] == len(done)
        left = [k for k, r in samples.items() if r["status"] == "scored" and k not in done]
        assert len(left) == st["samples_scored"] < 2  # every scored sample trained once, but a part batch
        turns = _jsonl(out / "turns.jsonl")
        assert len(turns) == st["turns_served"] == 24  # 3 rounds x 4 sessions x 2 turns, none lost
        firsts = [f"{t['session_id']}#0" for t in turns if t["turn"] == 0]
        assert set(firsts) <= set(samples)  # every first turn got its next state and was judged
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0


def test_a_folder_of_other_settings_is_refused(tmp_path):
    out = tmp_path / "run"
    proc, url = _start(out)
    proc.send_signal(signal.SIGTERM)
    proc.wait(30)
    r = subprocess.run(CLAW + ["serve", "--out", str(out), "--port", "0", "--strategy", "opd"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2 and "other settings" in r.stderr and "strategy" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("mine")
    r = subprocess.run(CLAW + ["serve", "--out", str(tmp_path / "mine"), "--port", "0"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2 and (tmp_path / "mine" / "notes.txt").read_text() == "mine"


def test_micro_batch_is_not_a_setting_that_makes_a_run_another_run():
    """``--micro-batch`` changes how much of a batch the trainer holds at once, not the update (tests/rl/test_ppo.py):
    a run started without it resumes with it (and a server's trainer reads it from the config)."""
    from claw_lib.config import override
    from claw_lib.serve.config import ServeConfig, default_ppo, differing

    saved = ServeConfig(ppo=default_ppo())
    assert differing(saved, ServeConfig(ppo=override(default_ppo(), {"micro_batch": 1}))) is None
    assert "batch_size" in differing(saved, ServeConfig(ppo=override(default_ppo(), {"batch_size": 2})))
