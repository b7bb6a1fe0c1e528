"""Does serving wait for training, and what does the asynchronous server buy? Measured, not a timed test (issue 34).

    python benchmarks/bench_serve.py [--sessions 40] [--turns 3] [--user teacher] [--strategy combined]
                                     [--batch-size 4] [--seed 0] [--repeats 2] [--out results/serve/bench_serve.md]

Three kinds of run of the live server (``claw_lib.serve.LiveServer``, the tiny GPT, in this process) driven by
``claw_lib.serve.simulate`` with the same sessions (same seed: the same questions; the answers, and so the replies,
differ once the weights do):

* **off**: ``ServeConfig(train=False)``, the client as fast as the server answers (``wait_trained=0``): serving and
  judging only;
* **async**: training on, the client as fast as the server answers: updates run in the background while requests
  are served; the run's time counts until the server is idle again (every turn judged, every full batch trained);
* **step**: training on, the client waits after each session until the server has judged every turn and trained
  every full batch (``wait_trained``): serve one session, judge, train, then the next.

Latency: p50 / p95 of every chat completion's wall time at the client (main and side turns), off vs async, runs
alternating ``--repeats`` times; and, inside the async runs, the requests whose serving overlapped an update (from the
server's timeline, ``GET /v1/claw/events``) vs the rest. Throughput: sessions per minute of async and step, and the
estimate of the step-by-step baseline from its parts: the off run's time plus the async run's number of updates times the
mean update time of the step runs (updates there run alone).
"""
import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def one_run(kind: str, a, threads: int) -> dict:
    """One server, one simulate run; returns the client latencies (s), the wall time (s, until idle), the updates,
    the server's timeline and metrics rows."""
    import httpx

    from claw_lib.config import PPOConfig
    from claw_lib.serve import LiveServer, ServeConfig
    from claw_lib.serve.simulate import simulate

    ppo = PPOConfig(strategy=a.strategy, batch_size=a.batch_size, seed=a.seed, progress=False, threads=threads)
    cfg = ServeConfig(ppo=ppo, train=kind != "off")
    with LiveServer(cfg, port=0) as srv:
        t0 = time.perf_counter()
        res = simulate(srv.url, user=a.user, sessions=a.sessions, turns=a.turns, seed=a.seed, side_turns=a.side_turns,
                       wait_trained=a.wait if kind == "step" else 0.0)
        t_stream = time.perf_counter() - t0
        srv.wait_idle(timeout_s=300)
        t_idle = time.perf_counter() - t0
        st = httpx.get(srv.url + "/v1/claw/status").json()
        events = httpx.get(srv.url + "/v1/claw/events").json()["events"]
        rows = httpx.get(srv.url + "/v1/claw/metrics").json()["rows"]
    lat = [x for r in res.rows for x in r.request_s]
    return {"kind": kind, "latency": lat, "stream_s": t_stream, "wall_s": t_idle, "updates": st["policy_version"],
            "events": events, "metrics": rows, "holds": sum(r.holds for r in res.rows),
            "stable": res.sessions_to_stable, "requests": len(lat), "waited_s": sum(r.waited_s for r in res.rows)}


def overlap_split(events):
    """Server-side serving times (s) of the requests whose interval overlapped an update, and of the rest."""
    trained = [(e["start"], e["end"]) for e in events if e["kind"] == "trained"]
    over, rest = [], []
    for e in events:
        if e["kind"] != "served":
            continue
        hit = any(s < e["end"] and e["start"] < t for s, t in trained)
        (over if hit else rest).append(e["end"] - e["start"])
    return over, rest


def busy_seconds(events):
    """Seconds each loop was busy (sum of its intervals), by kind."""
    out = {}
    for e in events:
        out[e["kind"]] = out.get(e["kind"], 0.0) + e["end"] - e["start"]
    return out


def pct(xs, q):
    return float(np.percentile(xs, q)) * 1000 if xs else float("nan")


def latency_lines(runs) -> list:
    """The latency tables: client-side off vs async (pooled over repeats), then server-side inside async runs."""
    off = [x for r in runs if r["kind"] == "off" for x in r["latency"]]
    on = [x for r in runs if r["kind"] == "async" for x in r["latency"]]
    upd = sum(r["updates"] for r in runs if r["kind"] == "async")
    lines = ["## Serving latency, training off vs on (client wall time of each chat completion)", "",
             "| run | requests | p50 ms | p95 ms | mean ms | updates during the runs |", "|---|---|---|---|---|---|",
             f"| training off | {len(off)} | {pct(off, 50):.1f} | {pct(off, 95):.1f} | {1000 * np.mean(off):.1f} | 0 |",
             f"| training on, in the background | {len(on)} | {pct(on, 50):.1f} | {pct(on, 95):.1f} | "
             f"{1000 * np.mean(on):.1f} | {upd} |",
             f"| on / off | | {pct(on, 50) / pct(off, 50):.2f} | {pct(on, 95) / pct(off, 95):.2f} | "
             f"{np.mean(on) / np.mean(off):.2f} | |", ""]
    over, rest = [], []
    for r in runs:
        if r["kind"] == "async":
            o, s = overlap_split(r["events"])
            over, rest = over + o, rest + s
    lines += ["Inside the training-on runs, the server's own serving time of each request (`served` events of "
              "`GET /v1/claw/events`), split by whether an update was running at the same time:", "",
              "| requests | n | p50 ms | p95 ms |", "|---|---|---|---|",
              f"| overlapping an update | {len(over)} | {pct(over, 50):.1f} | {pct(over, 95):.1f} |",
              f"| not overlapping | {len(rest)} | {pct(rest, 50):.1f} | {pct(rest, 95):.1f} |", ""]
    return lines


