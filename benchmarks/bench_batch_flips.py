"""How often batched arithmetic changes a real model's greedy answer: each prompt decoded alone and in one batch.

    python benchmarks/bench_batch_flips.py --model /path/to/Qwen2.5-0.5B-Instruct [--tokens 64] [--formats full int8]
        [--out results/serve/batch_flips_qwen05.md] [--json results/serve/batch_flips_qwen05.json]

Measured, not a test. The serving engine's runner (:class:`claw_lib.serve.runner.ModelRunner`) decodes each prompt
greedily for ``--tokens`` tokens alone (a batch of one), then all prompts together in one batch (left-padded, as the
server batches concurrent sessions). On the tiny GPT the two are the same token for token
(``tests/serve/test_batcher.py``); on a real model the batch changes the shapes of the matrix products, so a
near-tie can flip. Reported per serving copy (``--formats``): answers identical, and for the others the position of
the first differing token and the gap between the two top logits there when decoded alone (a flip needs a near tie).
Prompts: the six GSM8K-shaped problems of ``data/gsm8k/sample.jsonl`` and the real-world task set's first capital
questions (``--prompts``), each through the model's chat template.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from claw_lib.models.lm import load_causal_lm  # noqa: E402
from claw_lib.serve.runner import ModelRunner  # noqa: E402
from claw_lib.serve.serving_copy import serving_copy  # noqa: E402
from claw_lib.toy.real_tasks import real_facts  # noqa: E402
from claw_lib.utils import add_report_args, atomic_write, check_new_file, limits_section, publish_report, \
    report_path, script_main, set_threads  # noqa: E402

LIMITS = ["Other prompts, lengths or batch compositions: one batch of these prompts, every row joining at once.",
          "Sampled answers: greedy only (a sampled answer draws from the same logits, so a flip changes it the same "
          "way).",
          "A GPU: its kernels choose other reduction orders; measured here on a CPU, one run."]


def prompts(tok, n: int) -> list:
    """Token ids of ``n`` chat prompts (the GSM8K-shaped sample problems, then capital questions; the tiny GPT,
    which has no chat template: the questions as they are)."""
    rows = [json.loads(x)["question"] for x in (ROOT / "data" / "gsm8k" / "sample.jsonl").read_text(
        encoding="utf-8").splitlines() if x.strip()]
    rows += [f.text for f in real_facts() if f.kind == "capital" and f.lang == "en"]
    if getattr(tok, "chat_template", None) is None:  # the tiny GPT: the plain question
        return [tok(q)["input_ids"] for q in rows[:n]]
    return [list(tok.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True,
                                         tokenize=True, return_dict=True)["input_ids"]) for q in rows[:n]]


def greedy(model, batch: list, tokens: int) -> tuple:
    """Greedy decoding of the prompts in ``batch`` together: (token ids per row, top-2 logit gap per row and step)."""
    runner = ModelRunner(model)
    runner.join(batch)  # every prompt but its last token; the first step reads the last tokens
    logits = runner.step([p[-1] for p in batch])
    out, gaps = [[] for _ in batch], [[] for _ in batch]
    for _ in range(tokens):
        top = logits.float().topk(2, dim=-1)
        for b in range(len(batch)):
            out[b].append(int(top.indices[b, 0]))
            gaps[b].append(float(top.values[b, 0] - top.values[b, 1]))
        logits = runner.step([row[-1] for row in out])
    return out, gaps


def compare(model, ids: list, tokens: int) -> dict:
    """Each prompt alone vs all in one batch: per prompt, the first differing position (None: identical) and the
    alone-decoded top-2 gap there."""
    with torch.inference_mode():
        alone = [greedy(model, [p], tokens) for p in ids]
        together, _ = greedy(model, ids, tokens)
    rows = []
    for k, (a, gaps) in enumerate(alone):
        first = next((i for i, (x, y) in enumerate(zip(a[0], together[k])) if x != y), None)
        rows.append({"prompt": k, "first_diff": first, "gap_there": None if first is None else round(gaps[0][first], 4),
                     "min_gap_before": round(min(gaps[0][:first or tokens]), 4)})
    return {"rows": rows, "identical": sum(r["first_diff"] is None for r in rows), "n": len(rows)}


def page(res: dict, a) -> str:
    lines = ["# Batched arithmetic and a real model's greedy answers", "",
             f"Model `{Path(a.model).name}`, {res['n']} prompts, {a.tokens} greedy tokens each, decoded alone and in "
             "one batch by the serving engine's runner. Written by `benchmarks/bench_batch_flips.py`; see its "
             "docstring.", "", "| serving copy | answers identical | first differing token (its top-2 logit gap "
             "alone) |", "|---|---|---|"]
    for fmt, r in res["formats"].items():
        diffs = ", ".join(f"#{x['first_diff']} ({x['gap_there']})" for x in r["rows"] if x["first_diff"] is not None)
        lines.append(f"| {fmt} | {r['identical']} of {r['n']} | {diffs or '-'} |")
    return "\n".join(lines + ["", limits_section(LIMITS), ""])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="a local Hugging Face folder")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--formats", nargs="+", default=["full", "int8"], choices=["full", "bf16", "int8"])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", type=Path, default=None)
    add_report_args(ap, "the Markdown report")
    a = ap.parse_args(argv)
    if a.tokens < 1 or a.prompts < 2:
        raise ValueError("--tokens must be >= 1 and --prompts >= 2 (a batch)")
    out = report_path(a)
    if a.json is not None:
        check_new_file(a.json, a.force)
    set_threads(a.threads)
    model, tok = load_causal_lm(a.model)
    ids = prompts(tok, a.prompts)
    res = {"model": a.model, "tokens": a.tokens, "n": len(ids), "formats": {}}
    for fmt in a.formats:
        res["formats"][fmt] = compare(serving_copy(model, fmt) if fmt != "full" else model, ids, a.tokens)
        print(fmt, res["formats"][fmt]["identical"], "of", len(ids), "identical", flush=True)
    if a.json is not None:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        with atomic_write(a.json, replace=a.force) as f:
            json.dump(res, f, indent=1)
    publish_report(page(res, a), out, a.force)
    return 0


if __name__ == "__main__":
    raise SystemExit(script_main(main))
