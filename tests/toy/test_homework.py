"""The homework personas: acceptance against hand-written replies (accepted and rejected, English and Chinese), the
scripted users' flow, and the student never writing a number in a complaint (property test)."""
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from claw_lib.config import HOMEWORK_PERSONAS
from claw_lib.text.phrases import HOMEWORK_THANKS, NUMBER_WORDS_EN, ZH_NUMERALS
from claw_lib.toy.gsm8k import Problem
from claw_lib.toy.homework import (AI_STYLE_MARKERS, HOMEWORK_LANGS, HomeworkUser, accepts, ai_style_markers, checks,
                                   opening, preference, work_steps)

PROBLEM = Problem(0, "Carol has 20 signatures and Jennifer has 44. They want 100 together. How many more do they "
                     "need?", "36")

# a typical instruct model's answer: numbered list, bold, \boxed, "Final answer:"
AI_EN = """To solve this, follow these steps:

1. **Signatures so far**: 20 + 44 = 64
2. **Still needed**: 100 - 64 = 36

**Final answer:** \\boxed{36}"""
AI_ZH = """### 解题步骤

- 已有签名：20 + 44 = 64
- 还需要：100 - 64 = 36

最终答案：\\(\\boxed{36}\\)"""
PLAIN_EN = ("Carol has 20 and Jennifer has 44, so together they have 20 + 44 = 64 signatures. They want 100, "
            "so they still need 100 - 64 = 36 more.")
PLAIN_ZH = "卡罗尔有20个签名，珍妮弗有44个，她们一共有20 + 44 = 64个。目标是100个，所以还需要100减64等于36个签名。"
TEACHER_EN = "Great question! " + PLAIN_EN + " Keep it up!"
TEACHER_ZH = "好问题！" + PLAIN_ZH + "继续加油！"
FIRST_EN = "They need 36 more signatures. Together they have 20 + 44 = 64, and 100 - 64 = 36."
FIRST_ZH = "答案是36个。她们一共有20 + 44 = 64个签名，100 - 64 = 36。"
LATEX_EN = "They have $20 + 44 = 64$ and need $100 - 64 = 36$, so \\(36\\) more."
ANSWER_ONLY = "They need 36 more."

# (persona, reply, accepted): each persona's hand-written accepted and rejected replies, English and Chinese
CASES = [
    ("student", PLAIN_EN, True), ("student", PLAIN_ZH, True), ("student", AI_EN, False), ("student", AI_ZH, False),
    ("student", ANSWER_ONLY, False), ("student", "Sure!\n\n| step | value |\n|---|---|\n| 20 + 44 | 64 |", False),
    ("student", "Total: 20 + 44 = 64\n---\n100 - 64 = 36", False),
    ("student", "They need 100 minus 64, which is 36, after adding 20 plus 44.", True),  # worded steps count
    ("teacher", TEACHER_EN, True), ("teacher", TEACHER_ZH, True), ("teacher", PLAIN_EN, False),
    ("teacher", "Great question! " + PLAIN_EN, False), ("teacher", PLAIN_EN + " Keep it up!", False),
    ("teacher", "好问题！" + PLAIN_ZH, False), ("teacher", "Great question! Keep it up!", False),
    ("teacher", "This is a good one. " + PLAIN_EN + " Well done!", False),  # no opener phrase in the opening
    ("answer_first", FIRST_EN, True), ("answer_first", FIRST_ZH, True), ("answer_first", PLAIN_EN, False),
    ("answer_first", PLAIN_ZH, False), ("answer_first", "The answer is 35. Together 20 + 44 = 64 and 100 - 64 = 36.",
                                        False), ("answer_first", ANSWER_ONLY, False),
    ("no_latex", PLAIN_EN, True), ("no_latex", PLAIN_ZH, True), ("no_latex", "It costs $20 + $44 = $64, then "
                                                                               "$100 - $64 = $36.", True),
    ("no_latex", LATEX_EN, False), ("no_latex", AI_ZH, False), ("no_latex", "20 \\times 3 = 60 and 60 + 4 = 64", False),
    ("chinese", PLAIN_ZH, True), ("chinese", FIRST_ZH, True), ("chinese", PLAIN_EN, False),
    ("chinese", "答案是36。", False), ("chinese", "The signatures 签名 are 20 + 44 = 64 and 100 - 64 = 36.", False),
]


@pytest.mark.parametrize("persona, reply, accepted", CASES)
def test_acceptance_against_hand_written_replies(persona, reply, accepted):
    assert accepts(persona, reply) is accepted, checks(persona, reply)


def test_every_persona_has_accepted_and_rejected_cases_in_both_languages():
    zh = re.compile(r"[\u4e00-\u9fff]")
    for persona in HOMEWORK_PERSONAS:
        got = {(a, bool(zh.search(r))) for p, r, a in CASES if p == persona}
        assert {(True, False), (True, True), (False, False), (False, True)} <= got or persona == "chinese", persona
    assert {(a, bool(zh.search(r))) for p, r, a in CASES if p == "chinese"} >= {(True, True), (False, False),
                                                                                (False, True)}


def test_the_student_reads_reefs_markers_by_name():
    assert ai_style_markers(AI_EN) == ["bold", "numbered_list", "boxed", "final_answer_label"]
    assert ai_style_markers(AI_ZH) == ["header", "bullets", "boxed"]
    assert ai_style_markers(PLAIN_EN) == [] and set(AI_STYLE_MARKERS) == {
        "bold", "header", "bullets", "numbered_list", "boxed", "final_answer_label", "rule_or_table"}
    assert checks("student", AI_EN) == {"no_ai_style": False, "shows_work": True}


