"""Build the real-output probe set (issue 35): a real instruct model answers, a reader labels, a fixed split.

Three steps, all recorded under ``results/probe_real/`` (card: ``data/probe_real.md``):

``generate``: Qwen2.5-Coder-0.5B-Instruct (the fp32 folder made as ``../shared/notes/review-realmodel.md`` §0 says)
  answers every question of a ``lang<TAB>question`` file (``--questions``, default ``questions.tsv``) through its
  chat template (``--system`` replaces the template's default system message), with a sentence-count instruction in
  the question's language (``--instruction-zh`` / ``--instruction-en``), batched with left padding, greedy (or
  sampled, ``--temperature``), one CPU thread. Writes one JSON line per answer to
  ``results/probe_real/generations[-<tag>].jsonl`` (the provenance of every output in the set; appended batch by
  batch to a ``.part`` file while it runs) and the settings to ``.meta.json`` beside it; never overwrites a file.

``build``: turns the hand-written labels (``results/probe_real/labels.jsonl``: one line per kept answer, the
  generation id, style, kind, correction, and the rejected / unaddressed claims as quoted substrings of the
  output) into ``data/probe_real.jsonl``: character offsets, sentence indices, ids, the model and decoding, and a
  dev/test split drawn once (stratified by language and style, ``random.Random(SEED)``). The split of a row that
  is already in ``data/probe_real.jsonl`` is kept, so relabelling never re-draws it.

``tables``: prints the data card's count tables from ``data/probe_real.jsonl``.

No reward, alignment or probe-metric code is imported here: the labels are a reader's, written before any method
saw the rows.

    OMP_NUM_THREADS=1 .venv/bin/python tools/make_probe_real.py generate --model /work/models/qwen05 \\
        --questions results/probe_real/questions_long.tsv --tag L1
    .venv/bin/python tools/make_probe_real.py build
    .venv/bin/python tools/make_probe_real.py tables
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RAW = ROOT / "results" / "probe_real"
DATA = ROOT / "data" / "probe_real.jsonl"
SEED = 35
MODEL_NAME = ("Qwen2.5-Coder-0.5B-Instruct (GGUF Q4_K_M re-quantisation of the AWQ checkpoint, "
              "de-quantised to fp32)")
INSTRUCTION = {"zh": "请用两到四句话回答。", "en": "Answer in two to four sentences."}


def fail(msg: str) -> None:
    """Print a one-line error and exit with status 2."""
    print(f"make_probe_real: {msg}", file=sys.stderr)
    sys.exit(2)


def read_questions(path: Path) -> list:
    """[(gid_prefix_lang, question)] from ``lang<TAB>question`` lines."""
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        lang, _, q = line.partition("\t")
        if lang not in INSTRUCTION or not q.strip():
            fail(f"{path}:{n}: expected 'zh|en<TAB>question', got {line!r}")
        rows.append((lang, q.strip()))
    return rows


def load_model(folder: str):
    """(model, tokenizer) on CPU in fp32, left padding, one thread."""
    if not (Path(folder) / "config.json").is_file():
        fail(f"model folder {folder!r} not found (no config.json); build it as review-realmodel.md §0 says")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    torch.set_num_threads(1)
    tok = AutoTokenizer.from_pretrained(folder)
    tok.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    return model, tok


def generate_batch(model, tok, users: list, temperature: float, max_new: int, seed: int, system: str = "") -> list:
    """[(text, n_new_tokens, finished)] for a batch of user messages; finished = the model emitted its EOS. An empty
    ``system`` keeps the chat template's default system message."""
    import torch
    head = [{"role": "system", "content": system}] if system else []
    prompts = [tok.apply_chat_template(head + [{"role": "user", "content": u}], tokenize=False,
                                       add_generation_prompt=True) for u in users]
    enc = tok(prompts, return_tensors="pt", padding=True)
    kw = dict(do_sample=True, temperature=temperature, top_p=1.0, top_k=0) if temperature > 0 else \
        dict(do_sample=False, temperature=None, top_p=None, top_k=None)
    torch.manual_seed(seed)
    with torch.no_grad():
        out = model.generate(**enc, max_new_tokens=max_new, pad_token_id=tok.pad_token_id, **kw)
    new = out[:, enc["input_ids"].shape[1]:]
    res = []
    for row in new.tolist():
        finished = tok.eos_token_id in row
        ids = row[:row.index(tok.eos_token_id)] if finished else row
        ids = [i for i in ids if i != tok.pad_token_id]
        res.append((tok.decode(ids, skip_special_tokens=True).strip(), len(ids), finished))
    return res


