"""Reading a correction: the kept clauses, affirmations, and what a correction negates."""
import pytest

from claw_lib.text.corrections import clean_correction, guess_lang, invert_copula, negated_spans, value_key, word_kind


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


@pytest.mark.parametrize("text, negated", [
    ("电话不是爱迪生发明的，是贝尔发明的。", ["爱迪生"]),          # the first word, not the rest of the clause
    ("不是因为相对论，是因为光电效应。", ["相对论"]),              # function words skipped
    ("Not for relativity, it was for the photoelectric effect.", ["relativity"]),
    ("No, goldfish do not have a three-second memory.", ["three-second"]),
    ("Honey never spoils because it contains very little water.", ["spoils"]),  # not the rest of the sentence
    ("It is on Wednesday, not Monday.", ["Monday"]),
    ("Not the Great Wall, he means the Forbidden City.", ["Great Wall"]),
    ("你说的是微软吧，不是比尔·盖茨。", ["比尔·盖茨"]),
    ("并非如此，金鱼能记住几个月前的事情。", []),                  # negates nothing that can be named
])
def test_negated_spans_name_one_claim(text, negated):
    assert [text[a:b] for a, b in negated_spans(text)] == negated


@pytest.mark.parametrize("word, kind", [
    ("，", "punct"), ("the", "function"), ("的", "function"), ("是", "function"),
    ("1946", "number"), ("2.718", "number"), ("1960s", "number"), ("eight", "number"), ("二十四个", "number"),
    ("八天", "number"), ("万公里", "number"), ("一起", "function"),
    ("HNO3", "code"), ("2πr", "code"), ("x²", "code"), ("KCl", "code"), ("list.length", "code"),
    ("Paris", "name"), ("伦敦", "name"), ("首都", "content"), ("vegetable", "content"),
])
def test_word_kind(word, kind):
    assert word_kind(word) == kind


def test_value_key_says_when_two_values_are_the_same():
    same = [("八", "8"), ("eight", "8"), ("四个", "四"), ("二十四", "24"), ("Prizes", "prize"), ("Earth's", "Earth"),
            ("万", "10000")]
    for a, b in same:
        assert value_key(a) == value_key(b), (a, b)
    for a, b in [("1946", "1945"), ("2.178", "2.718"), ("HNO2", "HNO3"), ("二十个", "二十四个"), ("一年", "一天"),
                 ("十个月", "十二个月")]:
        assert value_key(a) != value_key(b), (a, b)


@pytest.mark.parametrize("text, turned", [
    ("巴黎才是首都。", "首都才是巴黎。"),
    ("Jupiter is the largest planet in the solar system.", "the largest planet in the solar system is Jupiter."),
    ("2才是最小的质数，1不是质数。", "最小的质数才是2，1不是质数。"),   # the negated clause stays
    ("Spiders are not insects.", None), ("it is Paris.", None), ("8乘8，应该是64个。", None),
])
def test_invert_copula(text, turned):
    assert invert_copula(text) == turned


def test_affirmed_replies_elaborate_unless_something_contrasts():
    assert clean_correction("Correct, and at lower pressure it boils sooner.").affirmed
    assert clean_correction("是的，巴黎也是法国最大的城市。").affirmed
    assert not clean_correction("Right. But the capital is Paris.").affirmed
    assert not clean_correction("对，不过首都是巴黎。").affirmed
    assert not clean_correction("不对，法国的首都是巴黎。").affirmed
