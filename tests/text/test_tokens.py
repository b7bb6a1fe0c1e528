"""Word tokens and sub-tokens: offsets cover the text, emoji stay whole, scores move between levels."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from claw_lib.text.tokens import (
    Token,
    map_subtokens_to_words,
    subtoken_spans,
    subtokens_to_words,
    tokenize,
    word_subtoken_overlaps,
    words_to_subtokens,
)


def test_subtoken_spans_with_byte_tokens(tiny):
    _, tok = tiny
    text = "👍🏽 ok 巴黎"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    spans = subtoken_spans(tok, ids)
    assert len(spans) == len(ids) and spans[-1].end == len(text)
    assert all(0 <= s.start <= s.end <= len(text) for s in spans)


def words(text):
    return [t.text for t in tokenize(text)]


def test_seed_example_chinese():
    assert words("法国的首都是伦敦。") == ["法国", "的", "首都", "是", "伦敦", "。"]
    assert words("不对，法国的首都是巴黎。") == ["不对", "，", "法国", "的", "首都", "是", "巴黎", "。"]


def test_english_and_mixed():
    assert words("No, the capital of France is Paris.") == ["No", ",", "the", "capital", "of", "France", "is", "Paris", "."]
    assert words("苹果公司发布了iPhone 15。") == ["苹果公司", "发布", "了", "iPhone", "15", "。"]
    assert words("don't use 3.14 or e-mail") == ["don't", "use", "3.14", "or", "e-mail"]
    assert words("水在100度沸腾。")[1:] == ["100", "度", "沸腾", "。"]


def test_emoji_sequences_stay_whole():
    assert words("好 👍🏽 👨‍👩‍👧 🇫🇷 ❤️") == ["好", "👍🏽", "👨‍👩‍👧", "🇫🇷", "❤️"]


@pytest.mark.parametrize("text", ["", " ", "\t\n  \u3000"])
def test_empty_and_whitespace(text):
    assert tokenize(text) == []


def test_long_text_is_rejected_clearly():
    with pytest.raises(ValueError, match="max_chars"):
        tokenize("a" * 30_000)
    assert len(tokenize("法国的首都是巴黎。" * 500, max_chars=5000)) > 1000  # 4,500 chars is fine


def test_non_string_is_rejected():
    with pytest.raises(TypeError):
        tokenize(None)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80) | st.text(alphabet="法国的首都是伦敦巴黎。，不对 abcXYZ 123!?👍🏽\u200d\t", max_size=60))
def test_offsets_cover_the_text(text):
    toks = tokenize(text)
    last = 0
    for t in toks:
        assert isinstance(t, Token)
        assert text[t.start:t.end] == t.text
        assert t.start >= last and t.end > t.start
        assert t.text.strip() != ""
        last = t.end
    # everything not covered is whitespace or a lone modifier-free gap
    covered = set()
    for t in toks:
        covered.update(range(t.start, t.end))
    for k, ch in enumerate(text):
        if k not in covered:
            assert ch.isspace() or not ch.isprintable() or ch in "\u200d"


def test_map_and_move_values():
    ws = [Token("法国", 0, 2), Token("的", 2, 3), Token("伦敦", 3, 5)]
    subs = [Token("", 0, 0), Token("法", 0, 1), Token("国", 1, 2), Token("的", 2, 3),
            Token("伦敦", 3, 5), Token("伦敦", 3, 5)]
    mp = map_subtokens_to_words(ws, subs)
    assert mp.tolist() == [-1, 0, 0, 1, 2, 2]
    v = np.array([1.0, 0.5, -1.0])
    assert words_to_subtokens(v, mp, "first").tolist() == [0, 1, 0, 0.5, -1, 0]
    assert words_to_subtokens(v, mp, "spread").tolist() == [0, 1, 1, 0.5, -1, -1]
    split = words_to_subtokens(v, mp, "split")
    assert split.tolist() == [0, 0.5, 0.5, 0.5, -0.5, -0.5]
    assert np.isclose(split.sum(), v.sum())
    back = subtokens_to_words(words_to_subtokens(v, mp, "spread"), ws, subs, "mean")
    assert back.tolist() == v.tolist()
    assert subtokens_to_words(split, ws, subs, "sum").tolist() == v.tolist()
    with pytest.raises(ValueError):
        words_to_subtokens(v, mp, "bogus")


def test_subtokens_straddling_words():
    """e5 cuts 首都是 as 首 | 都是: 都是 belongs to 首都 (first overlap) but also feeds 是."""
    ws = [Token("首都", 0, 2), Token("是", 2, 3), Token("伦敦", 3, 5)]
    subs = [Token("首", 0, 1), Token("都是", 1, 3), Token("伦敦", 3, 5)]
    assert map_subtokens_to_words(ws, subs).tolist() == [0, 0, 2]
    assert [x.tolist() for x in word_subtoken_overlaps(ws, subs)] == [[0, 1], [1], [2]]
    vals = np.array([1.0, 3.0, -2.0])
    assert subtokens_to_words(vals, ws, subs, "mean").tolist() == [2.0, 3.0, -2.0]
    assert subtokens_to_words(vals, ws, subs, "first").tolist() == [1.0, 3.0, -2.0]
    assert np.isnan(subtokens_to_words(vals, ws + [Token("x", 9, 10)], subs)[3])
