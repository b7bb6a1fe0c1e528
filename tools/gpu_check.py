"""The GPU check (issue 13) and the GPU smoke (issue 36): training steps of the kit's loop and of the TRL engine on one
GPU; step time split into rollout / scoring / update, response tokens per second and peak GPU memory, printed and
written as Markdown.

* the check: a few steps with the tiny GPT and with a randomly initialised model of Qwen2.5-0.5B's shape in bf16;
* ``--smoke``: at most 15 steps of a real 0.5B instruct model (``--model``) in bf16, both engines, on the real-world
  questions with the persona whose rule score moves first (``--user``, default the student; ``--metric``, default
  its ``eval/score`` on the held-out questions; ``--strategy``, default ``opd_kl``), with an asserted threshold (``--min-gain``: the score rises by at least that much from step 0
  in each engine; exit 1 otherwise); sized to do everything in one run of under 10 minutes. **It has not run on a GPU
  yet** (no GPU was lent while it was written): its code paths run on the CPU (tests/test_gpu_check.py) and its
  threshold is a guess from CPU runs until a GPU run writes results/gpu.md.

    python tools/gpu_check.py --smoke --model /path/to/Qwen2.5-0.5B-Instruct   # on the GPU machine: results/gpu.md
    python tools/gpu_check.py                        # the check: writes results/gpu.md (8 minutes at most)
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
import os
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
    from claw_lib.config import PPOConfig, TaskConfig

    cfg = PPOConfig(strategy=strategy, model=model, device=device, steps=steps, batch_size=batch_size,
                    eval_every=0, eval_prompts=8, progress=False, seed=0, lora_rank=lora_rank,
                    task=TaskConfig(world="real", user="teacher") if real else TaskConfig())
    return run_config(engine, cfg)


def run_config(engine: str, cfg) -> dict:
    """Train ``cfg`` (a PPOConfig) with one engine, no files; the :func:`summarise` of its history, with the
    history itself, the engine, strategy, total seconds and the peak memory (GPU: max_memory_allocated)."""
    import torch

    from claw_lib.rl.run import train

    strategy, device = cfg.strategy, cfg.device
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
    out.update(engine=engine, strategy=strategy, total_s=time.perf_counter() - t, history=hist,
               peak_gib=torch.cuda.max_memory_allocated() / 2**30 if cuda else max(peaks, default=float("nan")))
    return out


def md_table(head, rows, lead, cells) -> str:
    """A Markdown table of runs: ``head`` (the column names), one line per run: ``lead(r)`` (the cells that name it),
    then ``cells(r)``, or "failed: ..." for a run that raised."""
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        named = lead(r)
        rest = [f"failed: {r['error']}"] + [""] * (len(head) - len(named) - 1) if "error" in r else cells(r)
        lines.append("| " + " | ".join(named + rest) + " |")
    return "\n".join(lines)


def table(rows) -> str:
    head = ("model", "engine", "strategy", "steps", "step s", "rollout s", "scoring s", "update s", "tokens/step",
            "tokens/s", "peak GiB")
    return md_table(head, rows, lambda r: [r["model"], r["engine"], r["strategy"]], lambda r: [
        str(r["steps"]), f"{r['step_s']:.3f}", f"{r['rollout_s']:.3f}", f"{r['score_s']:.3f}", f"{r['update_s']:.3f}",
        f"{r['tokens_per_step']:.0f}", f"{r['tokens_per_s']:.0f}", f"{r['peak_gib']:.2f}"])


# --------------------------------------------------------------------------- the smoke run (--smoke)
#: ``--smoke``'s defaults: at most 15 steps of a 0.5B model on what moved fastest on the CPU: OPD as distillation
#: (opd_kl) with the student persona, whose rule score (correct, no restated subject, no full stop) went from 0.025
#: to 0.45-0.55 in 6 steps of 4 samples at lr 5e-5-1e-4 (helper pilots of issue 36, dev split, one seed each); LoRA
#: at 5e-5, 32 samples a step, the 32 held-out questions evaluated every 5 steps. A guess a GPU run must confirm
SMOKE = dict(steps=15, batch_size=32, lr=5e-5, user="student", strategy="opd_kl", metric="eval/score",
             min_gain=0.2, eval_size=32, eval_every=5)
SMOKE_MAX_STEPS = 15


def smoke_config(a):
    """The PPOConfig of one smoke run: the real-world questions with persona ``a.user`` (evaluated on each held-out
    question once), bf16 on a GPU, no files."""
    from claw_lib.config import PPOConfig, TaskConfig

    cuda = a.device.startswith("cuda")
    return PPOConfig(strategy=a.strategy, model=a.model, device=a.device, steps=a.steps, batch_size=a.batch_size,
                     lr=a.lr, dtype="bfloat16" if cuda else "auto", eval_every=a.eval_every, eval_prompts=a.eval_size,
                     progress=False, seed=0, save_every=0, threads=a.threads,
                     task=TaskConfig(world="real", user=a.user, eval_split="heldout"))


def smoke_verdict(r: dict, metric: str, min_gain: float):
    """(first, last, gain, passed): ``metric`` at step 0 (before any update) and at the last evaluation, and whether
    it rose by at least ``min_gain``; a run without two values of it fails."""
    vals = [h[metric] for h in r.get("history", []) if metric in h]
    if len(vals) < 2:
        return float("nan"), float("nan"), float("nan"), False
    return vals[0], vals[-1], vals[-1] - vals[0], vals[-1] - vals[0] >= min_gain


def smoke_table(rows, metric: str, min_gain: float) -> str:
    head = ("engine", f"{metric} step 0", "last", "gain", f"gain >= {min_gain:g}", "step s", "rollout s", "scoring s",
            "update s", "tokens/s", "peak GiB", "run s")

    def cells(r):
        first, last, gain, ok = smoke_verdict(r, metric, min_gain)
        return [f"{first:.3f}", f"{last:.3f}", f"{gain:+.3f}", "PASS" if ok else "FAIL", f"{r['step_s']:.2f}",
                f"{r['rollout_s']:.2f}", f"{r['score_s']:.2f}", f"{r['update_s']:.2f}", f"{r['tokens_per_s']:.0f}",
                f"{r['peak_gib']:.2f}", f"{r['total_s']:.0f}"]
    return md_table(head, rows, lambda r: [r["engine"]], cells)


def run_smoke(a, engines) -> list:
    """Both engines on the smoke's config, one after the other; a failing run is a row with its error."""
    rows, t0 = [], time.perf_counter()
    for engine in engines:
        print(f"[{time.perf_counter() - t0:6.0f} s] smoke / {engine}", flush=True)
        try:
            r = run_config(engine, smoke_config(a))
        except Exception as e:  # one failing engine must not hide the other's numbers
            r = {"engine": engine, "error": f"{type(e).__name__}: {str(e)[:160]}"}
        rows.append(r)
        print(smoke_table([r], a.metric, a.min_gain).splitlines()[-1], flush=True)
    return rows


