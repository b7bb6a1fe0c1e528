"""The readings of a free correction against a long output (issue 23): sentences, clauses, words quoted to be
rejected, polarity, swaps. Hand-written cases, none of them from the probe sets."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from claw_lib.text.claims import clause_spans, polarity_flips, quoted_spans, sentence_spans, swap_items
from claw_lib.text.tokens import tokenize


def texts(text, spans):
    return [text[a:b] for a, b in spans]


@pytest.mark.parametrize("text, expected", [
    ("月球是卫星。它离地球约38万公里！对吗？", ["月球是卫星。", "它离地球约38万公里！", "对吗？"]),
    ("Pi is about 3.14. Use xs.sort() to sort!", ["Pi is about 3.14.", "Use xs.sort() to sort!"]),
    ("It was written by J. R. R. Tolkien. Dr. Watson agrees.", ["It was written by J. R. R. Tolkien.",
                                                                 "Dr. Watson agrees."]),
    ("光速约每秒30万公里。Light is fast.", ["光速约每秒30万公里。", "Light is fast."]),
    ("", []), ("   ", []), ("no end", ["no end"]),
])
def test_sentence_spans_by_hand(text, expected):
    assert texts(text, sentence_spans(text)) == expected


def test_clause_spans_split_sentences_at_commas():
    t = "Cairo, and it's over 100 million people."
    assert texts(t, clause_spans(t)) == ["Cairo,", "and it's over 100 million people."]
    t = "十五万公里不对，平均距离大概是38万公里。"
    assert texts(t, clause_spans(t)) == ["十五万公里不对，", "平均距离大概是38万公里。"]


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("月球是卫星。它离地约38万公里！？ab.c, J.R") + [" ", "\n"]), max_size=40))
def test_sentences_and_clauses_cover_the_text_in_order(text):
    """Every non-space character lies in exactly one sentence and one clause; spans are ordered and stripped."""
    for spans in (sentence_spans(text), clause_spans(text)):
        last = 0
        for a, b in spans:
            assert last <= a < b and text[a:b] == text[a:b].strip()
            last = b
        covered = {k for a, b in spans for k in range(a, b)}
        assert all(k in covered for k, ch in enumerate(text) if not ch.isspace())


@pytest.mark.parametrize("correction, quoted", [
    ("十五万公里不对，平均距离大概是38万公里。", ["十五万"]),
    ("1592差了一百年，应该是1492年。", ["1592"]),
    ("大英博物馆？不是吧，它在巴黎的卢浮宫。", ["大英博物馆"]),
    ("声音在空气里大约每秒340米，你说的一千五百米是水里的速度。", ["一千五百米"]),
    ("12月怎么会是夏天呢，是6月。", ["12"]),
    ("1913 is ten years too late, it was 1903.", ["1913"]),
    ("Bach didn't write it, Vivaldi did.", ["Bach"]),
    ("You said 36 at first, but adults have 32.", ["36"]),
    ("The year is wrong: it was 1945.", ["year"]),
    # not quotes: a plain statement, "off the coast", a denial with no one else named, a bare value
    ("Honey never spoils because it contains very little water.", []),
    ("Honey doesn't spoil, it is too acidic.", []),
    ("The Great Barrier Reef is off the coast of Australia, not Brazil.", []),
    ("应该是34个。", []), ("Edinburgh.", []), ("", []),
])
def test_quoted_spans(correction, quoted):
    assert texts(correction, quoted_spans(correction)) == quoted


@pytest.mark.parametrize("output, correction, flipped", [
    ("声音在空气中每秒约传播340米。在真空中声音也能传播。", "不能。", ["能"]),
    ("Snakes have no ears. They can blink, like lizards.", "They can't, that clear scale is why.", ["can"]),
    ("Zero is not an even number. Even numbers divide by 2.", "Even.", ["not"]),
    ("鸵鸟不会飞。它跑得很快。", "鸵鸟会飞吗？它不会。", []),  # the correction denies too: nothing turns round
    ("The smallest prime number is 1.", "2 is the smallest prime; 1 isn't prime at all.", []),  # "is" is no modal
    ("It never rains here. The sky is blue.", "The sky is grey.", []),  # "never rains": the correction says no "rains"
])
def test_polarity_flips(output, correction, flipped):
    toks = tokenize(output)
    assert [toks[i].text for i in polarity_flips(toks, correction, output)] == flipped


@pytest.mark.parametrize("output, correction, swapped", [
    ("关机以后，内存里的数据会保留，硬盘里的数据会丢失。所以文件要保存到硬盘上。", "内存和硬盘说反了。", ["内存", "硬盘"]),
    ("White blood cells carry oxygen. Red blood cells fight infections.", "Red and white are mixed up.",
     ["White", "Red"]),
    ("Stalagmites hang down. Stalactites grow up.", "Those two are swapped.", []),  # names nothing: cannot place it
    ("自然常数e约等于2.178。", "你把数字写反了，e约等于2.718。", []),  # the cue's clause names only 数字
    ("The capital of France is London.", "No, it is Paris.", None),  # no swap at all
])
def test_swap_items(output, correction, swapped):
    toks = tokenize(output)
    got = swap_items(toks, correction)
    assert (None if got is None else [toks[i].text for i in got]) == swapped
