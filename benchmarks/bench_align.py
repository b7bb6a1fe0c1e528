"""Time the DP alignment: the numpy anti-diagonal sweep (``align(method="diagonal")``) vs the plain-Python reference vs the
article's loop (np.argmin per cell), all in one run, on random (n, n) cost matrices.

    python benchmarks/bench_align.py [--sizes 16 64 256 512 1024] [--repeat 3] [--out results/bench_align.md]

Prints the best-of-repeat time of each and the ratios; the seed loop is skipped above 512
(it takes minutes). Ratios, not absolute times, are the claim: they hold across machines.
"""
from __future__ import annotations

import argparse
import platform
import time

import numpy as np

from claw_lib.alignment.dp import align, align_reference, align_seed_loop

#: the largest matrix side: the plain-Python reference loop costs n^2 Python steps (the defaults stop at 1024)
MAX_SIZE = 2048


def best_time(fn, c, repeat):
    fn(c)  # warm-up
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn(c)
        ts.append(time.perf_counter() - t)
    return min(ts)


#: what this page does not establish (the closing section: claw_lib.utils.limits_section)
LIMITS = [
    'speed on another machine or numpy version: one x86_64 machine with 2 shared cores, best of 3; compare the ratios of one run',
    'that the alignment is right: this times the dynamic programme; results/probe_sets.md measures what it finds',
]


def main(argv=None) -> int:
    """Time each size; ``--out`` is checked before the work and written whole at the end, never over a file
    without ``--force`` (BM01); sizes and repeats out of range are one line (BM02)."""
    from claw_lib.utils import add_report_args, limits_section, publish_report, report_path

    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[16, 64, 256, 512, 1024])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed-loop-max", type=int, default=512)
    add_report_args(ap, "the table (Markdown)")
    a = ap.parse_args(argv)
    if not all(1 <= n <= MAX_SIZE for n in a.sizes) or not 1 <= a.repeat <= 100:
        raise SystemExit(f"error: every --sizes value must be in [1, {MAX_SIZE}] and --repeat in [1, 100], got "
                         f"--sizes {' '.join(map(str, a.sizes))} --repeat {a.repeat}")
    out = report_path(a)
    rng = np.random.default_rng(0)
    rows = ["| n x n | diagonal (ms) | reference loop (ms) | seed loop (ms) | reference / diagonal | seed loop / diagonal |",
            "|---|---|---|---|---|---|"]
    for n in a.sizes:
        c = rng.random((n, n))
        tf = best_time(lambda x: align(x, method="diagonal"), c, a.repeat)
        tr = best_time(align_reference, c, a.repeat if n <= 512 else 1)
        ts = best_time(lambda x: align_seed_loop(x), c, 1) if n <= a.seed_loop_max else float("nan")
        assert align(c).ops == align_reference(c).ops
        rows.append(f"| {n} x {n} | {tf * 1e3:.2f} | {tr * 1e3:.1f} | "
                    f"{'-' if ts != ts else f'{ts * 1e3:.0f}'} | {tr / tf:.1f}x | "
                    f"{'-' if ts != ts else f'{ts / tf:.0f}x'} |")
        print(rows[-1], flush=True)
    head = (f"DP alignment benchmark (python {platform.python_version()}, numpy {np.__version__}, "
            f"{platform.machine()}, best of {a.repeat})")
    print()
    publish_report("\n".join([head, ""] + rows + ["", limits_section(LIMITS)]), out, a.force)
    return 0


if __name__ == "__main__":
    from claw_lib.utils import script_main

    raise SystemExit(script_main(main))
