"""Every phrase the kit says or listens for, in one table (notebooks 05a, 06, 07).

The toy world's users *say* these (corrections, thanks, vague complaints, asides, style
instructions) and the pre-training corpus teaches them to the tiny GPT; the correction cleaner
(:mod:`claw_lib.text.corrections`) and the rule judge (:mod:`claw_lib.signals.judges`) *listen* for
them. Keeping both sides here makes a mismatch visible: ``tests/test_phrases.py`` checks that
every reply a simulated user can produce is read the way it is meant (a correction as -1 with a
hint, thanks as +1 without one, a vague complaint as -1 without one).

Rules, not a model: they cover the kit's users and probe set; extend them here.
"""
from __future__ import annotations

import re
from typing import Dict, Tuple

__all__ = [
    "CORRECTION_LEADS", "THANKS", "STYLE_THANKS", "VAGUE_REPLIES", "ASIDES", "STYLE_HINTS",
    "LEADIN_WORDS", "ASIDE_STARTS", "AFFIRM_ZH", "AFFIRM_EN", "NEGATIVE_MARKERS", "POSITIVE_MARKERS",
    "POSITIVE_START_ZH", "VAGUE_MARKERS", "HINT_LEADS", "hint_lead", "with_lead", "TOOL_ERROR_PREFIXES", "is_tool_error",
]

# --------------------------------------------------------------------------- what users say
#: how a user starts a correction, before the right answer: "不对，法国的首都是巴黎。"
CORRECTION_LEADS: Dict[str, Tuple[str, ...]] = {
    "zh": ("不对，", "错了，", "你说的不对，"),
    "en": ("No, ", "Wrong, ", "That's not right, "),
}
#: the correcting user's thanks for a right answer
THANKS: Dict[str, Tuple[str, ...]] = {
    "zh": ("谢谢！", "对，谢谢。", "好的，明白了。"),
    "en": ("Thanks!", "Right, thank you.", "Got it, thanks."),
}
#: a style user's thanks for an answer that meets every preference
STYLE_THANKS: Dict[str, str] = {"zh": "很好，就是这样！", "en": "Great, exactly like that!"}
#: something is wrong, but not what (Binary RL: -1; OPD: no hint)
VAGUE_REPLIES: Dict[str, Tuple[str, ...]] = {
    "zh": ("不太对吧。", "好像不对。"),
    "en": ("Hmm, that doesn't look right.", "I don't think so."),
}
#: irrelevant clauses a user adds after a correction ({subject}: the country asked about)
ASIDES: Dict[str, Tuple[str, ...]] = {
    "zh": ("另外{subject}的菜也很好吃。", "另外今天天气不错。"),
    "en": (" Also, the food in {subject} is great.", " Also, nice weather today."),
}
#: style -> (zh instruction, en instruction): what the style users ask for, and what the tiny GPT
#: learns to follow in its pre-training
STYLE_HINTS: Dict[str, Tuple[str, str]] = {
    "friendly": ("请先说“好问题！”，完整回答后再说“继续加油！”",
                 'Start with "Good question!", answer in a full sentence, then say "Keep it up!"'),
    "casual": ("别太正式，只说答案，不要句号。", "Be casual: just the answer, no full stop."),
}

# --------------------------------------------------------------------------- what the cleaner listens for
#: lead-ins dropped before aligning a correction ("不对，" / "No, "), longest first
LEADIN_WORDS: Dict[str, Tuple[str, ...]] = {
    "zh": tuple(sorted(["你说的不对", "你说得不对", "说的不对", "说得不对", "不对", "错了", "不是的", "不正确",
                        "有误", "好像不对", "不太对吧", "不太对", "不对吧", "错了吧"], key=len, reverse=True)),
    "en": tuple(sorted(["that's not right", "that is not right", "that's wrong", "that is wrong", "not quite",
                        "no", "nope", "wrong", "incorrect", "hmm", "i don't think so",
                        "that doesn't look right", "doesn't look right"], key=len, reverse=True)),
}
#: a clause starting with one of these is an aside and is dropped (with the rest of its sentence)
ASIDE_STARTS: Dict[str, Tuple[str, ...]] = {
    "zh": ("另外", "还有", "顺便", "对了", "此外", "不过"),
    "en": ("also", "by the way", "btw", "besides", "anyway", "and also"),
}
#: a short clause starting like this confirms the answer ("对，谢谢！", "Thanks, that's right.")
AFFIRM_ZH = re.compile(r"^(对|没错|正确|是的|好的|谢谢|对的|很好|明白了|就是这样)")
AFFIRM_EN = re.compile(r"^(yes|right|correct|thanks|thank you|exactly|great|got it|that's right)\b", re.I)

# --------------------------------------------------------------------------- what the rule judge listens for
#: a correction or a restated preference (-1); English markers match at the start or after a space
NEGATIVE_MARKERS: Dict[str, Tuple[str, ...]] = {
    "zh": ("不对", "错了", "不是", "不正确", "有误", "别", "不要", "请先", "请"),
    "en": ("no,", "no.", "wrong", "not right", "incorrect", "that's not", "be casual", "start with", "don't", "please"),
}
#: thanks or a confirmation (+1); English markers match as whole words
POSITIVE_MARKERS: Dict[str, Tuple[str, ...]] = {
    "zh": ("谢谢", "没错", "很好", "就是这样", "明白了", "好的"),
    "en": ("thanks", "thank you", "right", "great", "exactly", "got it", "correct"),
}
#: "对，" at the start of a Chinese reply, never the 对 of 不对
POSITIVE_START_ZH = re.compile(r"^(对|是的|正确)[，,。.！!]?")
#: vague complaints (-1, no hint), matched anywhere (case-folded)
VAGUE_MARKERS: Tuple[str, ...] = ("不太对吧", "好像不对", "hmm", "i don't think so", "doesn't look right")
#: dropped lead-ins that the rule judge's hint keeps, as :func:`hint_lead` writes them
HINT_LEADS: Tuple[str, ...] = ("不对", "错了", "你说的不对", "no", "wrong")


#: how a tool's output starts when the call failed (the toy world's lookup tool writes these)
TOOL_ERROR_PREFIXES: Tuple[str, ...] = ("Error:", "错误：")


def is_tool_error(text: str) -> bool:
    """Does a tool's output report an error (it starts with one of :data:`TOOL_ERROR_PREFIXES`)?"""
    return (text or "").lstrip().startswith(TOOL_ERROR_PREFIXES)


def with_lead(lead: str, answer: str, lang: str) -> str:
    """``lead`` + ``answer``; in English the answer's first letter is lower-cased ("No, the ...")."""
    return lead + answer if lang == "zh" else lead + answer[0].lower() + answer[1:]


def hint_lead(lang: str) -> str:
    """The lead-in the rule judge's hints and the pre-training corrections start with."""
    return CORRECTION_LEADS[lang][0]
