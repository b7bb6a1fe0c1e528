"""Alignment rewards for many pairs: one pair at a time (the encoder runs every text alone, all its
layers) against the batched path (every text embedded first in padded, length-sorted batches that
stop at the layer used: ``Encoder.prefetch``), in one run; where the time goes; and the marginal cost
of a short pair. Writes a Markdown table.

    python benchmarks/bench_rewards.py [--pairs 200] [--threads 2] [--out results/bench_rewards.md]

Then, from a terminal as a user runs it (start-up included, median of 3): ``claw rewards --input`` on the same
pairs against ``claw rewards`` on one pair, and ``claw align`` on one pair against importing torch and
transformers alone.

Ratios within one run are the claim; absolute times depend on the machine and its load.
"""
from __future__ import annotations

import argparse
import platform
import random
import time
from pathlib import Path


def pairs(n: int, seed: int = 0):
    """Short zh/en (output, correction) pairs from the fact world, every correction used ~twice."""
    from claw_lib.toy.users import FactEnv

    rng = random.Random(seed)
    env = FactEnv(user="correcting", seed=seed, misconception_share=1.0)
    out = []
    for t in env.sample(n):
        wrong = env.world.wrong_value(t.fact) or env.world.distractor(t.fact, rng)
        out.append((t.fact.answer(wrong), env.step(t, t.fact.answer(wrong)).next_state))
    return out


def one_at_a_time(enc, ps, cfg):
    """Each text through the whole encoder alone (the kit's path before batching)."""
    import numpy as np
    import torch

    from claw_lib.alignment.dp import align
    from claw_lib.alignment.costs import cost_matrix
    from claw_lib.text.corrections import clean_correction
    from claw_lib.text.tokens import tokenize, word_subtoken_overlaps

    def embed(text, words):
        subs, pieces, windows = enc._windows(text)
        if not words or not subs:
            return np.zeros((len(words), enc.model.config.hidden_size), np.float32)
        x = torch.tensor([enc._prefix + windows[0] + enc._suffix])
        with torch.no_grad():
            h = enc.model(input_ids=x, attention_mask=torch.ones_like(x), output_hidden_states=True).hidden_states[enc.layer][0]
        H = h[len(enc._prefix):h.shape[0] - len(enc._suffix)].numpy()
        ov = word_subtoken_overlaps(words, subs)
        return np.stack([H[o].mean(0) if len(o) else H[0] for o in ov])

    for o, c in ps:
        c = clean_correction(c).text
        a, b = tokenize(o), tokenize(c)
        C = cost_matrix(embed(o, a), embed(c, b), a, b, cfg.lexical_weight)
        align(C, cfg.insert_cost, cfg.delete_cost, cfg.match_threshold)


def _seconds(cmd, runs: int = 3) -> float:
    """Median wall time of a command (start-up included); ``cmd`` may be a function of the run's index."""
    import statistics
    import subprocess

    times = []
    for k in range(runs):
        t = time.perf_counter()
        subprocess.run(cmd(k) if callable(cmd) else cmd, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def cli_lines(ps) -> list:
    """The terminal costs: batch file vs one pair, and claw align's start-up beyond the imports."""
    import json
    import shutil
    import sys
    import tempfile

    claw = shutil.which("claw") or str(Path(sys.executable).parent / "claw")
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "pairs.jsonl"
        f.write_text("".join(json.dumps({"output": o, "correction": c}, ensure_ascii=False) + "\n" for o, c in ps),
                     encoding="utf-8")
        batch = _seconds(lambda k: [claw, "rewards", "--input", str(f), "--out", str(Path(tmp) / f"out{k}.jsonl")])
        one = _seconds([claw, "rewards", *ps[0]])
        align = _seconds([claw, "align", *ps[0]])
        imports = _seconds([sys.executable, "-c", "import torch, transformers"])
    return ["", "From a terminal, start-up included (median of 3 runs):", "",
            "| command | seconds | ratio |", "|---|---|---|",
            f"| `claw rewards OUTPUT CORRECTION` (one pair) | {one:.2f} | 1.0x |",
            f"| `claw rewards --input` ({len(ps)} pairs) | {batch:.2f} | {batch / one:.2f}x |",
            f"| `python -c 'import torch, transformers'` | {imports:.2f} | |",
            f"| `claw align OUTPUT CORRECTION` (one pair) | {align:.2f} | {align - imports:.2f} s beyond the imports |"]


#: what this page does not establish (the closing section: claw_lib.utils.limits_section)
LIMITS = [
    'speed on a GPU or on longer texts: 200 short zh/en pairs on a CPU, one run (results/bench_lengths.md has long texts)',
    "the rewards' quality: this times them; results/probe_sets.md measures what they find",
]


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=200)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: the free cores)")
    ap.add_argument("--no-cli", action="store_true", help="skip the terminal measurements")
    from claw_lib.utils import add_report_args, limits_section, publish_report, report_path, set_threads

    add_report_args(ap, "the Markdown table")
    a = ap.parse_args(argv)
    if not 1 <= a.pairs <= 100_000:  # BM07
        raise SystemExit(f"error: --pairs must be in [1, 100000], got {a.pairs}")
    out = report_path(a)

    from claw_lib.alignment.encoders import load_encoder
    from claw_lib.config import RewardConfig
    from claw_lib.signals.rewards import token_rewards
    from claw_lib.text.corrections import clean_correction

    threads = set_threads(a.threads)
    enc = load_encoder("e5")
    cfg = RewardConfig()
    ps = pairs(a.pairs)
    token_rewards(*ps[0], "binary", cfg, encoder=enc)  # warm-up (jieba, caches)

    t = time.perf_counter()
    one_at_a_time(enc, ps, cfg.align)
    t_one = time.perf_counter() - t

    enc._cache.clear()
    t = time.perf_counter()
    texts = [o for o, _ in ps] + [clean_correction(c).text for _, c in ps]
    enc.prefetch(texts)
    t_enc = time.perf_counter() - t
    for o, c in ps:
        token_rewards(o, c, "binary", cfg, encoder=enc)
    t_batch = time.perf_counter() - t

    enc._cache.clear()
    half = ps[: len(ps) // 2]
    t = time.perf_counter()
    enc.prefetch([o for o, _ in half] + [clean_correction(c).text for _, c in half])
    for o, c in half:
        token_rewards(o, c, "binary", cfg, encoder=enc)
    t_half = time.perf_counter() - t
    marginal = (len(ps) - len(half)) / max(t_batch - t_half, 1e-9)

    lines = [f"Alignment rewards (binary, e5 layer {enc.layer}) on {len(ps)} short zh/en pairs, {threads} torch "
             f"thread(s), {platform.processor() or platform.machine()}; one run.", "",
             "| path | seconds | pairs/s | ratio |", "|---|---|---|---|",
             f"| one at a time, whole encoder | {t_one:.2f} | {len(ps) / t_one:.1f} | 1.0x |",
             f"| batched (prefetch) + rewards | {t_batch:.2f} | {len(ps) / t_batch:.1f} | {t_one / t_batch:.1f}x |",
             "", f"Batched path split: encoder {100 * t_enc / t_batch:.0f} %, tokens + cleaning + cost + DP + rewards "
                 f"{100 * (t_batch - t_enc) / t_batch:.0f} %. Marginal rate (second half of the pairs): {marginal:.0f} pairs/s."]
    if not a.no_cli:
        lines += cli_lines(ps)
    text = "\n".join(lines + ["", limits_section(LIMITS)])
    publish_report(text, out, a.force)


if __name__ == "__main__":
    from claw_lib.utils import script_main

    raise SystemExit(script_main(main))
