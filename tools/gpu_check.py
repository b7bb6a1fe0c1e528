"""The GPU check (issue 13): a few training steps of the kit's loop and of the TRL engine on one GPU, with the
tiny GPT and with a randomly initialised model of Qwen2.5-0.5B's shape in bf16; step time split into rollout /
scoring / update, response tokens per second and peak GPU memory, printed and written as Markdown.

    python tools/gpu_check.py                        # on the GPU machine: writes results/gpu.md (8 minutes at most)
    python tools/gpu_check.py --device cpu --small --out /tmp/gpu.md   # the same code paths on a CPU, in seconds
    python tools/gpu_check.py --model /path/to/Qwen2.5-0.5B-Instruct --out results/gpu_real.md   # a real model

Every run uses the per-model defaults (claw_lib.config.model_defaults): models above 50M parameters train LoRA
adapters (rank 16) in bfloat16 where the GPU has it, with no frozen copy of the weights; ``--lora-rank 0`` measures
full fine-tuning instead. With ``--model`` the real model replaces the random Qwen-shaped one and trains on the
real-world questions with the teacher user (claw_lib.toy.real_tasks), so its eval score means something.

Needs torch, transformers, trl and accelerate; nothing from the network (the Qwen-shaped model is built from its
config with random weights and the tiny GPT's tokenizer, so its answers are noise: only speed and memory count).
Refuses to overwrite ``--out`` unless ``--force``.
"""
from __future__ import annotations

import argparse
import json
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: Qwen2.5-0.5B's shape (its config.json); ``--small`` shrinks it for a CPU dry run
QWEN_SHAPE = dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                  num_key_value_heads=2, vocab_size=151936, max_position_embeddings=32768, rope_theta=1e6,
                  tie_word_embeddings=True, rms_norm_eps=1e-6)
SMALL_SHAPE = dict(QWEN_SHAPE, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                   num_key_value_heads=2, vocab_size=4096)


