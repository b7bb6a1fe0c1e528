"""The update of a real model in both engines on the same batch (issue 36): seconds per update, TRL / kit, one run.

    OMP_NUM_THREADS=1 nice -n 5 python benchmarks/bench_real_step.py --model /path/to/Qwen2.5-0.5B-Instruct \\
        --out results/real_model/bench_step.md

Opt-in (it needs a model on disk); one process, one thread. The kit's loop samples one batch of the real-world
questions with the teacher user (every turn hinted) and scores it with the stages both engines share
(:func:`~claw_lib.rl.ppo.compute_signals`, :func:`~claw_lib.rl.ppo.compute_advantages`). Then the update on that
identical batch is timed in each engine, alternately, ``--reps`` times, from the same starting weights (the
per-model defaults: PEFT LoRA rank 16 on a model of the same folder loaded twice):

* kit: :func:`claw_lib.rl.ppo.ppo_update` (the policy's forward on the packed rows, the loss, backward, gradient
  clipping, AdamW);
* TRL: :class:`~claw_lib.integrations.trl.ClawGRPOTrainer`'s ``compute_loss`` on TRL's batch dict of the same rows
  (TRL's log-prob forward and loss for the surrogate strategies, the kit's loss for ``opd_kl``), backward, the same
  clipping, TRL's AdamW.

The sampling and scoring stage times of the batch are printed beside them for scale (the same code in both engines),
and the first update's loss in each engine (the same weights and batch: equal up to the dtype's rounding, TRL's
own forward padding the rows differently for the surrogate strategies; a check that both timed the same work). Ratios come from the same run; on a shared machine only they, not the seconds, carry over.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _cfg(model: str, strategy: str, batch: int, tokens: int):
    from claw_lib.config import PPOConfig, TaskConfig

    return PPOConfig(model=model, strategy=strategy, steps=1, batch_size=batch, max_new_tokens=tokens, eval_prompts=2,
                     threads=1, progress=False, device="cpu", save_every=0, task=TaskConfig(world="real", user="teacher"))


def kit_batch(cfg):
    """The kit's policy with its adapters, its optimizer, and one scored batch: (cfg, policy, opt, scorer, ro, sig, adv,
    the batch's sampling and scoring seconds)."""
    import torch

    from claw_lib.models.lm import load_causal_lm
    from claw_lib.rl import ppo
    from claw_lib.toy.envs import make_env

    policy, tok = load_causal_lm(cfg.model, dtype=cfg.dtype)
    cfg, ref = ppo.prepare_policy(policy, cfg)
    opt = torch.optim.AdamW([p for p in policy.parameters() if p.requires_grad], lr=cfg.lr, weight_decay=0.0)
    t0 = time.perf_counter()
    ro = ppo.rollout(policy, tok, make_env(cfg.task, cfg.seed, tok), cfg, 0)
    t1 = time.perf_counter()
    scorer = ppo.Scorer.for_run(cfg, policy, ref, tok)
    sig = ppo.compute_signals(ro, cfg, scorer)
    adv = ppo.compute_advantages(ro, sig, cfg)
    return cfg, policy, opt, scorer, ro, sig, adv, {"rollout_s": t1 - t0, "score_s": time.perf_counter() - t1}


def trl_inputs(trainer, ro, sig, adv) -> dict:
    """TRL's batch dict of the kit's rows (left-padded prompts, right-padded completions, the rollout's log-probs as
    pi_old), with the kit's advantages installed as the engine installs them after its own generation."""
    import torch

    pad = trainer.processing_class.pad_token_id
    P = max(len(p) for p in ro.prompt_ids)
    prompt = torch.tensor([[pad] * (P - len(p)) + p for p in ro.prompt_ids])
    out = {"prompt_ids": prompt, "prompt_mask": (torch.arange(P) >= (P - torch.tensor([len(p) for p in ro.prompt_ids]))
                                                [:, None]).long(),
           "completion_ids": ro.batch.response_ids.masked_fill(~ro.batch.response_mask, pad),
           "completion_mask": ro.batch.response_mask.long(), "old_per_token_logps": ro.logprobs}
    trainer._install(out, ro, adv)
    trainer.last_rollout, trainer.last_signals, trainer.last_advantages = ro, sig, adv
    return out


def trl_update(trainer, inputs):
    """One update as TRL's training step makes it: compute_loss, backward, clipping, the optimizer; (seconds, loss)."""
    import torch

    t = time.perf_counter()
    model = trainer.model
    model.train()
    loss = trainer.compute_loss(model, inputs)
    loss.backward()
    torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], trainer.args.max_grad_norm)
    trainer.optimizer.step()
    trainer.optimizer.zero_grad(set_to_none=True)
    return time.perf_counter() - t, float(loss.detach())