def smoke_report(a, rows, device: str, seconds: float) -> str:
    import torch
    import transformers

    where = ("a dry run on the CPU: its numbers say nothing about a GPU" if not a.device.startswith("cuda") else
             "the first smoke on this GPU")
    return "\n".join([
        "# GPU smoke (tools/gpu_check.py --smoke)", "",
        f"Device: {device} ({where}); torch {torch.__version__}, transformers {transformers.__version__}. "
        f"Model {a.model}, {a.steps} steps of {a.batch_size} samples, strategy {a.strategy}, lr {a.lr:g}, real-world "
        f"questions with the {a.user} user, up to {a.eval_size} held-out questions evaluated every {a.eval_every} steps; "
        f"total {seconds:.0f} s{' (over the 10 minutes the smoke is sized for)' if seconds > 600 else ''}.", "",
        smoke_table(rows, a.metric, a.min_gain), "",
        f"Asserted: {a.metric} (the {a.user} persona's rule score of greedy answers) rises by at least {a.min_gain:g} "
        "from step 0 to the last evaluation in each engine (exit code 1 otherwise). The threshold and the defaults were "
        "chosen from short CPU runs of the same model (opd_kl with the student user moved most there); until this "
        "table comes from a GPU they are a guess, not a measured result. step s = rollout + scoring + update (means over the steps after the first); "
        "tokens/s = sampled response tokens per second of a step; peak GiB = torch.cuda.max_memory_allocated of the "
        "run (CPU: peak RSS).", ""])


