"""Derive the kit's GSM8K split definition (``data/gsm8k/split.json``: indices and hashes, no texts).

    python tools/gsm8k_split.py --test test.jsonl --order GSM8K.json --out data/gsm8k/split.json

* ``--test``: GSM8K's ``grade_school_math/data/test.jsonl`` (openai/grade-school-math, MIT), whose line numbers
  (0-based) are the problems' indices;
* ``--order``: the order upstream's evaluation reads its problems in: the ``GSM8K.json`` array that
  ``openclaw-test/student_chat.py --dataset GSM8K.json --num-problems 36`` takes the first 36 of (upstream does not
  commit it; a public fork of OpenClaw-RL does, as ``openclaw-test/GSM8K.json``: all 1,319 test problems, shuffled).

Splits: ``stream`` = the first 36 of that order (upstream's student phase), ``stream_72`` = the first 72 (Reef's
stream, "the original OpenClaw-RL paper's 72 GSM8K problems"; its README's examples are problems 0 and 2 of this
order); ``dev`` and ``heldout`` = the first ``--dev`` and the next ``--heldout`` of the other test problems ranked by
``sha256("claw-kit gsm8k <index>")`` (a fixed rule anyone can recompute, no random generator). Refuses to overwrite
``--out`` unless ``--force``.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from claw_lib.toy.gsm8k import check_splits, make_definition, question_hash, read_gsm8k  # noqa: E402
from claw_lib.utils import atomic_write, check_out_file, script_main  # noqa: E402


def _rank(index: int) -> str:
    return hashlib.sha256(f"claw-kit gsm8k {index}".encode()).hexdigest()


def splits_from(test, order, n_dev: int, n_heldout: int) -> dict:
    """{split: [test.jsonl index, ...]} from the test records and upstream's ordered records (both (q, gold, sol))."""
    where = {question_hash(q): i for i, (q, _, _) in enumerate(test)}
    stream = []
    for q, gold, _ in order[:72]:
        i = where.get(question_hash(q))
        if i is None or test[i][1] != gold:
            raise ValueError(f"an ordered problem is not in --test with the same gold answer: {q[:60]!r}")
        stream.append(i)
    rest = sorted(set(range(len(test))) - set(stream), key=_rank)
    return {"stream": stream[:36], "stream_72": stream, "dev": rest[:n_dev],
            "heldout": rest[n_dev:n_dev + n_heldout]}


def _compact(text: str) -> str:
    """One ``[index, "hash"]`` pair a line (json.dumps spreads each over four)."""
    return re.sub(r'\[\n\s+(\d+),\n\s+("[0-9a-f]+")\n\s+\]', r"[\1, \2]", text)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--test", required=True, help="GSM8K's grade_school_math/data/test.jsonl")
    ap.add_argument("--order", required=True, help="upstream's GSM8K.json (the evaluation's order)")
    ap.add_argument("--dev", type=int, default=24, help="dev problems (default 24)")
    ap.add_argument("--heldout", type=int, default=50, help="held-out problems (default 50)")
    ap.add_argument("--out", default=str(ROOT / "data" / "gsm8k" / "split.json"))
    ap.add_argument("--force", action="store_true", help="replace --out")
    a = ap.parse_args(argv)
    out = check_out_file(a.out, a.force, inputs=(a.test, a.order))
    test, order = read_gsm8k(a.test), read_gsm8k(a.order)
    source = {"repository": "openai/grade-school-math", "file": "grade_school_math/data/test.jsonl", "license": "MIT",
              "lines": len(test), "sha256": hashlib.sha256(Path(a.test).read_bytes()).hexdigest(),
              "order": "upstream's GSM8K.json (OpenClaw-RL openclaw-test; committed in a public fork), sha256 "
                       + hashlib.sha256(Path(a.order).read_bytes()).hexdigest(),
              "selection": "dev, heldout: the test problems outside stream_72 ranked by sha256('claw-kit gsm8k "
                           "<index>'), the first dev then the next heldout"}
    definition = make_definition(test, splits_from(test, order, a.dev, a.heldout), source)
    check_splits(definition)
    with atomic_write(out, replace=a.force) as f:
        f.write(_compact(json.dumps(definition, indent=1, ensure_ascii=False)) + "\n")
    print(f"wrote {out}: " + ", ".join(f"{k} {len(v)}" for k, v in definition["splits"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(script_main(main))
