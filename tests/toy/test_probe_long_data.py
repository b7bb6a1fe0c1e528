"""The long-output probe set (``data/probe_long.jsonl``, issue 23; card: ``data/probe_long.md``) is well formed.

Checks the data only, independently of the library's loader: schema, labels (each span holds exactly its text,
inside the output, no two spans overlapping), 2-5 sentences per output, the recorded split rule, and the size and
balance the issue asks for (>= 150 rows, each language >= 40 %, every correction style >= 15 rows)."""
from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from claw_lib.text.claims import sentence_spans  # the splitter the long-output rewards use counts the sentences
from claw_lib.toy.probe import split_of

DATA = Path(__file__).resolve().parents[2] / "data"
LONG = DATA / "probe_long.jsonl"

STYLES = {"quote_reject", "value_only", "reason", "swap", "one_word", "aside", "restate_one", "confirm"}
KINDS = {"number", "date", "unit", "entity", "fact", "negation", "comparison", "formula", "swap", "two_claims",
         "no_error"}
FIELDS = {"id": str, "lang": str, "kind": str, "style": str, "n_errors": int, "question": str, "output": str,
          "correction": str, "rejected": list, "rejected_text": list, "unaddressed": list,
          "unaddressed_text": list, "sentence_of_error": list, "split": str}
CJK = re.compile(r"[\u4e00-\u9fff]")
@pytest.fixture(scope="module")
def rows():
    with open(LONG, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@pytest.mark.parametrize("text, expected", [
    ("月球是卫星。它离地球约38万公里！对吗？", ["月球是卫星。", "它离地球约38万公里！", "对吗？"]),
    ("Pi is about 3.14. Use xs.sort() to sort!", ["Pi is about 3.14.", "Use xs.sort() to sort!"]),
    ("It drops 979 meters.", ["It drops 979 meters."]),
    ("光速约每秒30万公里。Light is fast.", ["光速约每秒30万公里。", "Light is fast."]),
])
def test_sentence_splitter_against_hand_counts(text, expected):
    assert [text[s:e] for s, e in sentence_spans(text)] == expected


def check_row_shape(r, k, prefix, fields, styles=STYLES, kinds=KINDS):
    """One row k of a multi-sentence probe set: its fields and their types, known language / style / kind, the id
    ``{prefix}-{lang}-{style}-{k:03d}``, a question and a correction, question and output in the row's language (the
    real-output set's test runs it on its rows too)."""
    assert set(r) == set(fields), r["id"]
    for key, typ in fields.items():
        assert isinstance(r[key], typ), (r["id"], key)
    assert r["lang"] in ("zh", "en") and r["style"] in styles and r["kind"] in kinds, r["id"]
    assert re.fullmatch(rf"{prefix}-{r['lang']}-{r['style']}-{k:03d}", r["id"]), r["id"]
    assert r["question"].strip() and r["correction"].strip(), r["id"]
    for text in (r["question"], r["output"]):  # the question and output are in the row's language
        assert bool(CJK.search(text)) == (r["lang"] == "zh"), r["id"]


def test_schema_and_ids(rows):
    ids = [r["id"] for r in rows]
    assert len(set(ids)) == len(ids)
    outputs = [r["output"] for r in rows]
    assert len(set(outputs)) == len(outputs)
    for k, r in enumerate(rows):
        check_row_shape(r, k, "long", FIELDS)


def test_labels_are_consistent(rows):
    for r in rows:
        out = r["output"]
        spans = []
        for key in ("rejected", "unaddressed"):
            assert len(r[key]) == len(r[f"{key}_text"]), r["id"]
            for (s, e), text in zip(r[key], r[f"{key}_text"]):
                assert 0 <= s < e <= len(out), (r["id"], s, e)
                assert out[s:e] == text, (r["id"], out[s:e], text)
                assert text == text.strip(" ，。,.;；") and text, (r["id"], text)  # no padding
                spans.append((s, e))
        spans.sort()
        assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:])), r["id"]
        # n_errors counts the wrong claims, addressed or not; each claim is one span
        assert r["n_errors"] == len(spans) and r["n_errors"] in (0, 1, 2), r["id"]
        assert (r["n_errors"] == 0) == (r["kind"] == "no_error") == (r["style"] == "confirm"), r["id"]
        assert (r["kind"] == "swap") == (r["style"] == "swap"), r["id"]
        if r["kind"] == "swap":
            assert len(r["rejected"]) == 2 and not r["unaddressed"], r["id"]
        if r["unaddressed"]:  # only rows with two wrong claims leave one of them unaddressed
            assert r["kind"] == "two_claims" and len(r["rejected"]) == 1, r["id"]
        if r["kind"] == "two_claims":
            assert r["n_errors"] == 2, r["id"]


def test_two_to_five_sentences_and_sentence_of_error(rows):
    for r in rows:
        sents = sentence_spans(r["output"])
        assert 2 <= len(sents) <= 5, (r["id"], len(sents))
        assert len(r["sentence_of_error"]) == len(r["rejected"]), r["id"]
        for (s, e), i in zip(r["rejected"], r["sentence_of_error"]):
            a, b = sents[i]
            assert a <= s and e <= b, (r["id"], i)


def test_split_is_the_recorded_rule(rows):
    for r in rows:
        expected = "test" if int(hashlib.sha256(r["id"].encode("utf-8")).hexdigest(), 16) % 2 else "dev"
        assert r["split"] == expected == split_of(r["id"]), r["id"]
    assert {r["split"] for r in rows} == {"dev", "test"}


def check_size_and_balance(rows, styles, min_style, no_error_share, min_two):
    """At least 150 rows, each language at least 40 %, every style in ``styles`` on at least ``min_style`` rows, the
    share of rows without a wrong claim within ``no_error_share`` (low, high), at least ``min_two`` with two."""
    n = len(rows)
    assert n >= 150
    langs = Counter(r["lang"] for r in rows)
    assert langs["zh"] >= 0.4 * n and langs["en"] >= 0.4 * n, langs
    by_style = Counter(r["style"] for r in rows)
    assert set(by_style) == set(styles) and min(by_style.values()) >= min_style, by_style
    no_error = sum(r["n_errors"] == 0 for r in rows)
    assert no_error_share[0] * n <= no_error <= no_error_share[1] * n, no_error
    assert sum(r["n_errors"] == 2 for r in rows) >= min_two


def test_size_and_balance(rows):
    check_size_and_balance(rows, STYLES, 15, (0.05, 0.2), 15)  # about 10 % of rows have no wrong claim


def test_no_output_reused_from_earlier_probe_sets(rows):
    earlier = set()
    for name in ("probe_set.jsonl", "probe_v2.jsonl"):
        with open(DATA / name, encoding="utf-8") as f:
            earlier |= {json.loads(line)["output"] for line in f if line.strip()}
    for r in rows:
        assert r["output"] not in earlier, r["id"]
        assert not any(old in r["output"] for old in earlier), r["id"]  # nor a v1/v2 sentence inside it
