"""The GSM8K split definition (data/gsm8k/split.json), the loader and the final-number correctness rule."""
import json
import os
import re
from pathlib import Path

import pytest

from claw_lib.config import GSM8K_SPLITS
from claw_lib.toy.gsm8k import (SPLIT_FILE, GSM8KNotAvailableError, Problem, check_splits, final_number, is_correct,
                                load_definition, load_split, make_definition, parse_number, question_hash, read_gsm8k)

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "gsm8k" / "sample.jsonl"


# --------------------------------------------------------------------------- the committed split definition
def test_the_split_definition_has_the_streams_dev_and_50_heldout():
    d = load_definition()
    s = {k: [i for i, _ in v] for k, v in d["splits"].items()}
    assert tuple(s) == GSM8K_SPLITS
    assert (len(s["stream"]), len(s["stream_72"]), len(s["dev"]), len(s["heldout"])) == (36, 72, 24, 50)
    assert s["stream_72"][:36] == s["stream"]
    parts = [set(s["stream_72"]), set(s["dev"]), set(s["heldout"])]
    assert [len(p) for p in parts] == [72, 24, 50]  # no problem twice within a split
    assert not (parts[0] & parts[1] or parts[0] & parts[2] or parts[1] & parts[2])
    assert all(0 <= i < d["source"]["lines"] == 1319 for p in parts for i in p)
    assert all(re.fullmatch(r"[0-9a-f]{16}", h) for v in d["splits"].values() for _, h in v)
    assert d["source"]["license"] == "MIT" and s["stream"][0] == 677  # upstream's first problem: test.jsonl line 678
    check_splits(d)


def test_the_split_definition_ships_no_problem_text():
    text = SPLIT_FILE.read_text(encoding="utf-8")
    assert '"question"' not in text and "####" not in text and len(text) < 20_000
    d = load_definition()
    assert all(isinstance(i, int) and isinstance(h, str) for v in d["splits"].values() for i, h in v)


def test_dev_and_heldout_follow_the_documented_hash_rank():
    """The rule in the card, recomputed: the test problems outside stream_72 ranked by sha256('claw-kit gsm8k i')."""
    import hashlib

    d = load_definition()
    s = {k: [i for i, _ in v] for k, v in d["splits"].items()}
    rest = sorted(set(range(1319)) - set(s["stream_72"]),
                  key=lambda i: hashlib.sha256(f"claw-kit gsm8k {i}".encode()).hexdigest())
    assert s["dev"] == rest[:24] and s["heldout"] == rest[24:74]


def test_check_splits_refuses_overlaps_and_a_stream_that_is_not_the_prefix():
    d = load_definition()
    bad = json.loads(json.dumps(d))
    bad["splits"]["heldout"][0] = bad["splits"]["dev"][0]
    with pytest.raises(ValueError, match="disjoint"):
        check_splits(bad)
    bad = json.loads(json.dumps(d))
    bad["splits"]["stream"] = bad["splits"]["stream"][1:] + bad["splits"]["stream"][:1]
    with pytest.raises(ValueError, match="start of the 72"):
        check_splits(bad)


@pytest.mark.skipif(not os.environ.get("CLAW_GSM8K"), reason="opt-in: CLAW_GSM8K names the user's GSM8K test.jsonl")
def test_every_problem_of_every_split_is_in_the_users_gsm8k_file():
    for split in GSM8K_SPLITS:
        problems = load_split(split)
        assert len(problems) == len(load_definition()["splits"][split])
        assert all(is_correct(p.solution, p.gold) for p in problems if p.solution)


# --------------------------------------------------------------------------- the loader, on the kit's invented sample
@pytest.fixture
def sample_definition():
    records = read_gsm8k(SAMPLE)
    return make_definition(records, {"stream": [0, 1], "stream_72": [0, 1, 2], "dev": [3], "heldout": [4, 5]},
                           {"file": "sample.jsonl"})