def _args(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda", help="cuda (default), cuda:N or cpu (a dry run of the code paths)")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "gpu.md", help="Markdown report (default results/gpu.md)")
    ap.add_argument("--force", action="store_true", help="overwrite --out")
    ap.add_argument("--steps", type=int, default=None, help="training steps per run (default 4, --smoke 15 at most)")
    ap.add_argument("--batch-size", type=int, default=None, help="samples per step (default 16, --smoke 32)")
    ap.add_argument("--small", action="store_true", help="a tiny Qwen-shaped model (for a CPU dry run)")
    ap.add_argument("--no-trl", action="store_true", help="skip the TRL engine")
    ap.add_argument("--model", default=None, help="a real causal LM folder (--smoke: required, or $CLAW_REAL_MODEL)")
    ap.add_argument("--lora-rank", type=int, default=None, help="LoRA rank (0: full fine-tuning; default: per model)")
    g = ap.add_argument_group("--smoke: a short training run with an asserted threshold, both engines")
    g.add_argument("--smoke", action="store_true", help="at most 15 steps of --model in bf16, both engines, asserted")
    g.add_argument("--user", default=SMOKE["user"], choices=("student", "teacher", "correcting"),
                   help=f"the persona whose rule score is measured (default {SMOKE['user']})")
    g.add_argument("--strategy", default=SMOKE["strategy"], help=f"default {SMOKE['strategy']}")
    g.add_argument("--lr", type=float, default=SMOKE["lr"], help=f"default {SMOKE['lr']:g}")
    g.add_argument("--metric", default=SMOKE["metric"], help="the metrics column asserted (default eval/score)")
    g.add_argument("--min-gain", type=float, default=SMOKE["min_gain"],
                   help=f"the least rise of --metric from step 0 to the end (default {SMOKE['min_gain']:g})")
    g.add_argument("--eval-size", type=int, default=SMOKE["eval_size"], help=f"default {SMOKE['eval_size']}")
    g.add_argument("--eval-every", type=int, default=SMOKE["eval_every"], help=f"default {SMOKE['eval_every']}")
    g.add_argument("--threads", type=int, default=0, help="CPU threads (0: the free cores)")
    a = ap.parse_args(argv)
    mode = SMOKE if a.smoke else dict(steps=4, batch_size=16)
    a.steps = a.steps if a.steps is not None else mode["steps"]
    a.batch_size = a.batch_size if a.batch_size is not None else mode["batch_size"]
    if a.smoke and not a.model:
        a.model = os.environ.get("CLAW_REAL_MODEL")
    return a


def _refusal(a):
    """The first thing wrong with the arguments (one line), or None."""
    from claw_lib.utils import check_new_file, resolve_device

    try:
        check_new_file(a.out, a.force)
    except ValueError as e:
        return str(e)
    try:
        resolve_device("cpu" if a.device.startswith("cuda") else a.device)  # refused at once (TL22)
    except ValueError as e:
        return f"--device: {e}"
    if a.steps < 1 or a.batch_size < 2:
        return "--steps must be >= 1 and --batch-size >= 2"
    if a.smoke and (not a.model or a.steps > SMOKE_MAX_STEPS):
        return (f"--smoke trains at most {SMOKE_MAX_STEPS} steps" if a.model else
                "--smoke needs --model (a real instruct model's folder) or CLAW_REAL_MODEL")
    if a.smoke:
        from claw_lib.config import validate

        try:
            validate(smoke_config(a))
        except (ValueError, TypeError) as e:
            return str(e)
    import torch

    if a.device.startswith("cuda") and not torch.cuda.is_available():
        return "no CUDA device is visible to torch; run with --device cpu for a dry run"
    return None


def main(argv=None) -> int:
    a = _args(argv)
    why = _refusal(a)
    if why:
        print(f"error: {why}", file=sys.stderr)
        return 1
    import torch

    from claw_lib.utils import publish_report

    engines = ("kit",) if a.no_trl else ("kit", "trl")
    dev = torch.cuda.get_device_name(0) if a.device.startswith("cuda") else platform.processor() or "CPU"
    t0 = time.perf_counter()
    if a.smoke:
        rows = run_smoke(a, engines)
        publish_report(smoke_report(a, rows, dev, time.perf_counter() - t0), a.out, a.force)
        return 0 if all("error" not in r and smoke_verdict(r, a.metric, a.min_gain)[3] for r in rows) else 1
    rows = run_check(a, engines)
    publish_report(check_report(a, rows, dev, time.perf_counter() - t0), a.out, a.force)
    return 1 if any("error" in r for r in rows) else 0


def run_check(a, engines) -> list:
    """The check: both strategies x engines on the tiny GPT and the Qwen-shaped (or real) model."""
    rows, t0 = [], time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        if a.model:
            other = {f"{Path(a.model).name} (real-world questions, teacher)": a.model}
        else:
            other = {("Qwen2.5-0.5B shape, random, bf16" if not a.small else "Qwen2-shaped, small, bf16"):
                     qwen_shaped_model(Path(tmp), a.small)}
        for label, model in {"tiny GPT (1.6M, fp32)": "tiny", **other}.items():
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
    return rows


def check_report(a, rows, device: str, seconds: float) -> str:
    import torch
    import transformers

    return "\n".join([
        "# GPU check (tools/gpu_check.py)", "",
        f"Device: {device}; torch {torch.__version__}, transformers {transformers.__version__}; "
        f"{a.steps} steps of {a.batch_size} prompts per run, means over the steps after the first; "
        f"total {seconds:.0f} s.", "",
        table(rows), "",
        "step s = rollout (sampling, log-probs, the user's replies) + scoring (judge, signals, teacher pass) + update;",
        "tokens = sampled response tokens; peak GiB = torch.cuda.max_memory_allocated during the run (CPU: peak RSS of",
        "the process so far); per-model defaults (models above 50M parameters: LoRA rank 16, bf16 where supported).", ""])


if __name__ == "__main__":
    sys.exit(main())
