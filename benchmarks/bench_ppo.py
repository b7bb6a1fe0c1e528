"""Where does a PPO step spend its time, and how does the kit's loop compare with TRL's GRPOTrainer
on the same model, settings and number of sampled tokens? One run, ratios within it.

    python benchmarks/bench_ppo.py [--steps 6] [--batch-size 16] [--threads 0] [--out results/bench_ppo.md]

For each strategy: tokens per step, tokens/s of rollout (sampling + the log-probs it needs + the
user's replies), scoring (judging + signals) and update, and each stage's share; then kit vs TRL
seconds per step (rollout + scoring + update, the evaluation excluded) for binary_rl and combined.
The first step of each run is a warm-up and is not counted.
"""
import argparse
import platform

import numpy as np

STAGES = ("rollout", "score", "update")


def step_seconds(hist):
    """Mean seconds per step of rollout, scoring and update over the steps after the first."""
    steps = [h for h in hist if h["step"] > 1]
    return {k: float(np.mean([h.get(f"timing/{k}_s", 0.0) for h in steps])) for k in STAGES}, \
        float(np.mean([h.get("timing/rollout_tokens", 0) for h in steps]))


#: what this page does not establish (the closing section: claw_lib.utils.limits_section)
LIMITS = [
    'speed on a GPU or with a real model: the tiny GPT on a CPU, batch 16, 5 timed steps, one run',
    "that one engine is faster in general: kit / TRL is one run's ratio on this machine (results/real_model/bench_step.md has a real model's update)",
]


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--strategies", nargs="+", default=["sentence", "binary", "perplexity", "binary_rl", "combined",
                                                         "opd_kl"])
    ap.add_argument("--engines", nargs="+", default=["binary_rl", "combined"], help="strategies also run through TRL")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: the free cores)")
    ap.add_argument("--device", default="cpu")
    from claw_lib.utils import add_report_args, limits_section, publish_report, report_path, set_threads

    add_report_args(ap, "the Markdown tables")
    a = ap.parse_args(argv)
    out = report_path(a)

    from claw_lib.config import PPOConfig
    from claw_lib.rl.run import train

    threads = set_threads(a.threads)
    lines = [f"PPO step on the tiny GPT, batch {a.batch_size}, {a.steps - 1} timed steps, {threads} torch thread(s), "
             f"{platform.processor() or platform.machine()}.", "",
             "| strategy | tokens/step | rollout tok/s | scoring tok/s | update tok/s | rollout % | scoring % | update % |",
             "|---|---|---|---|---|---|---|---|"]
    kit = {}
    for s in a.strategies:
        cfg = PPOConfig(strategy=s, steps=a.steps, batch_size=a.batch_size, eval_every=0, progress=False,
                        device=a.device, threads=threads)
        t, tok = step_seconds(train(cfg))
        kit[s] = (t, tok)
        tot = sum(t.values())
        lines.append(f"| {s} | {tok:.0f} | " + " | ".join(f"{tok / max(t[k], 1e-9):.0f}" for k in STAGES) + " | "
                     + " | ".join(f"{100 * t[k] / tot:.0f}" for k in STAGES) + " |")
        print(lines[-1], flush=True)
    try:
        from claw_lib.integrations.trl import train_trl
    except ImportError as e:
        lines += ["", f"TRL comparison skipped: {e}"]
    else:
        lines += ["", "| strategy | kit s/step | TRL s/step | kit / TRL | kit tokens/step | TRL tokens/step |",
                  "|---|---|---|---|---|---|"]
        for s in a.engines:
            cfg = PPOConfig(strategy=s, steps=a.steps, batch_size=a.batch_size, eval_every=0, progress=False,
                            device=a.device, threads=threads)
            t_trl, tok_trl = step_seconds(train_trl(cfg))
            t_kit, tok_kit = kit.get(s) or step_seconds(train(cfg))
            k, r = sum(t_kit.values()), sum(t_trl.values())
            lines.append(f"| {s} | {k:.3f} | {r:.3f} | {k / r:.2f} | {tok_kit:.0f} | {tok_trl:.0f} |")
            print(lines[-1], flush=True)
    text = "\n".join(lines + ["", limits_section(LIMITS)])
    publish_report(text, out, a.force)


if __name__ == "__main__":
    from claw_lib.utils import script_main

    raise SystemExit(script_main(main))
