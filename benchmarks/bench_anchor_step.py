"""The anchor's step with the initial model's distributions kept vs recomputed at each use: seconds per step, one run.

    OMP_NUM_THREADS=2 python benchmarks/bench_anchor_step.py --model tiny [--anchor-from dev|train] [--lang en]
        [--lr 1e-4] [--rows 1] [--reps 3] [--out results/serve/bench_anchor_step.md] [--json ...]

``claw serve --anchor`` (:mod:`claw_lib.serve.anchoring`) takes, after each optimizer step, a step on KL(initial ||
policy) over the initial model's greedy answers to the anchor's prompts (:mod:`claw_lib.rl.anchor`). The initial
model never changes, so its distributions at those tokens are computed once and kept (``reference_kept`` in the
status); this script times :func:`~claw_lib.rl.anchor.anchor_steps` both ways on the same server state:

1. a :class:`~claw_lib.serve.system.LiveSystem` with ``--anchor`` (the capital questions of the real-world task set,
   :mod:`claw_lib.toy.real_tasks`, as ``benchmarks/bench_live_fact.py`` builds them; ``train``: every training one)
   and ``claw serve``'s settings for the model (a real model: PEFT LoRA; ``--lr``, the micro-batch ``--rows``);
2. the trainable weights moved away from the initial model by Gaussian noise (``--noise`` x their mean magnitude,
   or the trainable weights' typical one where they are all zero, as LoRA's B; seeded), so that the step has
   something to undo (on the 0.5B model ``--noise 0.5`` gives about the anchor KL of a live correction, 0.01-0.03);
3. ``--reps`` times, alternately, from those same weights: the step with the kept distributions and the step that
   recomputes them; the KL before and after each (the same step, so the same numbers to rounding).

Ratios come from the same run; on a shared machine only they, not the seconds, carry over.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from claw_lib.utils import add_report_args, atomic_write, check_new_file, limits_section, publish_report, \
    report_path, script_main  # noqa: E402

LIMITS = ["Another machine's seconds: on 2 shared CPU cores the seconds move with the load; the ratio is the result.",
          "The whole update: only the anchor's step is timed, not the optimizer step before it.",
          "Other anchor sets: one set of short capital answers; the kept distributions grow with the answer tokens "
          "(tokens x vocabulary x 4 bytes; above 1 GiB the server recomputes them)."]


def system_with_anchor(a, folder: Path):
    """A :class:`~claw_lib.serve.system.LiveSystem` (no run folder) with the anchor of ``a``'s questions."""
    from bench_live_fact import gate_file

    from claw_lib.config import PPOConfig
    from claw_lib.serve.config import ServeConfig
    from claw_lib.serve.system import LiveSystem

    # claw serve's settings (claw_lib.serve.config.default_ppo) on this model, its per-model ones filled at the load
    ppo = PPOConfig(model=a.model, strategy="combined", batch_size=4, progress=False, threads=a.threads,
                    micro_batch=a.rows, lr=a.lr, lora_impl="auto" if a.model == "tiny" else "peft")
    return LiveSystem(ServeConfig(ppo=ppo, anchor=str(gate_file(folder / "anchor.jsonl", a.lang, a.anchor_from)),
                                  serving_format="full"))


def time_steps(policy, params, start, anchor, lr: float) -> dict:
    """One :func:`~claw_lib.rl.anchor.anchor_steps` from the weights ``start``: seconds and (KL before, after)."""
    import torch

    from claw_lib.rl.anchor import anchor_steps

    with torch.no_grad():
        for q, w in zip(params, start):
            q.copy_(w)
    t0 = time.perf_counter()
    kl = anchor_steps(policy, params, anchor, lr)
    return {"s": time.perf_counter() - t0, "kl": list(kl)}


