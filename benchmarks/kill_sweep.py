"""kill -9 sweep of the live system: ``claw simulate`` drives ``claw serve`` while the server is killed
with SIGKILL again and again, half of the kills at the moment a turn's line reaches ``turns.jsonl`` (the turn
recorded, its answer not yet sent: the client retries it), and each kill is followed by the same ``claw serve``
command. Afterwards the run folder is checked:

* no torn line in any record file, and no stale temporary file;
* no duplicate turn: no two turns of a session with the same messages, turn indices 0..n-1 in every session;
* no lost sample: every turn with a next state has a sample (or is still to be judged on the next restart);
* none trained twice: every key in at most one update, every trained key in ``samples.jsonl``, versions 1..N;
* the simulate run finishes (rc 0) with every session.

    python benchmarks/kill_sweep.py --kills 12 --sessions 24      # writes results/serve/kill_sweep.{json,md}

The result files are written only when they do not exist (``--force`` replaces them).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CLAW = [sys.executable, "-m", "claw_lib.apps.cli"]

from claw_lib.serve.process import free_port  # noqa: E402


def start_server(run: Path, port: int, log) -> subprocess.Popen:
    """The same ``claw serve`` command every time; returns once it listens."""
    p = subprocess.Popen(CLAW + ["serve", "--out", str(run), "--port", str(port), "--batch-size", "2",
                                 "--threads", "1"], stdout=log, stderr=log, env={**os.environ, "OMP_NUM_THREADS": "1"})
    t_end = time.time() + 120
    while time.time() < t_end:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return p
        except OSError:
            if p.poll() is not None:
                raise RuntimeError(f"claw serve exited with {p.returncode}; see the log")
            time.sleep(0.05)
    raise RuntimeError("claw serve did not listen within 120 s")


def kill_when_a_turn_is_written(p: subprocess.Popen, turns: Path, timeout_s: float) -> bool:
    """SIGKILL ``p`` the moment ``turns`` grows (polled every 2 ms); False if it did not grow within the timeout."""
    size = turns.stat().st_size if turns.exists() else 0
    t_end = time.time() + timeout_s
    while time.time() < t_end:
        if turns.exists() and turns.stat().st_size > size:
            p.send_signal(signal.SIGKILL)
            p.wait()
            return True
        time.sleep(0.002)
    return False


def records(run: Path, name: str) -> list:
    path = run / name
    if not path.exists():
        return []
    raw = path.read_bytes()
    assert not raw or raw.endswith(b"\n"), f"{name}: a torn last line"
    return [json.loads(x) for x in raw.decode("utf-8").splitlines() if x.strip()]


def check(run: Path) -> dict:
    """The invariants of the run folder (AssertionError naming the first broken one); counts."""
    turns = records(run, "turns.jsonl")
    samples = records(run, "samples.jsonl")
    trained = records(run, "trained.jsonl")
    stale = [f.name for f in run.iterdir() if f.name.endswith(".tmp")]
    assert not stale, f"stale temporary files {stale}"
    by = {}
    for t in turns:
        by.setdefault(t["session_id"], []).append(t)
    for sid, ts in by.items():
        assert [t["turn"] for t in ts] == list(range(len(ts))), f"{sid}: turns {[t['turn'] for t in ts]}"
        msgs = [json.dumps(t["messages"], ensure_ascii=False) for t in ts]
        assert len(set(msgs)) == len(msgs), f"{sid}: a turn recorded twice"
    keys = {f"{t['session_id']}#{t['turn']}" for t in turns}
    with_next = {f"{sid}#{t['turn']}" for sid, ts in by.items() for t in ts[:-1]}
    sampled = {f"{s['session_id']}#{s['turn']}" for s in samples}
    assert sampled <= keys, f"samples without a turn: {sorted(sampled - keys)[:3]}"
    lost = with_next - sampled
    seen, versions = set(), []
    for u in trained:
        versions.append(u["version"])
        twice = seen & set(u["samples"])
        assert not twice, f"trained twice: {sorted(twice)}"
        seen |= set(u["samples"])
    assert versions == list(range(1, len(versions) + 1)), f"versions {versions}"
    assert seen <= sampled, f"trained without a sample: {sorted(seen - sampled)[:3]}"
    return {"turns": len(turns), "sessions": len(by), "samples": len(samples), "updates": len(trained),
            "samples_trained": len(seen), "awaiting_judge_on_restart": len(lost)}


def sweep(args, work: Path) -> dict:
    run, port = work / "run", free_port()
    log = open(work / "serve.log", "ab")
    srv = start_server(run, port, log)
    sim = subprocess.Popen(CLAW + ["simulate", "--url", f"http://127.0.0.1:{port}", "--sessions", str(args.sessions),
                                   "--wait-trained", "0", "--seed", str(args.seed), "--out", str(work / "sim.jsonl"),
                                   "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    rng, kills = random.Random(args.seed), []
    for k in range(args.kills):
        if sim.poll() is not None:
            break
        at_write = k % 2 == 0
        if at_write:
            hit = kill_when_a_turn_is_written(srv, run / "turns.jsonl", 60)
        else:
            time.sleep(rng.uniform(0.5, 4.0))
            srv.send_signal(signal.SIGKILL)
            srv.wait()
            hit = True
        kills.append({"kill": k + 1, "at_turn_write": at_write, "killed": hit, "t": round(time.time(), 3)})
        t0 = time.time()
        srv = start_server(run, port, log)
        kills[-1]["restart_s"] = round(time.time() - t0, 2)
        print(f"kill {k + 1}/{args.kills} ({'at a turn write' if at_write else 'at random'}): restarted in "
              f"{kills[-1]['restart_s']} s", flush=True)
    out, _ = sim.communicate(timeout=1800)
    srv.send_signal(signal.SIGTERM)
    srv.wait(timeout=120)
    log.close()
    result = {"kills": kills, "simulate_rc": sim.returncode, "simulate_tail": out.strip().splitlines()[-3:],
              "sessions_asked": args.sessions, **check(run)}
    sessions = sum(1 for _ in open(work / "sim.jsonl", encoding="utf-8")) if (work / "sim.jsonl").exists() else 0
    result["simulate_sessions_recorded"] = sessions
    return result


def report(r: dict) -> str:
    n_write = sum(k["at_turn_write"] and k["killed"] for k in r["kills"])
    lines = ["# kill -9 sweep of `claw serve` under `claw simulate` (benchmarks/kill_sweep.py)", "",
             f"{len(r['kills'])} kills ({n_write} at the moment a turn's line was written, the rest at random), each "
             "followed by the same `claw serve` command; restarts took "
             f"{min(k['restart_s'] for k in r['kills']):.1f}-{max(k['restart_s'] for k in r['kills']):.1f} s.", "",
             "| check | result |", "|---|---|",
             f"| simulate finished | rc {r['simulate_rc']}, {r['sessions']} sessions in the records of "
             f"{r['sessions_asked']} asked |",
             f"| turns recorded | {r['turns']}, none twice (no two turns of a session with the same messages) |",
             f"| samples | {r['samples']}; turns with a next state and no sample yet (judged on the next start): "
             f"{r['awaiting_judge_on_restart']} |",
             f"| updates | {r['updates']} (versions 1..{r['updates']} without a gap), {r['samples_trained']} samples "
             "trained, none twice, each with its sample record |",
             "| torn lines, stale temporary files | none |", "",
             "What this does not establish: a real model's restart (minutes to load, longer than simulate's 90 s of "
             "retries), a full disk during the sweep (`tests/apps/test_safety_r4_server.py` covers it), or one turn "
             "retried by several clients at once; it is one seed of the tiny GPT on a 2-core machine.", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kills", type=int, default=12)
    ap.add_argument("--sessions", type=int, default=24)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work", default=None, help="scratch folder (default: a new temporary one)")
    ap.add_argument("--results", default=str(ROOT / "results" / "serve"))
    ap.add_argument("--force", action="store_true", help="replace the result files")
    args = ap.parse_args(argv)
    res = Path(args.results)
    if not args.force and any((res / n).exists() for n in ("kill_sweep.json", "kill_sweep.md")):
        print(f"kill_sweep: {res}/kill_sweep.json or .md exists; pass --force to replace it", file=sys.stderr)
        return 2
    import tempfile

    work = Path(args.work or tempfile.mkdtemp(prefix="kill_sweep."))
    work.mkdir(parents=True, exist_ok=True)
    r = sweep(args, work)
    from claw_lib.utils import atomic_write

    res.mkdir(parents=True, exist_ok=True)
    with atomic_write(res / "kill_sweep.json") as f:
        f.write(json.dumps(r, indent=1, ensure_ascii=False) + "\n")
    with atomic_write(res / "kill_sweep.md") as f:
        f.write(report(r))
    print(report(r))
    return 0 if r["simulate_rc"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
