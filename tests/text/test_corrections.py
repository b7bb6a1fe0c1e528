"""Reading a correction: the kept clauses, affirmations, and what a correction negates."""
import pytest

from claw_lib.text.corrections import clean_correction, guess_lang, negated_spans


@pytest.mark.parametrize("text, kept", [
    ("你说的不对，法国的首都是巴黎，另外法国红酒也不错。", "法国的首都是巴黎。"),
    ("不对，法国的首都是巴黎。", "法国的首都是巴黎。"),
    ("No, the capital of France is Paris. Also, nice weather today.", "the capital of France is Paris."),
    ("Be casual: just the answer, no full stop.", "Be casual: just the answer, no full stop."),
    ("π is 3.14, not 3.41.", "π is 3.14, not 3.41."),
    ("不太对吧。", ""),
])
def test_kept_clauses(text, kept):
    cc = clean_correction(text)
    assert cc.text == kept
    assert all(text[a:b] in text for a, b in cc.spans)


@pytest.mark.parametrize("text, affirmation", [
    ("对，谢谢！", True), ("Thanks, that's right.", True), ("Great, exactly like that!", True),
    ("不对，是巴黎。", False), ("", False), ("Right. But the capital is Paris.", False),
])
def test_affirmations(text, affirmation):
    assert clean_correction(text).affirmation is affirmation


def test_negated_spans():
    t = "不是北京，他去了上海。"
    assert [t[a:b] for a, b in negated_spans(t)] == ["北京"]
    t = "It lives in Asia, not Africa."
    assert [t[a:b] for a, b in negated_spans(t)] == ["Africa"]
    t = "Not Berlin, he went to Rome."
    assert [t[a:b] for a, b in negated_spans(t)] == ["Berlin"]
    assert negated_spans("法国的首都是巴黎。") == []


def test_guess_lang():
    assert guess_lang("Paris") == "en" and guess_lang("Paris", "巴黎") == "zh" and guess_lang("") == "en"


def test_not_a_string_is_refused():
    with pytest.raises(TypeError, match="must be a str"):
        clean_correction(None)