def qwen_shaped_model(folder: Path, small: bool) -> str:
    """Write a randomly initialised Qwen2 model (bf16) with the tiny GPT's tokenizer into ``folder``."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from claw_lib.models.lm import TINY_LM_DIR

    torch.manual_seed(0)
    cfg = Qwen2Config(**(SMALL_SHAPE if small else QWEN_SHAPE), torch_dtype="bfloat16")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(TINY_LM_DIR / name, folder / name)
    tok = json.loads((TINY_LM_DIR / "config.json").read_text())
    cfg.bos_token_id, cfg.eos_token_id, cfg.pad_token_id = tok.get("bos_token_id"), tok.get("eos_token_id"), tok.get("eos_token_id")
    model = Qwen2ForCausalLM(cfg).to(torch.bfloat16)
    model.save_pretrained(folder)
    return str(folder)


def summarise(history, device: str) -> dict:
    """Mean per-step seconds of each stage (steps after the first, which warms up) and tokens per second."""
    steps = [h for h in history if h.get("step", 0) >= 1]
    timed = steps[1:] or steps
    mean = lambda k: sum(h.get(k, 0.0) for h in timed) / len(timed)  # noqa: E731
    r, s, u = mean("timing/rollout_s"), mean("timing/score_s"), mean("timing/update_s")
    tokens = mean("timing/rollout_tokens")
    return {"steps": len(steps), "rollout_s": r, "score_s": s, "update_s": u, "step_s": r + s + u,
            "tokens_per_s": tokens / max(r + s + u, 1e-9), "tokens_per_step": tokens,
            "eval_score": history[-1].get("eval/score", float("nan"))}


def run_one(engine: str, model: str, strategy: str, steps: int, device: str, batch_size: int,
            lora_rank=None, real: bool = False) -> dict:
    import torch

    from claw_lib.config import PPOConfig, TaskConfig
    from claw_lib.rl.ppo import train

    cfg = PPOConfig(strategy=strategy, model=model, device=device, steps=steps, batch_size=batch_size,
                    eval_every=0, eval_prompts=8, progress=False, seed=0, lora_rank=lora_rank,
                    task=TaskConfig(world="real", user="teacher") if real else TaskConfig())
    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    t = time.perf_counter()
    if engine == "kit":
        hist = train(cfg)
    else:
        from claw_lib.integrations.trl import train_trl

        hist = train_trl(cfg, num_generations=2, grpo_args={"report_to": []})
    out = summarise(hist, device)
    peaks = [h["memory/peak_gib"] for h in hist if "memory/peak_gib" in h]
    out.update(engine=engine, strategy=strategy, total_s=time.perf_counter() - t,
               peak_gib=torch.cuda.max_memory_allocated() / 2**30 if cuda else max(peaks, default=float("nan")))
    return out


def table(rows) -> str:
    head = ("| model | engine | strategy | steps | step s | rollout s | scoring s | update s | tokens/step | tokens/s "
            "| peak GiB |")
    lines = [head, "|" + "---|" * 11]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['engine']} | {r['strategy']} | failed: {r['error']} |" + " |" * 7)
            continue
        lines.append(f"| {r['model']} | {r['engine']} | {r['strategy']} | {r['steps']} | {r['step_s']:.3f} | "
                     f"{r['rollout_s']:.3f} | {r['score_s']:.3f} | {r['update_s']:.3f} | {r['tokens_per_step']:.0f} | "
                     f"{r['tokens_per_s']:.0f} | {r['peak_gib']:.2f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda", help="cuda (default), cuda:N or cpu (a dry run of the code paths)")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "gpu.md", help="Markdown report (default results/gpu.md)")
    ap.add_argument("--force", action="store_true", help="overwrite --out")
    ap.add_argument("--steps", type=int, default=4, help="training steps per run (default 4; the first is warm-up)")
    ap.add_argument("--batch-size", type=int, default=16, help="prompts per step (default 16)")
    ap.add_argument("--small", action="store_true", help="a tiny Qwen-shaped model (for a CPU dry run)")
    ap.add_argument("--no-trl", action="store_true", help="skip the TRL engine")
    ap.add_argument("--model", default=None, help="a real causal LM folder to measure instead of the random Qwen shape")
    ap.add_argument("--lora-rank", type=int, default=None, help="LoRA rank (0: full fine-tuning; default: per model)")
    a = ap.parse_args(argv)
    from claw_lib.utils import check_new_file, publish_report

    try:
        check_new_file(a.out, a.force)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if a.steps < 1 or a.batch_size < 2:
        print("error: --steps must be >= 1 and --batch-size >= 2", file=sys.stderr)
        return 1
    from claw_lib.utils import resolve_device

    try:  # refused at once, not a report of failed runs (TL22)
        resolve_device("cpu" if a.device.startswith("cuda") else a.device)
    except ValueError as e:
        print(f"error: --device: {e}", file=sys.stderr)
        return 1
    import torch

    if a.device.startswith("cuda") and not torch.cuda.is_available():
        print("error: no CUDA device is visible to torch; run with --device cpu for a dry run", file=sys.stderr)
        return 1
    engines = ("kit",) if a.no_trl else ("kit", "trl")
    rows = []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        if a.model:
            other = {f"{Path(a.model).name} (real-world questions, teacher)": a.model}
        else:
            other = {("Qwen2.5-0.5B shape, random, bf16" if not a.small else "Qwen2-shaped, small, bf16"):
                     qwen_shaped_model(Path(tmp), a.small)}
        models = {"tiny GPT (1.6M, fp32)": "tiny", **other}
        for label, model in models.items():
            for engine in engines:
                for strategy in ("binary_rl", "combined"):
                    print(f"[{time.perf_counter() - t0:6.0f} s] {label} / {engine} / {strategy}", flush=True)
                    try:
                        r = run_one(engine, model, strategy, a.steps, a.device, a.batch_size,
                                    None if model == "tiny" else a.lora_rank, real=model == a.model)
                    except Exception as e:  # one failing run must not hide the others' numbers
                        r = {"engine": engine, "strategy": strategy, "error": f"{type(e).__name__}: {str(e)[:160]}"}
                    r["model"] = label
                    rows.append(r)
                    print(table([r]).splitlines()[-1], flush=True)
    dev = torch.cuda.get_device_name(0) if a.device.startswith("cuda") else platform.processor() or "CPU"
    import transformers

    text = "\n".join([
        "# GPU check (tools/gpu_check.py)", "",
        f"Device: {dev}; torch {torch.__version__}, transformers {transformers.__version__}; "
        f"{a.steps} steps of {a.batch_size} prompts per run, means over the steps after the first; "
        f"total {time.perf_counter() - t0:.0f} s.", "",
        table(rows), "",
        "step s = rollout (sampling, log-probs, the user's replies) + scoring (judge, signals, teacher pass) + update;",
        "tokens = sampled response tokens; peak GiB = torch.cuda.max_memory_allocated during the run (CPU: peak RSS of",
        "the process so far); per-model defaults (models above 50M parameters: LoRA rank 16, bf16 where supported).", ""])
    publish_report(text, a.out, a.force)
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
