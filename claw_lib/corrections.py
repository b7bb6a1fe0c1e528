"""Reading a user's correction before aligning it (notebook 07).

* :func:`clean_correction` keeps the corrective clauses of a noisy reply and drops lead-ins
  ("不对，", "No,") and asides ("另外法国红酒也不错。", "Also, ..."); it also says whether the
  reply is a plain affirmation ("对，谢谢！", "Thanks, that's right.") with nothing to correct.
* :func:`negated_spans` finds what a correction explicitly rejects: "不是北京", "而不是鱼",
  "Not Berlin", "not Africa". Every encoder pairs the output's 北京 with the correction's repeated
  北京 and would reward it; the reward strategies mark output words that match a negated word as
  rejected instead.

Rules, not a model: they cover the phrasings of the kit's users and probe set, and are listed
here so a reader can extend them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import List, Tuple

__all__ = ["CleanCorrection", "clean_correction", "negated_spans", "is_chinese"]

_CJK = re.compile(r"[\u3400-\u9fff]")
# a clause ends at these marks (kept with the clause)
_CLAUSE = re.compile(r"(?:[^，,。；;！!？?\n.]|\.(?=\S))+[，,。；;！!？?\n.]*")  # "3.14" stays whole

_ZH_LEADINS = sorted(["你说的不对", "你说得不对", "说的不对", "说得不对", "不对", "错了", "不是的", "不正确",
                      "有误", "好像不对", "不太对吧", "不太对", "不对吧", "错了吧"], key=len, reverse=True)
_EN_LEADINS = sorted(["that's not right", "that is not right", "that's wrong", "that is wrong", "not quite",
                      "no", "nope", "wrong", "incorrect", "hmm", "i don't think so",
                      "that doesn't look right", "doesn't look right"], key=len, reverse=True)
_SENTENCE_END = ("。", ".", "！", "!", "？", "?", "\n")
_ZH_ASIDES = ("另外", "还有", "顺便", "对了", "此外", "不过")
_EN_ASIDES = ("also", "by the way", "btw", "besides", "anyway", "and also")
_ZH_AFFIRM = re.compile(r"^(对|没错|正确|是的|好的|谢谢|对的|很好|明白了|就是这样)")
_EN_AFFIRM_MAX = 24  # longest English affirmation clause kept as one ("exactly like that" is 17 characters)
_EN_AFFIRM = re.compile(r"^(yes|right|correct|thanks|thank you|exactly|great|got it|that's right)\b", re.I)


def is_chinese(text: str) -> bool:
    """True if the text contains CJK ideographs."""
    return bool(_CJK.search(text))


@dataclass
class CleanCorrection:
    """text: the kept corrective clauses joined; spans: their (start, end) in the original;
    affirmation: the reply confirms the answer and corrects nothing; dropped: removed clauses."""

    original: str
    text: str
    spans: List[Tuple[int, int]]
    affirmation: bool
    dropped: List[str] = field(default_factory=list)


def _strip_leadin(clause: str, zh: bool) -> int:
    """Length of a lead-in ("不对，", "No, ") at the start of the clause, else 0."""
    c = clause.strip()
    lead = len(clause) - len(clause.lstrip())
    low = c.casefold()
    for w in (_ZH_LEADINS if zh else _EN_LEADINS):
        if low.startswith(w.casefold()):
            rest = c[len(w):]
            # English: a lead-in is followed by punctuation or ends the clause ("No, ..." / "Wrong!"),
            # so "no full stop" and "north" are left alone
            if zh or not rest.strip() or re.match(r"^\s*[,.!;:?]", rest):
                m = re.match(r"^[\s，,。.！!；;:：]*", rest)
                return lead + len(w) + (m.end() if m else 0)
    return 0


def clean_correction(text: str) -> CleanCorrection:
    """Keep the corrective clauses of ``text``.

    1. split into clauses at ，,。；;！!？? (punctuation stays with its clause);
    2. drop a clause that is only a lead-in (不对 / No / Wrong ...) and strip lead-ins at clause start;
    3. drop asides: clauses starting with 另外/还有/顺便/此外 or Also/By the way/Besides;
    4. an affirmation (对/谢谢/Thanks/Right ... with no other clause left) is flagged, not kept;
    5. if the kept text now ends with a comma (an aside was cut after it), it ends with a full stop.
    """
    if not isinstance(text, str):
        raise TypeError(f"correction must be a str, got {type(text).__name__}")
    zh = is_chinese(text)
    spans, dropped, affirm_only, in_aside = [], [], True, False
    for m in _CLAUSE.finditer(text):
        clause, start = m.group(), m.start()
        if not clause.strip():
            continue
        ends_sentence = clause.rstrip(" \t").endswith(_SENTENCE_END)
        if in_aside:  # an aside runs to the end of its sentence
            dropped.append(clause)
            in_aside = not ends_sentence
            continue
        cut = _strip_leadin(clause, zh)
        body = clause[cut:]
        core = body.strip(" \t，,。.！!；;？?\n")
        if not core:
            dropped.append(clause)
            continue
        low = core.casefold()
        if low.startswith(_ZH_ASIDES) or any(re.match(rf"{re.escape(a)}\b", low) for a in _EN_ASIDES):
            dropped.append(clause)
            in_aside = not ends_sentence
            continue
        if cut == 0 and (_ZH_AFFIRM.match(core) or _EN_AFFIRM.match(core)) and len(core) <= (16 if zh else _EN_AFFIRM_MAX):
            dropped.append(clause)
            continue
        affirm_only = False
        s = start + cut + (len(body) - len(body.lstrip()))
        spans.append((s, start + len(clause.rstrip())))
    # clauses that were adjacent in the text stay adjacent ('"Good question!", answer ...' keeps no space
    # after the "!"); clauses that had something dropped between them are joined by a space in English
    kept = "".join(("" if k == 0 or a == spans[k - 1][1] or zh else " ") + text[a:b] for k, (a, b) in enumerate(spans))
    if dropped and kept and kept[-1] in "，,；;":  # the sentence was cut after this clause: end it properly
        kept = kept[:-1] + ("。" if zh else ".")
    affirmation = affirm_only and bool(text.strip()) and any(
        _ZH_AFFIRM.match(c.strip()) or _EN_AFFIRM.match(c.strip()) for c in dropped)
    return CleanCorrection(text, kept, spans, affirmation, dropped)


_ZH_NEG = re.compile(r"(?:而不是|并不是|不是|并非|而非|不在|没有)([^，,。；;！!？?\s]+?)(?=[，,。；;！!？?]|$|，|而)")
_EN_NEG = re.compile(r"\b(?:not|isn't|is not|aren't|wasn't|never|rather than|instead of)\s+(?:the\s+|a\s+|an\s+|in\s+|at\s+|to\s+)?([\w\-']+(?:\s+[A-Z][\w\-']*)*)",
                     re.I)


def negated_spans(text: str) -> List[Tuple[int, int]]:
    """Character spans of what ``text`` explicitly rejects.

    Chinese: the words after 不是 / 而不是 / 并非 / 不在 / 没有, up to the next punctuation mark
    ("不是北京，他去了上海。" -> 北京; "是哺乳动物，不是鱼" -> 鱼).
    English: the word (or capitalised name) after not / isn't / rather than / instead of, with
    an optional article or preposition ("Not Berlin" -> Berlin; "in Asia, not Africa" -> Africa).
    """
    spans = []
    for m in _ZH_NEG.finditer(text):
        spans.append(m.span(1))
    for m in _EN_NEG.finditer(text):
        spans.append(m.span(1))
    return sorted(spans)
