"""``claw serve`` in a child process, for the tools and benchmarks that drive a real server as its users do.

:func:`start_claw_serve` starts ``claw serve FLAGS --port P`` on a free localhost port (:func:`free_port`) and returns
once ``GET /v1/models`` answers (a 0.5B model loads in 30-60 s on a loaded CPU); :func:`cpu_seconds` reads how much
CPU a process has used so far (Linux ``/proc``), the measure "minutes of CPU time" in the tools' reports;
:func:`wait_idle` waits until a server has judged and trained what it has.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Optional, Tuple

import httpx

__all__ = ["free_port", "start_claw_serve", "cpu_seconds", "wait_idle"]

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    """A localhost TCP port nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_claw_serve(flags: List[str], log_path, timeout_s: float = 900.0,
                     env: Optional[dict] = None) -> Tuple[subprocess.Popen, str]:
    """``claw serve FLAGS --port P`` (this checkout's claw_lib, its output appended to ``log_path``): (the process,
    its base URL) once ``/v1/models`` answers. RuntimeError (one line) when it exits first or does not answer within
    ``timeout_s`` seconds (then it is killed); killed too when the wait is interrupted (SIGTERM turned into
    SystemExit, KeyboardInterrupt), so no server is left running alone."""
    port = free_port()
    cmd = [sys.executable, "-m", "claw_lib.apps.cli", "serve", *map(str, flags), "--port", str(port)]
    with open(log_path, "a", encoding="utf-8") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:  # interrupted while it loads (a signal, Ctrl-C): the server goes too, never left running on its own
        if wait_answering(proc, url, timeout_s):
            return proc, url
    except BaseException:
        proc.kill()
        raise
    if proc.poll() is not None:
        raise RuntimeError(f"claw serve exited with {proc.returncode}; see {log_path}")
    proc.kill()
    raise RuntimeError(f"claw serve did not answer within {timeout_s:.0f} s; see {log_path}")


def wait_answering(proc: subprocess.Popen, url: str, timeout_s: float) -> bool:
    """Poll ``url/v1/models`` every 2 s until it answers 200 (True), ``proc`` exits or ``timeout_s`` pass (False)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s and proc.poll() is None:
        try:
            if httpx.get(url + "/v1/models", timeout=5).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(2)
    return False


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a running process has used (Linux ``/proc/PID/stat``), 0.0 where unreadable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def wait_idle(url: str, limit_s: float, poll_s: float = 5.0) -> dict:
    """Poll ``url``'s ``GET /v1/claw/status`` until the server is idle (:func:`claw_lib.serve.simulate.server_idle`:
    no turn waits for its judge, no full batch for the trainer) or ``limit_s`` seconds have passed
    (:func:`claw_lib.serve.simulate.poll_until_idle`); returns the last status."""
    from .simulate import poll_until_idle  # lazy: simulate loads the toy worlds, which starting a server does not need

    return poll_until_idle(lambda: httpx.get(url + "/v1/claw/status", timeout=30).json(), limit_s, poll_s)[0]
