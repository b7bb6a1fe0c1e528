"""claw_lib.serve.process: a claw serve started for a tool or a benchmark never outlives a wait that is interrupted."""

import pytest

from claw_lib.serve import process


def test_a_server_still_loading_is_killed_when_the_wait_is_interrupted(tmp_path, monkeypatch):
    """SIGTERM (turned into SystemExit by the tools) or Ctrl-C while the server loads: the exception goes on and the
    server process is gone, not left running alone (a killed personal-agent run left its 0.5B server behind)."""
    started = []

    def interrupted(proc, url, timeout_s):
        started.append(proc)
        raise SystemExit(143)

    monkeypatch.setattr(process, "wait_answering", interrupted)
    with pytest.raises(SystemExit):
        process.start_claw_serve(["--model", "tiny", "--no-train"], tmp_path / "serve.log", timeout_s=60)
    assert len(started) == 1 and started[0].wait(timeout=30) is not None


def test_a_server_that_exits_is_one_line_naming_its_log(tmp_path):
    with pytest.raises(RuntimeError, match=r"claw serve exited with \d+; see .*serve.log"):
        process.start_claw_serve(["--model", "/no/such/model"], tmp_path / "serve.log", timeout_s=120)
