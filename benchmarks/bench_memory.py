"""Peak memory of a training step against the model's own weights plus activations (issue 25; docs/real_model.md).

    python benchmarks/bench_memory.py --model /path/to/Qwen2.5-0.5B-Instruct --mode bare  [--lora-rank 16]
    python benchmarks/bench_memory.py --model /path/to/Qwen2.5-0.5B-Instruct --mode kit   [--lora-rank 16]

Run each mode in its own process (peak RSS is per process, ``ru_maxrss``; on a GPU
``torch.cuda.max_memory_allocated``). ``bare``: load the model (the kit's loader and dtype), add the same adapters,
and run one forward + backward of Hugging Face's own next-token loss (``labels=``) on a batch of the shape a step
trains on (``--batch-size`` rows of ``--tokens`` tokens): the model's weights plus the activations of that pass,
nothing else (no optimizer, no teacher, no sampling). ``kit``: one step of ``claw_lib.rl.run.train`` (combined, teacher user, real-world questions) with the
same model, batch and adapters, plus its evaluation. The ratio kit / bare is the overhead of the kit's loop (the
issue's target: at most 1.5). Prints one Markdown line per run.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def bare(model: str, device: str, batch: int, tokens: int, rank: int) -> dict:
    import torch

    from claw_lib.models.lm import load_causal_lm, peak_memory_gib
    from claw_lib.models.lora import add_lora, count_parameters

    t = time.perf_counter()
    policy, tok = load_causal_lm(model, device=device, dtype="auto")
    n = count_parameters(policy)
    weights = sum(p.numel() * p.element_size() for p in policy.parameters()) / 2 ** 30
    after_load = peak_memory_gib(device)
    if rank:
        add_lora(policy, rank)
    else:
        policy.train()
    ids = torch.randint(0, len(tok), (batch, tokens), device=device)
    policy(input_ids=ids, labels=ids).loss.backward()   # the plainest training pass: next-token loss, backward
    return {"mode": "bare", "params_M": n / 1e6, "weights_gib": weights, "after_load_gib": after_load,
            "peak_gib": peak_memory_gib(device), "seconds": time.perf_counter() - t}


def kit(model: str, device: str, batch: int, tokens: int, rank: int) -> dict:
    from claw_lib.config import PPOConfig, TaskConfig
    from claw_lib.rl.run import train

    t = time.perf_counter()
    cfg = PPOConfig(model=model, device=device, strategy="combined", steps=1, batch_size=batch, max_new_tokens=tokens,
                    eval_prompts=8, lora_rank=rank, threads=1, progress=False, task=TaskConfig(world="real", user="teacher"))
    hist = train(cfg)
    return {"mode": "kit", "peak_gib": hist[-1]["memory/peak_gib"], "seconds": time.perf_counter() - t,
            "eval": [h["eval/score"] for h in hist if "eval/score" in h]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--mode", choices=("bare", "kit"), required=True)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--tokens", type=int, default=96, help="bare: tokens per row (a prompt of ~40 + 48 new tokens)")
    ap.add_argument("--new-tokens", type=int, default=48, help="kit: max_new_tokens")
    ap.add_argument("--lora-rank", type=int, default=16)
    a = ap.parse_args(argv)
    for flag, v in (("--batch-size", a.batch_size), ("--tokens", a.tokens), ("--new-tokens", a.new_tokens)):
        if not 1 <= v <= 4096:  # BM08: one line, as the kit's own bound (config.LIMITS)
            raise SystemExit(f"error: {flag} must be in [1, 4096], got {v}")
    if not 0 <= a.lora_rank <= 4096:
        raise SystemExit(f"error: --lora-rank must be in [0, 4096], got {a.lora_rank}")
    import torch

    torch.set_num_threads(1)
    r = (bare(a.model, a.device, a.batch_size, a.tokens, a.lora_rank) if a.mode == "bare"
         else kit(a.model, a.device, a.batch_size, a.new_tokens, a.lora_rank))
    print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()}))
    return 0


if __name__ == "__main__":
    from claw_lib.utils import script_main

    sys.exit(script_main(main))
