"""Reading a user's correction before aligning it (notebook 07).

* :func:`clean_correction` keeps the corrective clauses of a noisy reply and drops lead-ins
  ("不对，", "No,") and asides ("另外法国红酒也不错。", "Also, ..."); it also says whether the
  reply is a plain affirmation ("对，谢谢！", "Thanks, that's right.") with nothing to correct.
* :func:`negated_spans` finds what a correction explicitly rejects: "不是北京", "而不是鱼",
  "Not Berlin", "not Africa". Every encoder pairs the output's 北京 with the correction's repeated
  北京 and would reward it; the reward strategies mark output words that match a negated word as
  rejected instead.

Rules, not a model: the phrases they listen for are in :mod:`claw_lib.text.phrases`, beside the
phrases the kit's users say.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import List, Tuple

from .phrases import AFFIRM_EN, AFFIRM_ZH, ASIDE_STARTS, LEADIN_WORDS

__all__ = ["CleanCorrection", "clean_correction", "negated_spans", "is_chinese", "guess_lang"]

_CJK = re.compile(r"[\u3400-\u9fff]")
# a clause ends at these marks (kept with the clause)
_CLAUSE = re.compile(r"(?:[^，,。；;！!？?\n.]|\.(?=\S))+[，,。；;！!？?\n.]*")  # "3.14" stays whole

_SENTENCE_END = ("。", ".", "！", "!", "？", "?", "\n")
_EN_AFFIRM_MAX = 24  # longest English affirmation clause kept as one ("exactly like that" is 17 characters)


def is_chinese(text: str) -> bool:
    """True if the text contains CJK ideographs."""
    return bool(_CJK.search(text))


def guess_lang(*texts: str) -> str:
    """"zh" if any of the texts contains a CJK ideograph, else "en" (the kit's two languages)."""
    return "zh" if any(is_chinese(t) for t in texts) else "en"


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
    for w in LEADIN_WORDS["zh" if zh else "en"]:
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
        if low.startswith(ASIDE_STARTS["zh"]) or any(re.match(rf"{re.escape(a)}\b", low) for a in ASIDE_STARTS["en"]):
            dropped.append(clause)
            in_aside = not ends_sentence
            continue
        if cut == 0 and (AFFIRM_ZH.match(core) or AFFIRM_EN.match(core)) and len(core) <= (16 if zh else _EN_AFFIRM_MAX):
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
        AFFIRM_ZH.match(c.strip()) or AFFIRM_EN.match(c.strip()) for c in dropped)
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