def throughput_lines(runs, sessions: int) -> list:
    """Sessions per minute of each run, and the step-by-step estimate built from its parts."""
    lines = ["## Sessions per minute, asynchronous vs step by step", "",
             "| run | wall s (until the server is idle) | sessions/min | updates | staleness (versions, mean) | "
             "client waited s | loops busy s (serve / judge / train) | sessions that hold | sessions until stable |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        b = busy_seconds(r["events"])
        name = {"off": "training off", "async": "async: training in the background",
                "step": "step by step: wait for judge + trainer after each session"}[r["kind"]]
        stale = np.mean([m["staleness_mean"] for m in r["metrics"]]) if r["metrics"] else float("nan")
        lines.append(f"| {name} | {r['wall_s']:.1f} | {60 * sessions / r['wall_s']:.1f} | {r['updates']} | "
                     f"{stale:.2f} | {r['waited_s']:.1f} | {b.get('served', 0):.1f} / {b.get('judged', 0):.1f} / "
                     f"{b.get('trained', 0):.1f} | {r['holds']}/{sessions} | {r['stable']} |")
    step_upd = [m["timing/update_s"] for r in runs if r["kind"] == "step" for m in r["metrics"]]
    mean_upd = float(np.mean(step_upd)) if step_upd else float("nan")
    offs = [r["wall_s"] for r in runs if r["kind"] == "off"]
    n_upd = float(np.mean([r["updates"] for r in runs if r["kind"] == "async"]))
    est = float(np.mean(offs)) + n_upd * mean_upd
    asy = float(np.mean([r["wall_s"] for r in runs if r["kind"] == "async"]))
    stp = float(np.mean([r["wall_s"] for r in runs if r["kind"] == "step"]))
    lines += ["", f"Means: async {60 * sessions / asy:.1f} sessions/min, step by step {60 * sessions / stp:.1f} "
              f"(async / step = {stp / asy:.2f}). The step-by-step baseline built from its parts, the "
              f"training-off run ({np.mean(offs):.1f} s) plus the async runs' {n_upd:.0f} updates x "
              f"{1000 * mean_upd:.0f} ms (mean `timing/update_s` of the step runs' updates, which ran alone): "
              f"{est:.1f} s, {60 * sessions / est:.1f} sessions/min.", ""]
    return lines


def header_lines(a, threads: int) -> list:
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return ["# claw serve: latency with training on vs off, sessions per minute async vs step by step", "",
            f"Machine: {platform.processor() or platform.machine()}, {cores} CPU cores (shared with other work; "
            f"1-minute load {load:.2f} at the start), torch {threads} thread(s), {platform.python_version()}. "
            f"Tiny GPT, strategy {a.strategy}, batch {a.batch_size}, user {a.user}, {a.sessions} sessions x "
            f"{a.turns} questions ({2 * a.turns} main turns + {a.side_turns * a.turns} side turns a session), seed "
            f"{a.seed}, {a.repeats} repeat(s) of the three runs (their order rotating), after one uncounted "
            "warm-up run. "
            "Written by `benchmarks/bench_serve.py`; see its docstring for what each run is.", ""]


#: what this page does not establish (the closing section: claw_lib.utils.limits_section)
LIMITS = [
    'a throughput gain from running the loops in parallel: on 2 shared cores async / step is 0.96',
    'a GPU or a real model: the tiny GPT on a CPU, one seed',
    "stable single numbers: the machine's load changed during the runs (3 repeats in a rotating order; compare the pooled and mean numbers)",
]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=40)
    ap.add_argument("--turns", type=int, default=3)
    ap.add_argument("--side-turns", type=int, default=1)
    ap.add_argument("--user", default="teacher")
    ap.add_argument("--strategy", default="combined")
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--wait", type=float, default=120.0, help="the step runs' bound on waiting after a session (s)")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: the free cores)")
    from claw_lib.utils import add_report_args, limits_section, publish_report, report_path, set_threads

    add_report_args(ap, "the Markdown report")
    a = ap.parse_args(argv)
    if min(a.sessions, a.turns, a.batch_size, a.repeats) < 1 or a.side_turns < 0:
        raise ValueError("--sessions, --turns, --batch-size and --repeats must be >= 1, --side-turns >= 0")
    out = report_path(a)
    threads = set_threads(a.threads)
    lines = header_lines(a, threads)
    one_run("off", argparse.Namespace(**{**vars(a), "sessions": 2}), threads)  # warm-up, not counted
    runs, kinds = [], ("off", "async", "step")
    for k in range(a.repeats):
        for kind in kinds[k % 3:] + kinds[:k % 3]:  # the order rotates: drift in the machine's load spreads
            runs.append(one_run(kind, a, threads))
            r = runs[-1]
            print(f"repeat {k + 1} {kind}: {r['wall_s']:.1f} s, {r['updates']} updates, p95 "
                  f"{pct(r['latency'], 95):.1f} ms", flush=True)
    lines += latency_lines(runs) + throughput_lines(runs, a.sessions)
    if hasattr(os, "getloadavg"):
        lines.append(f"1-minute load of the machine at the end: {os.getloadavg()[0]:.2f} (2 cores: other work ran "
                     "beside the benchmark, so single runs drift; compare the pooled and mean numbers).")
    publish_report("\n".join(lines + ["", limits_section(LIMITS)]), out, a.force)
    return 0


if __name__ == "__main__":
    from claw_lib.utils import script_main

    raise SystemExit(script_main(main))