@pytest.mark.parametrize("reply, steps", [
    (PLAIN_EN, 2), (PLAIN_ZH, 2), (ANSWER_ONLY, 0), ("150 meters x $194/meter", 1),
    ("20 (Carol) + 44 (Jennifer) = 64", 1), ("It has 20 pages.\n44 more pages", 0),  # a line break never bridges
    ("40 divided by 8 equals 5, and 5 times 2 equals 10", 2),
])
def test_work_steps(reply, steps):
    assert work_steps(reply) == steps


def test_opening_is_the_first_sentence_or_line():
    assert opening("They need 36. Then 20 + 44 = 64.") == "They need 36."
    assert opening("Costs $1.50 each! So") == "Costs $1.50 each!"
    assert opening("答案是36。过程如下") == "答案是36。"
    assert opening("x" * 300) == "x" * 120


def test_preferences_are_stated_in_both_languages_and_refuse_others():
    for persona in HOMEWORK_PERSONAS:
        for lang in HOMEWORK_LANGS:
            assert preference(persona, lang)
    with pytest.raises(ValueError, match="lang must be one of"):
        preference("student", "fr")
    with pytest.raises(ValueError, match="persona must be one of"):
        checks("lazy", "x")
    with pytest.raises(ValueError, match="persona must be one of"):
        HomeworkUser("lazy")


# --------------------------------------------------------------------------- the scripted flow
def test_the_student_complains_then_is_satisfied_and_ends_the_session():
    u = HomeworkUser("student", "en", seed=0)
    first = u.ask(PROBLEM)
    assert PROBLEM.question in first and first.index(PROBLEM.question) > 0
    r = u.react(PROBLEM, AI_EN)
    assert not r.accepted and not r.done
    assert all(w in r.text for w in ("bold text", "numbered list", "boxed", "'final answer' label"))
    assert "keep all the" in r.text and ("rewrite" in r.text or "redo" in r.text)
    r = u.react(PROBLEM, ANSWER_ONLY)
    assert not r.accepted and "show how you got it" in r.text and "bold" not in r.text
    r = u.react(PROBLEM, PLAIN_EN)
    assert r.accepted and r.done and r.text in HOMEWORK_THANKS["en"]


def test_each_persona_restates_its_preference_until_satisfied():
    for persona, good in (("teacher", TEACHER_ZH), ("answer_first", FIRST_ZH), ("no_latex", PLAIN_ZH),
                          ("chinese", PLAIN_ZH)):
        u = HomeworkUser(persona, "zh")
        bad = u.react(PROBLEM, AI_EN if persona != "chinese" else PLAIN_EN)
        assert not bad.accepted and preference(persona, "zh") in bad.text
        assert u.react(PROBLEM, good).done


def test_the_same_seed_gives_the_same_session():
    a, b = HomeworkUser("student", "zh", seed=3), HomeworkUser("student", "zh", seed=3)
    assert [a.ask(PROBLEM), a.react(PROBLEM, AI_ZH).text] == [b.ask(PROBLEM), b.react(PROBLEM, AI_ZH).text]


# --------------------------------------------------------------------------- never a number in a complaint
_NUMBER_WORD = re.compile(r"\b(" + "|".join(NUMBER_WORDS_EN) + r")\b", re.I)
_ZH_NUMERAL = re.compile("[" + "".join(ZH_NUMERALS) + "]")
_MARKUP = st.sampled_from(["**bold**", "# Title", "- item", "1. step", "\\boxed{7}", "Final answer: 7", "---",
                           "| a | b |", "20 + 44 = 64", "100 - 64 = 36", "Great question!", "Keep it up!",
                           "答案是36。", "\\frac{1}{2}", "They need 36.", "so", "\n"])


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(HOMEWORK_PERSONAS), st.sampled_from(HOMEWORK_LANGS), st.integers(0, 10 ** 6),
       st.lists(_MARKUP, max_size=8), st.text(max_size=40))
def test_no_complaint_or_thanks_ever_writes_a_number(persona, lang, seed, pieces, noise):
    """Whatever the reply (markup, numbers, noise), the user's message after it has no digit, no English number
    word and no Chinese numeral character: the user never writes the maths."""
    reply = " ".join(pieces) + noise
    text = HomeworkUser(persona, lang, seed).react(PROBLEM, reply).text
    assert text and not re.search(r"\d", text), text
    assert not _NUMBER_WORD.search(text) and not _ZH_NUMERAL.search(text), text


def test_no_phrase_of_the_homework_tables_writes_a_number():
    """Every piece a homework user's message is built from (claw_lib.text.phrases), exhaustively: what it says after
    a reply is a join of these, so none of it can hold a number."""
    from claw_lib.text import phrases as ph

    pieces = [t.replace("{problem}", "") for v in ph.HOMEWORK_ASKS.values() for t in v]
    pieces += [w for d in ph.AI_STYLE_WORDS.values() for w in d.values()]
    pieces += [t for v in ph.STUDENT_COMPLAINTS.values() for t in v] + list(ph.NO_WORK_COMPLAINTS.values())
    pieces += [w for d in ph.PERSONA_PREFERENCES.values() for w in d.values()]
    pieces += [t for v in ph.HOMEWORK_THANKS.values() for t in v]
    assert len(pieces) == 4 + 14 + 4 + 2 + 10 + 4
    for text in pieces:
        assert not re.search(r"\d", text) and not _NUMBER_WORD.search(text) and not _ZH_NUMERAL.search(text), text
