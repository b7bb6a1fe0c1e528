"""Where does a PPO step spend its time? Tokens/s for rollout, scoring and update, per strategy,
and the share of each stage, measured in one run.

    python benchmarks/bench_ppo.py [--steps 4] [--batch-size 16] [--strategies binary perplexity combined opd_kl]
"""
import argparse

import numpy as np

from claw_lib.rl.ppo import PPOConfig, train


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--strategies", nargs="+", default=["sentence", "binary", "perplexity", "binary_rl", "combined", "opd_kl"])
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args()
    print("| strategy | tokens/step | rollout tok/s | scoring tok/s | update tok/s | rollout % | scoring % | update % |")
    print("|---|---|---|---|---|---|---|---|")
    for s in a.strategies:
        hist = train(PPOConfig(strategy=s, steps=a.steps, batch_size=a.batch_size, eval_every=0, progress=False,
                               device=a.device))[1:]
        tok = np.sum([h["timing/rollout_tokens"] for h in hist])
        t = {k: np.sum([h[f"timing/{k}_s"] for h in hist]) for k in ("rollout", "score", "update")}
        tot = sum(t.values())
        print(f"| {s} | {tok / len(hist):.0f} | {tok / t['rollout']:.0f} | {tok / t['score']:.0f} | {tok / t['update']:.0f} | "
              f"{100 * t['rollout'] / tot:.0f} | {100 * t['score'] / tot:.0f} | {100 * t['update'] / tot:.0f} |", flush=True)


if __name__ == "__main__":
    main()
