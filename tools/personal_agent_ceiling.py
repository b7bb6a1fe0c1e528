"""The personal-agent ceiling: for every homework persona, the acceptance and correctness of the first
reply on GSM8K problems, of the untrained model, of the model told the preference in a system prompt, and of OPD's
hinted teacher exactly as OPD scores it (claw_lib.toy.homework_eval), greedy and sampled; with ``--landing``, where
OPD's negative advantage lands on the untrained replies (the first token, style tokens, numbers, other), raw and with
the drift controls.

    python tools/personal_agent_ceiling.py --gsm8k test.jsonl --model /path/to/Qwen2.5-0.5B-Instruct --out ceiling.json
    python tools/personal_agent_ceiling.py --gsm8k test.jsonl --limit 2 --max-new-tokens 8   # the tiny GPT (default)

``--gsm8k``: GSM8K's test.jsonl (or upstream's GSM8K.json; default ``$CLAW_GSM8K``; the kit does not ship it,
data/gsm8k/CARD.md); ``--split``: which problems (default ``dev``: the problems for choosing; never ``heldout``
unless asked). Prints a Markdown table; ``--out`` writes the counts and every reply as JSON (refused if it exists,
unless ``--force``). The tiny GPT's 160 positions hold few GSM8K requests: those are counted as too long, not run.
On a 2-core CPU a 0.5B model in fp32 takes 30-60 s a greedy answer of 320 tokens (shared notes): 5 personas x 2
languages x 3 conditions x 24 problems is hours; ``--personas``, ``--langs``, ``--limit`` cut it.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from claw_lib.config import CEILING_CONDITIONS, DECODINGS, GSM8K_SPLITS, HOMEWORK_PERSONAS  # noqa: E402
from claw_lib.toy.gsm8k import SPLIT_FILE, load_definition, load_split  # noqa: E402
from claw_lib.toy.homework import HOMEWORK_LANGS  # noqa: E402
from claw_lib.utils import atomic_write, check_out_file, script_main, seed_everything  # noqa: E402


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="tiny", help="the kit's tiny GPT (default) or a local Hugging Face folder")
    ap.add_argument("--gsm8k", default=None, help="GSM8K's test.jsonl (default: $CLAW_GSM8K)")
    ap.add_argument("--split", default="dev", choices=GSM8K_SPLITS, help="which problems (default dev)")
    ap.add_argument("--definition", default=str(SPLIT_FILE), help="the split definition (default the kit's)")
    ap.add_argument("--personas", nargs="+", default=list(HOMEWORK_PERSONAS), choices=HOMEWORK_PERSONAS)
    ap.add_argument("--langs", nargs="+", default=list(HOMEWORK_LANGS), choices=HOMEWORK_LANGS)
    ap.add_argument("--decodings", nargs="+", default=list(DECODINGS), choices=DECODINGS)
    ap.add_argument("--limit", type=int, default=None, help="the first N problems of the split only")
    ap.add_argument("--max-new-tokens", type=int, default=320, help="longest reply, in tokens (default 320)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--serving-format", default="full", choices=("full", "bf16", "int8"),
                    help="decode from this copy of the weights, as claw serve --serving-format does (default full; "
                         "int8: several times faster on a CPU); OPD's landing is always read in full precision")
    ap.add_argument("--landing", action="store_true",
                    help="also where OPD's advantage lands on the greedy untrained replies that drew a hint")
    ap.add_argument("--out", default=None, help="write counts and replies as JSON here")
    ap.add_argument("--force", action="store_true", help="replace --out")
    a = ap.parse_args(argv)
    if a.limit is not None and a.limit < 1:
        raise ValueError(f"--limit must be at least 1, got {a.limit}")
    if a.max_new_tokens < 1:
        raise ValueError(f"--max-new-tokens must be at least 1, got {a.max_new_tokens}")
    if a.landing and "greedy" not in a.decodings:
        raise ValueError("--landing reads the greedy replies: keep greedy in --decodings")
    return a


def table(results) -> str:
    """Markdown: acceptance and correctness (counts of the replies run; how many prompts were too long to run and how
    many replies reached the token cap) per persona, language, decoding and condition."""
    head = "| persona | lang | decoding | " + " | ".join(f"{c} accepted | {c} correct" for c in CEILING_CONDITIONS)
    lines = [head + " |", "|" + " --- |" * (3 + 2 * len(CEILING_CONDITIONS))]
    for r in results:
        for d in (d for d in DECODINGS if d in r):
            cells = []
            for c in CEILING_CONDITIONS:
                s = r[d][c]
                ran = s["n"] - s["too_long"]
                notes = [f"{s[k]} {w}" for k, w in (("too_long", "too long"), ("cut", "cut")) if s[k]]
                skipped = f" ({', '.join(notes)})" if notes else ""
                cells += [f"{s['accepted']}/{ran}{skipped}", f"{s['correct']}/{ran}"]
            lines.append(f"| {r['persona']} | {r['lang']} | {d} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def landing_table(results) -> str:
    """Markdown: per persona, language and drift variant, each token class's share of OPD's negative advantage mass
    and how many replies have their most negative token there."""
    from claw_lib.toy.homework_eval import LANDING_CLASSES

    lines = ["| persona | lang | variant | replies | " + " | ".join(f"{c}: share, argmin" for c in LANDING_CLASSES)
             + " |", "|" + " --- |" * (4 + len(LANDING_CLASSES))]
    for r in (r for r in results if "landing" in r):
        for variant, per in r["landing"]["classes"].items():
            cells = [f"{per[c]['negative_share']}, {per[c]['most_negative']}" for c in LANDING_CLASSES]
            lines.append(f"| {r['persona']} | {r['lang']} | {variant} | {r['landing']['replies']} | "
                         + " | ".join(cells) + " |")
    return "\n".join(lines)


def add_landing(model, tok, result, problems, seed: int) -> None:
    """result["landing"] = {"replies": the greedy untrained replies that drew a hint and fit the model, "too_long":
    those that drew one and did not fit, "classes": landing(...)}."""
    from claw_lib.toy.homework_eval import landing, opd_tokens

    by_index = {p.index: p for p in problems}
    turns, too_long = [], 0
    for rec in result["records"]:
        if rec["decoding"] == "greedy" and rec["condition"] == "untrained" and rec["reply"].strip():
            view = opd_tokens(model, tok, result["persona"], result["lang"], by_index[rec["problem"]], rec["reply"],
                              seed)
            too_long += view["too_long"]
            if view["tokens"]:
                turns.append((rec["reply"], view["tokens"]))
    result["landing"] = {"replies": len(turns), "too_long": too_long, "classes": landing(turns, result["persona"])}


def main(argv=None) -> int:
    a = parse(argv)
    out = check_out_file(a.out, a.force) if a.out else None
    problems = load_split(a.split, a.gsm8k, load_definition(a.definition))[:a.limit]
    from claw_lib.models.lm import load_causal_lm
    from claw_lib.toy.homework_eval import ceiling

    seed_everything(a.seed)
    model, tok = load_causal_lm(a.model, device=a.device)
    from claw_lib.serve.serving_copy import serving_copy

    decoder = serving_copy(model, a.serving_format)
    results = [ceiling(decoder, tok, persona, lang, problems, a.max_new_tokens, a.decodings, a.seed)
               for persona in a.personas for lang in a.langs]
    if a.landing:
        for r in results:
            add_landing(model, tok, r, problems, a.seed)
    print(table(results))
    if a.landing:
        print("\n" + landing_table(results))
    if out:
        with atomic_write(out, replace=a.force) as f:
            json.dump({"model": a.model, "split": a.split, "max_new_tokens": a.max_new_tokens,
                       "serving_format": a.serving_format, "results": results}, f,
                      ensure_ascii=False, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(script_main(main))
