"""One pair's texts read once (claw_lib/text/memo.py): inside ``one_pair`` a pure reading runs once per distinct text,
outside it every call runs; the answers are the same either way."""
import threading

import pytest

from claw_lib.text import tokens
from claw_lib.text.claims import clause_spans
from claw_lib.text.corrections import negated_spans
from claw_lib.text.memo import one_pair, recall


def counting(fn, seen):
    def counted(text):
        seen.append(text)
        return fn(text)
    return counted


def test_recall_runs_once_per_text_inside_one_pair_and_every_time_outside():
    seen = []
    f = counting(lambda t: [t.upper()], seen)
    assert recall(f, "a") == recall(f, "a") == ["A"] and seen == ["a", "a"]
    seen.clear()
    with one_pair():
        assert [recall(f, "a"), recall(f, "b"), recall(f, "a")] == [["A"], ["B"], ["A"]]
        with one_pair():  # a block inside another shares its memo
            recall(f, "b")
    assert seen == ["a", "b"]
    recall(f, "a")
    assert seen == ["a", "b", "a"], "the memo ends with the block"


def test_recall_hands_out_a_fresh_list():
    with one_pair():
        first = recall(lambda t: [1, 2], "x")
        first.append(3)
        assert recall(lambda t: [1, 2], "x") == [1, 2]


def test_each_thread_has_its_own_memo():
    seen = []
    f = counting(lambda t: [t], seen)
    with one_pair():
        recall(f, "a")
        other = threading.Thread(target=lambda: recall(f, "a"))
        other.start()
        other.join()
    assert seen == ["a", "a"]


def test_the_memoised_readings_answer_as_without_the_memo():
    texts = ["不对，巴黎才是首都。", "No, it's Canberra, not Sydney.", "冰是在0度融化的，\"不是10度\"。", "", "  "]
    plain = [(tokens.tokenize(t), clause_spans(t), negated_spans(t)) for t in texts]
    with one_pair():
        assert [(tokens.tokenize(t), clause_spans(t), negated_spans(t)) for t in texts * 2] == plain * 2


def test_tokenize_checks_the_length_on_every_call():
    with one_pair():
        assert tokens.tokenize("a b", max_chars=3)
        with pytest.raises(ValueError, match="more than the limit of 2"):
            tokens.tokenize("a b", max_chars=2)