def test_load_split_finds_problems_by_hash_in_any_order(tmp_path, sample_definition):
    problems = load_split("heldout", SAMPLE, sample_definition)
    assert [(p.index, p.gold, p.gold_value) for p in problems] == [(4, "744", 744.0), (5, "20", 20.0)]
    # upstream's form: a shuffled JSON array with ground_truth_answer
    rows = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()]
    arr = [{"question": r["question"], "ground_truth_answer": r["answer"].rsplit("#### ", 1)[1]} for r in rows[::-1]]
    f = tmp_path / "GSM8K.json"
    f.write_text(json.dumps(arr), encoding="utf-8")
    again = load_split("heldout", f, sample_definition)
    assert [(p.index, p.question, p.gold) for p in again] == [(p.index, p.question, p.gold) for p in problems]


def test_load_split_errors_are_one_line(tmp_path, monkeypatch, sample_definition):
    monkeypatch.delenv("CLAW_GSM8K", raising=False)
    cases = [(None, "not shipped with claw-kit"), (tmp_path / "nope.jsonl", "does not exist")]
    wrong = tmp_path / "other.jsonl"
    wrong.write_text(json.dumps({"question": "What is two plus two?", "answer": "2 + 2 = 4\n#### 4"}) + "\n")
    cases.append((wrong, "2 of the 2 problems of split 'heldout' are not in the GSM8K file"))
    notjson = tmp_path / "x.jsonl"
    notjson.write_text("hello\n")
    cases.append((notjson, "line 1 is not JSON"))
    noanswer = tmp_path / "y.jsonl"
    noanswer.write_text(json.dumps({"question": "q", "answer": "no final"}) + "\n")
    cases.append((noanswer, "no '#### ' final answer"))
    binary = tmp_path / "z.jsonl"
    binary.write_bytes(b"\xff\xfe\x00 not text")
    cases += [(binary, "is not UTF-8 text"), (tmp_path, "is a folder")]
    array = tmp_path / "a.json"
    array.write_text('[{"question": "q"}]')
    cases.append((array, "item 0 is not a GSM8K record"))
    for path, message in cases:
        with pytest.raises(GSM8KNotAvailableError, match=re.escape(message)) as e:
            load_split("heldout", path, sample_definition)
        assert "\n" not in str(e.value) and isinstance(e.value, ValueError)
    with pytest.raises(ValueError, match="split must be one of"):
        load_split("train", SAMPLE, sample_definition)


def test_question_hash_is_the_sha256_prefix_of_the_stripped_text():
    import hashlib

    assert question_hash("  How many?\n") == hashlib.sha256(b"How many?").hexdigest()[:16]


# --------------------------------------------------------------------------- correctness: the reply's final number
@pytest.mark.parametrize("reply, value", [
    ("So they need 100 - 64 = 36 more signatures.", 36.0),
    ("It costs $65,960 more.", 65960.0),
    ("The total is $1,596.00 for the year.", 1596.0),
    ("Each pack costs 0.25 dollars", 0.25),
    ("10-5 = 5, and the change is -3", -3.0),
    ("(12)-5 leaves 7", 7.0),
    ("one, 2, 3", 3.0),
    ("答案是18个。", 18.0),
    ("\\boxed{72}", 72.0),
    ("A quarter is 1/4", 4.0),
    ("no number here", None),
    ("", None),
])
def test_final_number(reply, value):
    assert final_number(reply) == value


@pytest.mark.parametrize("reply, gold, right", [
    ("20 + 44 = 64, 100 - 64 = 36", "36", True),
    ("The answer is 36. Check: 100 - 64 = 36. Keep it up!", "36", True),
    ("It is 36, not 64", "36", False),  # the final number rules, not the first
    ("It costs 65960 dollars more.", "65,960", True),
    ("It costs 65,960.5 dollars", "65,960", False),
    ("no number", "36", False),
])
def test_is_correct_reads_the_final_number(reply, gold, right):
    assert is_correct(reply, gold) is right


def test_parse_number_and_gold_value():
    assert [parse_number(x) for x in ("65,960", "-3", "0.5", "1,5", "x")] == [65960.0, -3.0, 0.5, None, None]
    with pytest.raises(ValueError, match="not a number"):
        Problem(1, "q", "many").gold_value


def test_the_samples_solutions_end_in_their_gold_answers():
    records = read_gsm8k(SAMPLE)
    assert len(records) == 6 and all(is_correct(sol, gold) for _, gold, sol in records)
