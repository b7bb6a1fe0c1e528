"""How many torch threads should a PPO step use? One run, ratios within it (issue 19).

    python benchmarks/bench_threads.py [--steps 5] [--strategy combined] [--out results/bench_threads.md]

A ``combined`` PPO step on the tiny GPT with 1 and with 2 torch threads, first on the quiet machine, then next to
one busy process (a Python loop spinning on one core, as another notebook or run would). The kit's default
(``threads=0``: :func:`claw_lib.utils.free_cpus`, the cores free when the run starts) is what this table argues
for. Results agree to float rounding whatever the thread count (tests/rl/test_ppo.py golden runs use one).
"""
import argparse
import multiprocessing as mp
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _spin(stop):
    while not stop.is_set():
        sum(range(10_000))


def step_seconds(strategy: str, steps: int, threads: int) -> float:
    from claw_lib.config import PPOConfig
    from claw_lib.rl.run import train

    cfg = PPOConfig(strategy=strategy, steps=steps, batch_size=16, eval_every=0, progress=False, device="cpu",
                    threads=threads)
    hist = [h for h in train(cfg) if h["step"] > 1]  # the first step warms up
    return float(np.mean([h["timing/rollout_s"] + h["timing/score_s"] + h["timing/update_s"] for h in hist]))


#: what this page does not establish (the closing section: claw_lib.utils.limits_section)
LIMITS = [
    'a rule for other machines: 2 cores, one run of 4 timed steps; one busy process stands for the other work a shared machine runs',
]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--strategy", default="combined")
    from claw_lib.utils import add_report_args, limits_section, publish_report, report_path

    add_report_args(ap, "the table")
    a = ap.parse_args(argv)
    if not 2 <= a.steps <= 1000:  # the first step warms up and is not timed (BM05)
        raise SystemExit(f"error: --steps must be in [2, 1000] (the first step is not timed), got {a.steps}")
    out = report_path(a)
    rows = {}
    for load in ("quiet", "one busy process"):
        stop = mp.Event()
        spinner = mp.Process(target=_spin, args=(stop,), daemon=True) if load != "quiet" else None
        if spinner:
            spinner.start()
            time.sleep(1.0)
        try:
            for threads in (1, 2):
                rows[(load, threads)] = step_seconds(a.strategy, a.steps, threads)
                print(f"{load:17s} threads={threads}: {rows[(load, threads)]:.3f} s/step", flush=True)
        finally:
            if spinner:
                stop.set()
                spinner.join()
    lines = [f"`{a.strategy}` PPO step on the tiny GPT (batch 16, {a.steps - 1} timed steps), "
             f"{platform.processor() or platform.machine()}, {len(__import__('os').sched_getaffinity(0))} cores.", "",
             "| machine | 1 thread (s/step) | 2 threads (s/step) | 2 threads / 1 thread |", "|---|---|---|---|"]
    for load in ("quiet", "one busy process"):
        one, two = rows[(load, 1)], rows[(load, 2)]
        lines.append(f"| {load} | {one:.3f} | {two:.3f} | {two / one:.2f} |")
    text = "\n".join(lines + ["", limits_section(LIMITS)]) + "\n"
    publish_report(text, out, a.force)
    return 0


if __name__ == "__main__":
    from claw_lib.utils import script_main

    sys.exit(script_main(main))