def bench(model: str, strategy: str, batch: int, tokens: int, reps: int) -> dict:
    """The update of both engines on one batch, alternately ``reps`` times: medians, ratio, the batch's size."""
    from claw_lib.integrations.trl import make_trainer
    from claw_lib.rl import ppo

    cfg, policy, opt, scorer, ro, sig, adv, times = kit_batch(_cfg(model, strategy, batch, tokens))
    trainer = make_trainer(cfg, grpo_args={"report_to": []})
    trainer.create_optimizer()
    trainer.current_gradient_accumulation_steps = 1   # what TRL's training loop sets before a step
    inputs = trl_inputs(trainer, ro, sig, adv)
    kit_s, trl_s, losses = [], [], []
    for rep in range(reps + 1):  # the first update of each engine warms up (allocations, lazy inits): not counted
        t = time.perf_counter()
        stats = ppo.ppo_update(policy, opt, ro, sig, adv, cfg, 0, teacher=scorer.teacher)
        kit_s.append(time.perf_counter() - t)
        secs, loss = trl_update(trainer, inputs)
        trl_s.append(secs)
        losses.append((stats["policy/loss"], loss))
    kit_s, trl_s = kit_s[1:], trl_s[1:]
    k, r = statistics.median(kit_s), statistics.median(trl_s)
    return {"strategy": strategy, "rows": len(ro.response_ids), "tokens": int(ro.batch.response_mask.sum()),
            "kit_s": k, "trl_s": r, "ratio": r / k, "kit_all": kit_s, "trl_all": trl_s, "first_loss": losses[0],
            "lora_rank": cfg.lora_rank, "dtype": str(next(policy.parameters()).dtype).replace("torch.", ""), **times}


def report(rows, args, seconds: float) -> str:
    lines = ["# The update of a real model in both engines, same batch (benchmarks/bench_real_step.py)", "",
             f"Model {args.model}; {args.batch_size} rows of up to {args.max_new_tokens} new tokens (real-world questions, "
             f"teacher user), LoRA rank {rows[0]['lora_rank']} (0: every weight), {rows[0]['dtype']}, one thread on a "
             f"shared CPU; medians of {args.reps} updates per engine after one warm-up update each, alternating; total "
             f"{seconds:.0f} s.", "",
             "| strategy | rows | response tokens | kit update s | TRL update s | TRL / kit | first loss kit / TRL "
             "| sampling s | scoring s |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['strategy']} | {r['rows']} | {r['tokens']} | {r['kit_s']:.2f} | {r['trl_s']:.2f} | "
                     f"{r['ratio']:.2f} | {r['first_loss'][0]:.4f} / {r['first_loss'][1]:.4f} | {r['rollout_s']:.1f} | "
                     f"{r['score_s']:.1f} |")
    lines += ["", "Every update (kit / TRL, seconds): " + "; ".join(
        f"{r['strategy']}: " + ", ".join(f"{a:.2f}/{b:.2f}" for a, b in zip(r["kit_all"], r["trl_all"])) for r in rows),
        "", "Sampling and scoring are the same code in both engines (the kit's rollout and stages here); only the "
        "update differs: the kit's forward on right-padded rows and its loss, against TRL's forward on left-padded "
        "prompts with position ids and TRL's loss (the kit's loss for opd_kl). The first losses differ only by the "
        "dtype's rounding (TRL pads the rows differently); on a shared CPU a ratio within the spread of the updates "
        "above is no difference.", ""]
    from claw_lib.utils import limits_section

    return "\n".join(lines + [limits_section(LIMITS), ""])


#: what this page does not establish (the closing section: claw_lib.utils.limits_section)
LIMITS = [
    'that one engine updates faster on a GPU or a quiet machine: medians of 5 updates per engine, 4 rows, one thread of a shared CPU',
    'anything about training quality: one update at a time, no evaluation',
]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="a real causal LM folder (opt-in: nothing runs without it)")
    ap.add_argument("--strategies", nargs="+", default=["combined", "opd_kl"])
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--reps", type=int, default=5, help="timed updates per engine, after one warm-up each")
    ap.add_argument("--out", type=Path, default=None, help="also write the report here (refused if it exists)")
    ap.add_argument("--force", action="store_true", help="overwrite --out")
    a = ap.parse_args(argv)
    import torch

    from claw_lib.utils import check_new_file, publish_report

    if a.out is not None:
        try:
            check_new_file(a.out, a.force)
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    rows = []
    for s in a.strategies:
        rows.append(bench(a.model, s, a.batch_size, a.max_new_tokens, a.reps))
        print(rows[-1], flush=True)
    publish_report(report(rows, a, time.perf_counter() - t0), a.out, a.force)
    return 0


if __name__ == "__main__":
    sys.exit(main())