def measure(a) -> dict:
    """The run's numbers (module docstring)."""
    import torch

    with tempfile.TemporaryDirectory() as tmp:
        system = system_with_anchor(a, Path(tmp))
    policy, kept = system.engine.trainer, system.anchor
    if kept.cache is None:
        raise ValueError("the anchor's distributions were not kept (above the cache's size): nothing to compare")
    params = [q for q in policy.parameters() if q.requires_grad]
    sizes = [float(q.detach().abs().mean()) for q in params]
    typical = statistics.mean(x for x in sizes if x > 0)  # for weights at zero (LoRA's B)
    g = torch.Generator().manual_seed(a.seed)
    with torch.no_grad():
        for q, size in zip(params, sizes):
            q.add_(torch.randn(q.shape, generator=g) * a.noise * (size or typical))
    start = [q.detach().clone() for q in params]
    both = {"kept": kept, "recomputed": replace(kept, cache=None)}
    runs = {k: [] for k in both}
    for _ in range(a.reps):
        for k, anchor in both.items():
            runs[k].append(time_steps(policy, params, start, anchor, system.ppo.lr))
    med = {k: statistics.median(r["s"] for r in v) for k, v in runs.items()}
    return {"model": a.model, "anchor_from": a.anchor_from, "lang": a.lang, "prompts": len(kept.batch.input_ids),
            "tokens": kept.tokens, "rows": a.rows, "lr": system.ppo.lr, "noise": a.noise, "reps": a.reps,
            "runs": runs, "median_s": med, "ratio": med["recomputed"] / med["kept"],
            "kept_mib": sum(p.numel() for p, _ in kept.cache) * 4 / 2 ** 20}


def render(res: dict) -> str:
    """The Markdown page of a run (``res``: what :func:`measure` returns)."""
    lines = ["# The anchor's step: the initial model's distributions kept vs recomputed", "",
             f"Model `{Path(res['model']).name}`; the anchor: the {res['anchor_from']} capital questions ({res['lang']}), "
             f"{res['prompts']} prompts, {res['tokens']} answer tokens, scored {res['rows'] or 'all'} rows at a time; "
             f"kept: {res['kept_mib']:.1f} MiB. Written by `benchmarks/bench_anchor_step.py`; see its docstring.", "",
             "| | median s per anchor step | KL before -> after (first rep, nats per token) |", "|---|---|---|"]
    for k, v in res["runs"].items():
        lines.append(f"| {k} | {res['median_s'][k]:.3f} | {v[0]['kl'][0]:.6f} -> {v[0]['kl'][1]:.6f} |")
    lines += ["", f"- Recomputed / kept: **{res['ratio']:.2f}x** the seconds per anchor step (median of "
                  f"{res['reps']} each, alternating, from the same weights; the weights moved by noise "
                  f"{res['noise']:g} x their magnitude).", "", limits_section(LIMITS)]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="tiny", help="tiny, or a local Hugging Face folder")
    ap.add_argument("--lang", default="en", choices=("en", "zh"))
    ap.add_argument("--anchor-from", choices=("dev", "train"), default="dev", help="the anchor's capital questions")
    ap.add_argument("--rows", type=int, default=None, help="rows scored at a time (the micro-batch; default: all)")
    ap.add_argument("--lr", type=float, default=None, help="claw serve --lr (default: the per-model one)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--noise", type=float, default=0.05, help="the weights' move, in their mean magnitudes")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", type=Path, default=None, help="also write the numbers as JSON")
    add_report_args(ap, "the Markdown page")
    a = ap.parse_args(argv)
    if a.reps < 1 or not a.noise > 0 or (a.rows is not None and a.rows < 1):
        raise ValueError("--reps must be >= 1, --noise > 0 and --rows >= 1")
    out = report_path(a)
    if a.json is not None:
        check_new_file(a.json, a.force)
    res = measure(a)
    if a.json is not None:
        with atomic_write(a.json, replace=a.force) as f:
            json.dump(res, f, indent=1)
    publish_report(render(res), out, a.force)
    return 0


if __name__ == "__main__":
    raise SystemExit(script_main(main))