def _shown(path: Path) -> str:
    """A path relative to the repository root where it is inside it, else as given."""
    full = path.resolve()
    return str(full.relative_to(ROOT)) if full.is_relative_to(ROOT) else str(path)


def write_meta(dest: Path, args, qfile: Path, instruction: dict, decoding: str, n: int, seconds: float) -> None:
    """The run's settings and versions, beside its generations (``<dest>.meta.json``)."""
    import torch
    import transformers
    meta = {"model": MODEL_NAME, "model_folder": args.model, "decoding": decoding, "seed": args.seed,
            "max_new_tokens": args.max_new_tokens, "batch": args.batch, "threads": 1, "questions": _shown(qfile),
            "system": args.system or "the chat template's default", "instruction": instruction, "n": n,
            "seconds": round(seconds, 1), "torch": torch.__version__, "transformers": transformers.__version__,
            "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime())}
    dest.with_suffix(".meta.json").write_text(json.dumps(meta, ensure_ascii=False, indent=1) + "\n", "utf-8")


def cmd_generate(args) -> None:
    """Answer every question; write results/probe_real/generations[-tag].jsonl and a .meta.json beside it. Answers
    are appended batch by batch to ``<dest>.part`` (readable while the run goes on), which becomes ``dest``, in
    question order, at the end."""
    dest = RAW / (f"generations-{args.tag}.jsonl" if args.tag else "generations.jsonl")
    part = dest.with_name(dest.name + ".part")
    if dest.exists() or part.exists():
        fail(f"{dest} (or .part) exists; the generations are the provenance and are never overwritten (use --tag)")
    qfile = Path(args.questions)
    if not qfile.is_file():
        fail(f"question file {str(qfile)!r} not found")
    qs = read_questions(qfile)
    instruction = {"zh": args.instruction_zh, "en": args.instruction_en}
    model, tok = load_model(args.model)
    order = sorted(range(len(qs)), key=lambda i: (qs[i][0], len(qs[i][1])))
    decoding = "greedy" if args.temperature <= 0 else \
        f"sampled, temperature {args.temperature}, top_p 1.0, top_k off, seed {args.seed}"
    rows, t0 = {}, time.time()
    with open(part, "w", encoding="utf-8") as f:
        for b in range(0, len(order), args.batch):
            idx = order[b:b + args.batch]
            users = [f"{qs[i][1]}{'' if qs[i][0] == 'zh' else ' '}{instruction[qs[i][0]]}".strip() for i in idx]
            for i, u, (text, n, fin) in zip(idx, users, generate_batch(model, tok, users, args.temperature,
                                                                        args.max_new_tokens, args.seed + b,
                                                                        args.system)):
                rows[i] = {"gid": f"g{args.tag or ''}-{i:03d}", "lang": qs[i][0], "question": qs[i][1],
                           "user": u, "decoding": decoding, "output": text, "n_new_tokens": n, "finished": fin}
                f.write(json.dumps(rows[i], ensure_ascii=False) + "\n")
            f.flush()
            print(f"{time.strftime('%H:%M:%S')} {min(b + args.batch, len(order))}/{len(order)} "
                  f"{time.time() - t0:.0f}s", file=sys.stderr, flush=True)
    with open(dest, "w", encoding="utf-8") as f:
        for i in sorted(rows):
            f.write(json.dumps(rows[i], ensure_ascii=False) + "\n")
    part.unlink()
    write_meta(dest, args, qfile, instruction, decoding, len(rows), time.time() - t0)
    print(f"wrote {dest} ({len(rows)} answers, {time.time() - t0:.0f} s)", file=sys.stderr)


def locate(output: str, quote) -> list:
    """[start, end) of a quoted claim in the output: "text" (its only occurrence) or ["text", k] (the k-th, from
    0)."""
    text, k = (quote, None) if isinstance(quote, str) else quote
    starts = [i for i in range(len(output)) if output.startswith(text, i)]
    if not starts or (k is None and len(starts) > 1) or (k is not None and k >= len(starts)):
        raise ValueError(f"{text!r} occurs {len(starts)} times in {output[:40]!r}...")
    s = starts[0 if k is None else k]
    return [s, s + len(text)]


def trim_to_sentence(output: str, sentence_spans) -> str:
    """The output up to the end of its last complete sentence (for answers cut at max_new_tokens)."""
    spans = sentence_spans(output)
    ends = [e for s, e in spans if output[e - 1] in "。！？.!?"]
    if not ends:
        raise ValueError(f"no complete sentence in {output[:40]!r}")
    return output[:ends[-1]]


def build_row(lab: dict, gen: dict, sentence_spans) -> dict:
    """One data row from a label line and its generation; raises ValueError naming what does not fit."""
    output = gen["output"]
    trimmed = bool(lab.get("trim"))
    if trimmed:
        output = trim_to_sentence(output, sentence_spans)
    rej = [locate(output, q) for q in lab.get("rejected", [])]
    una = [locate(output, q) for q in lab.get("unaddressed", [])]
    sents = sentence_spans(output)
    soe = [next(i for i, (a, b) in enumerate(sents) if a <= s and e <= b) for s, e in rej]
    return {"id": "", "lang": gen["lang"], "kind": lab["kind"], "style": lab["style"],
            "n_errors": len(rej) + len(una), "question": gen["question"], "output": output,
            "correction": lab["correction"], "rejected": rej, "rejected_text": [output[s:e] for s, e in rej],
            "unaddressed": una, "unaddressed_text": [output[s:e] for s, e in una], "sentence_of_error": soe,
            "split": "", "model": MODEL_NAME, "decoding": gen["decoding"], "generation": gen["gid"],
            "trimmed": trimmed, "note": lab.get("note", "")}


def assign_splits(rows: list, previous: dict) -> None:
    """Fill each row's split: kept from ``previous`` (generation id -> split) where recorded, else drawn once per
    (lang, style) stratum so that its dev and test counts differ by at most one."""
    strata = defaultdict(list)
    for r in rows:
        strata[(r["lang"], r["style"])].append(r)
    rng = random.Random(SEED)
    for key in sorted(strata):
        group = strata[key]
        for r in group:
            r["split"] = previous.get(r["generation"], "")
        new = [r for r in group if not r["split"]]
        rng.shuffle(new)
        for r in new:
            n_dev = sum(x["split"] == "dev" for x in group)
            n_test = sum(x["split"] == "test" for x in group)
            r["split"] = "dev" if n_dev < n_test or (n_dev == n_test and rng.random() < 0.5) else "test"


def _read_labels(path: Path) -> list:
    """The label lines of ``path``; a missing file or a line that is not JSON is a one-line error."""
    if not path.is_file():
        fail(f"{path} not found: write the labels first (one JSON line per kept answer)")
    labels = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                labels.append(json.loads(line))
            except json.JSONDecodeError as exc:
                fail(f"{path}:{n}: not valid JSON ({exc.msg})")
    return labels


def cmd_build(args) -> None:
    """labels.jsonl + generations*.jsonl -> data/probe_real.jsonl."""
    sys.path.insert(0, str(ROOT))
    from claw_lib.text.claims import sentence_spans  # the sentence splitter the data test counts with
    gens = {}
    for path in sorted(RAW.glob("generations*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            g = json.loads(line)
            gens[g["gid"]] = g
    labels = _read_labels(RAW / "labels.jsonl")
    rows, errors = [], []
    for lab in labels:
        try:
            rows.append(build_row(lab, gens[lab["gid"]], sentence_spans))
        except (ValueError, KeyError, StopIteration) as exc:
            errors.append(f"{lab.get('gid')}: {exc!r}")
    if errors:
        fail("; ".join(errors))
    previous = {}
    if DATA.exists():
        previous = {json.loads(x)["generation"]: json.loads(x)["split"]
                    for x in DATA.read_text(encoding="utf-8").splitlines() if x.strip()}
    rows.sort(key=lambda r: (r["lang"] != "zh", r["style"], r["generation"]))
    for k, r in enumerate(rows):
        r["id"] = f"real-{r['lang']}-{r['style']}-{k:03d}"
    assign_splits(rows, previous)
    with open(DATA, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    print(f"wrote {DATA} ({len(rows)} rows)", file=sys.stderr)


STYLES = ["quote_reject", "value_only", "reason", "swap", "one_word", "aside", "restate_one", "confirm"]
KINDS = ["number", "date", "unit", "entity", "fact", "negation", "comparison", "formula", "swap", "two_claims",
         "no_error"]


def _md(header: list, rows: list) -> str:
    """A markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(str(c) for c in r) + " |" for r in rows])


def cmd_tables(args) -> None:
    """Print the data card's four count tables (style, kind, errors, sentences) from data/probe_real.jsonl."""
    sys.path.insert(0, str(ROOT))
    from claw_lib.text.claims import sentence_spans
    if not DATA.exists():
        fail(f"{DATA} not found; run build first")
    rows = [json.loads(x) for x in DATA.read_text(encoding="utf-8").splitlines() if x.strip()]
    count = defaultdict(int)
    for r in rows:
        for key in ((r["split"], r["lang"], r["style"]), (r["split"], r["kind"]),
                    (r["lang"], r["n_errors"], bool(r["unaddressed"])), (r["lang"], len(sentence_spans(r["output"])))):
            count[key] += 1
    pairs = [(s, lang) for s in ("dev", "test") for lang in ("zh", "en")]
    print(_md(["split", "lang", *STYLES, "all"], [[s, lang, *[count[(s, lang, st)] for st in STYLES],
                                                   sum(count[(s, lang, st)] for st in STYLES)] for s, lang in pairs]))
    print()
    print(_md(["split", *KINDS], [[s, *[count[(s, k)] for k in KINDS]] for s in ("dev", "test")]))
    print()
    cells = ((0, False), (1, False), (2, False), (2, True))
    print(_md(["lang", "0 errors", "1 error", "2 errors, both addressed", "2 errors, one unaddressed"],
              [[lang, *[count[(lang, n, u)] for n, u in cells]] for lang in ("zh", "en")]))
    print()
    print(_md(["lang", "2 sentences", "3 sentences", "4 sentences", "5 sentences"],
              [[lang, *[count[(lang, k)] for k in (2, 3, 4, 5)]] for lang in ("zh", "en")]))


def main(argv=None) -> None:
    """Parse the command line and run one step."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate", help="answer the questions with the real model")
    g.add_argument("--model", default=os.environ.get("CLAW_REAL_MODEL", "/work/models/qwen05"))
    g.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    g.add_argument("--max-new-tokens", type=int, default=120)
    g.add_argument("--batch", type=int, default=16)
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--tag", default="", help="suffix of the output file, e.g. s1 for a sampled run")
    g.add_argument("--questions", default=str(RAW / "questions.tsv"), help="lang<TAB>question lines")
    g.add_argument("--system", default="", help="system message (default: the chat template's own)")
    g.add_argument("--instruction-zh", default=INSTRUCTION["zh"], help="appended to each zh question")
    g.add_argument("--instruction-en", default=INSTRUCTION["en"], help="appended to each en question")
    sub.add_parser("build", help="labels -> data/probe_real.jsonl")
    sub.add_parser("tables", help="print the data card's count tables from data/probe_real.jsonl")
    args = ap.parse_args(argv)
    {"generate": cmd_generate, "build": cmd_build, "tables": cmd_tables}[args.cmd](args)


if __name__ == "__main__":
    main()
