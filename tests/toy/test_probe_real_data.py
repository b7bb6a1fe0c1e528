"""The real-output probe set (``data/probe_real.jsonl``; card: ``data/probe_real.md``) is well formed.

Checks the data only, independently of the library's loader and of any reward code: schema, labels (each span holds
exactly its text, inside the output, no two spans overlapping), 2-5 sentences per output, provenance (every output
is, word for word, an answer recorded in ``results/probe_real/generations*.jsonl``, or its prefix up to a sentence
end where the answer was cut at the token limit), the split (drawn once, balanced within each language x style),
the size and balance the issue asks for, and that the card's count tables are the file's counts."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from claw_lib.text.claims import sentence_spans  # the splitter the long-output rewards use counts the sentences

# the label rules (spans hold their text, no overlap, n_errors, swap and two_claims rows) and the 2-5 sentence rule are
# the long set's, whose schema this set shares: its two tests run here again, on this module's rows
from .test_probe_long_data import (check_row_shape, check_size_and_balance, test_labels_are_consistent,  # noqa: F401
                                   test_two_to_five_sentences_and_sentence_of_error)

ROOT = Path(__file__).resolve().parents[2]
REAL = ROOT / "data" / "probe_real.jsonl"
CARD = ROOT / "data" / "probe_real.md"
RAW = ROOT / "results" / "probe_real"

STYLES = ["quote_reject", "value_only", "reason", "swap", "one_word", "aside", "restate_one", "confirm"]
KINDS = ["number", "date", "unit", "entity", "fact", "negation", "comparison", "formula", "swap", "two_claims",
         "no_error"]
FIELDS = {"id": str, "lang": str, "kind": str, "style": str, "n_errors": int, "question": str, "output": str,
          "correction": str, "rejected": list, "rejected_text": list, "unaddressed": list,
          "unaddressed_text": list, "sentence_of_error": list, "split": str, "model": str, "decoding": str,
          "generation": str, "trimmed": bool, "note": str}


@pytest.fixture(scope="module")
def rows():
    with open(REAL, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@pytest.fixture(scope="module")
def generations():
    gens = {}
    for path in sorted(RAW.glob("generations*.jsonl")):
        with open(path, encoding="utf-8") as f:
            for line in f:
                g = json.loads(line)
                assert g["gid"] not in gens, g["gid"]
                gens[g["gid"]] = g
    return gens


def test_schema_and_ids(rows):
    ids = [r["id"] for r in rows]
    assert len(set(ids)) == len(ids)
    gens = [r["generation"] for r in rows]
    assert len(set(gens)) == len(gens)  # each recorded answer is used once
    for k, r in enumerate(rows):
        check_row_shape(r, k, "real", FIELDS, STYLES, KINDS)
        assert r["model"].startswith("Qwen2.5-Coder-0.5B-Instruct"), r["id"]


def test_outputs_are_the_models_words(rows, generations):
    for r in rows:
        g = generations[r["generation"]]
        assert (r["question"], r["lang"], r["decoding"]) == (g["question"], g["lang"], g["decoding"]), r["id"]
        if r["trimmed"]:  # cut at the token limit: kept up to the end of its last full sentence, else unedited
            assert not g["finished"] and g["output"].startswith(r["output"]), r["id"]
            assert r["output"][-1] in "。！？.!?" and len(r["output"]) < len(g["output"]), r["id"]
        else:
            assert g["finished"] and r["output"] == g["output"], r["id"]


def test_split_is_balanced_within_each_stratum(rows):
    assert {r["split"] for r in rows} == {"dev", "test"}
    cells = Counter((r["lang"], r["style"], r["split"]) for r in rows)
    for lang in ("zh", "en"):
        for style in STYLES:
            assert abs(cells[(lang, style, "dev")] - cells[(lang, style, "test")]) <= 1, (lang, style)


def test_size_and_balance(rows):
    check_size_and_balance(rows, STYLES, 12, (0.12, 0.22), 10)  # about 15-20 % of rows are correct answers
    assert sum(bool(r["unaddressed"]) for r in rows) >= 5


def _card_table(header: str) -> list:
    """The rows of the card's markdown table whose header line starts with ``header``, as lists of cells."""
    lines = CARD.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    table = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        table.append([c.strip() for c in line.strip("|").split("|")])
    return table


def test_card_counts_match_the_file(rows):
    by_style = Counter((r["split"], r["lang"], r["style"]) for r in rows)
    got = _card_table("| split | lang | quote_reject |")
    want = [[s, lang, *[str(by_style[(s, lang, st)]) for st in STYLES],
             str(sum(by_style[(s, lang, st)] for st in STYLES))] for s in ("dev", "test") for lang in ("zh", "en")]
    assert got == want
    by_kind = Counter((r["split"], r["kind"]) for r in rows)
    got = _card_table("| split | number |")
    assert got == [[s, *[str(by_kind[(s, k)]) for k in KINDS]] for s in ("dev", "test")]
    by_err = Counter((r["lang"], r["n_errors"], bool(r["unaddressed"])) for r in rows)
    got = _card_table("| lang | 0 errors |")
    assert got == [[lang, *[str(by_err[(lang, n, u)]) for n, u in ((0, False), (1, False), (2, False), (2, True))]]
                   for lang in ("zh", "en")]
    by_sent = Counter((r["lang"], len(sentence_spans(r["output"]))) for r in rows)
    got = _card_table("| lang | 2 sentences |")
    assert got == [[lang, *[str(by_sent[(lang, k)]) for k in (2, 3, 4, 5)]] for lang in ("zh", "en")]
