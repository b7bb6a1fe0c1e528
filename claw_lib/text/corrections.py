"""Reading a user's correction before aligning it (notebook 07).

* :func:`clean_correction` keeps the corrective clauses of a noisy reply and drops lead-ins
  ("不对，", "No,") and asides ("另外法国红酒也不错。", "Also, ..."); it also says whether the
  reply is a plain affirmation ("对，谢谢！", "Thanks, that's right.") with nothing to correct.
* :func:`negated_spans` finds what a correction explicitly rejects: "不是北京", "而不是鱼",
  "Not Berlin", "not Africa". Every encoder pairs the output's 北京 with the correction's repeated
  北京 and would reward it; the reward strategies mark output words that match a negated word as
  rejected instead.

* :func:`word_kind` sorts a word into punct / function / number / code / name / content, and
  :func:`value_key` gives what must be equal for two numbers, codes or names to be the same
  ("1946" vs "1945", "HNO2" vs "HNO3", "二十个" vs "二十四个" differ however close their
  embeddings are): the evidence rules of :mod:`claw_lib.signals.rewards` use both.
* :func:`invert_copula` turns a reordered correction round ("Jupiter is the largest planet" ->
  "the largest planet is Jupiter"; "巴黎才是首都" -> "首都才是巴黎") so that an order-preserving
  alignment can pair it with the output.

Rules, not a model: the phrases they listen for are in :mod:`claw_lib.text.phrases`, beside the
phrases the kit's users say.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

from .memo import recall
from .phrases import (AFFIRM_EN, AFFIRM_ZH, ASIDE_STARTS, CONTRAST_MARKERS, COPULAS, FIRST_PERSON, FUNCTION_WORDS,
                      LEADIN_WORDS,
                      NUMBER_WORDS_EN, ZH_MEASURES, ZH_NUMERALS)
from .tokens import _get_jieba, tokenize

__all__ = ["CleanCorrection", "clean_correction", "negated_spans", "is_chinese", "guess_lang", "word_kind",
           "value_key", "EXACT_KINDS", "CONTENT_KINDS", "invert_copula"]

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
    affirmation: the reply confirms the answer and corrects nothing; dropped: removed clauses;
    affirmed: the reply starts with an affirmation ("对，", "Yes,") and nothing in it contrasts
    (no but / not / 不过 / 不是 ...): what follows elaborates, it does not correct."""

    original: str
    text: str
    spans: List[Tuple[int, int]]
    affirmation: bool
    dropped: List[str] = field(default_factory=list)
    affirmed: bool = False


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
    3. drop asides: clauses starting with 另外/还有/顺便/此外 or Also/By the way/Besides, and a sentence
       after the first kept clause that starts with 我 / I / My (:data:`FIRST_PERSON`: "Kilimanjaro. I have a
       poster of it." -> "Kilimanjaro.");
    4. an affirmation (对/谢谢/Thanks/Right ... with no other clause left) is flagged, not kept;
    5. if the kept text now ends with a comma (an aside was cut after it), it ends with a full stop.
    """
    if not isinstance(text, str):
        raise TypeError(f"correction must be a str, got {type(text).__name__}")
    zh = is_chinese(text)
    spans, dropped, affirm_only, in_aside, new_sentence = [], [], True, False, True
    for m in _CLAUSE.finditer(text):
        clause, start = m.group(), m.start()
        if not clause.strip():
            continue
        ends_sentence = clause.rstrip(" \t").endswith(_SENTENCE_END)
        starts_sentence, new_sentence = new_sentence, ends_sentence
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
        personal = starts_sentence and spans and (low.startswith(FIRST_PERSON["zh"]) or any(
            re.match(rf"{re.escape(a)}\b", low) for a in FIRST_PERSON["en"]))
        if personal or low.startswith(ASIDE_STARTS["zh"]) or any(
                re.match(rf"{re.escape(a)}\b", low) for a in ASIDE_STARTS["en"]):
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
    head = text.strip()
    low = head.casefold()
    contrast = any(mk in head for mk in CONTRAST_MARKERS["zh"]) if zh else any(
        re.search(rf"(?<![\w']){re.escape(mk)}(?![\w'])", low) for mk in CONTRAST_MARKERS["en"])
    affirmed = bool(head) and bool(AFFIRM_ZH.match(head) or AFFIRM_EN.match(head)) and not contrast
    return CleanCorrection(text, kept, spans, affirmation, dropped, affirmed)


_ZH_NEG = re.compile(r"(?:而不是|并不是|不是|并非|而非|不在|没有)([^，,。；;！!？?\s]+?)(?=[，,。；;！!？?]|$|，|而)")
_EN_NEG = re.compile(r"\b(?:not|isn't|is not|aren't|wasn't|never|rather than|instead of)\s+", re.I)
_EN_WORD = re.compile(r"[\w\-'’]+(?:\.[\w]+)*")


#: degree adverbs, skipped after a negation: "不是更低" rejects 低
_DEGREE = ("更", "最", "很", "较", "比较", "还", "太", "更加")


def _first_claim_zh(text: str, start: int, end: int):
    """The first word of text[start:end] that carries a claim (function words skipped), with the
    name parts joined to it by a middle dot (比尔·盖茨)."""
    toks = tokenize(text[start:end])
    for k, t in enumerate(toks):
        if word_kind(t.text) not in ("punct", "function") and t.text not in _DEGREE:
            e = t.end
            while k + 2 < len(toks) and toks[k + 1].text in ("·", "•") and toks[k + 1].start == e:
                e, k = toks[k + 2].end, k + 2
            return start + t.start, start + e
    return None


def _first_claim_en(text: str, pos: int):
    """After a negation at ``pos``: the first word that carries a claim (articles, prepositions
    and auxiliaries skipped: "not for relativity" -> relativity, "do not have a three-second
    memory" -> three-second) and the capitalised words that follow it (a name)."""
    for m in _EN_WORD.finditer(text, pos):
        if re.search(r"[,.;:!?]", text[pos:m.start()]):
            return None  # the clause ended first
        if word_kind(m.group()) not in ("punct", "function"):
            s, e = m.span()
            for nxt in _EN_WORD.finditer(text, e):
                if text[e:nxt.start()].strip() or not nxt.group()[0].isupper():
                    break
                e = nxt.end()
            return s, e
    return None


def negated_spans(text: str) -> List[Tuple[int, int]]:
    """Character spans of what ``text`` explicitly rejects.

    Chinese: the first word that carries a claim after 不是 / 而不是 / 并非 / 不在 / 没有, before
    the next punctuation mark ("不是北京，他去了上海。" -> 北京; "是哺乳动物，不是鱼" -> 鱼;
    "电话不是爱迪生发明的" -> 爱迪生; "不是因为相对论" -> 相对论).
    English: the first such word (or capitalised name) after not / isn't / never / rather than /
    instead of, articles, prepositions and auxiliaries skipped ("Not Berlin" -> Berlin; "in Asia,
    not Africa" -> Africa; "Not for relativity" -> relativity).
    Inside :func:`~claw_lib.text.memo.one_pair` each distinct text is read once.
    """
    return recall(_negated, text)


def _negated(text: str) -> List[Tuple[int, int]]:
    spans = []
    for m in _ZH_NEG.finditer(text):
        sp = _first_claim_zh(text, *m.span(1))
        if sp:
            spans.append(sp)
    for m in _EN_NEG.finditer(text):
        sp = _first_claim_en(text, m.end())
        if sp:
            spans.append(sp)
    return sorted(set(spans))


# --------------------------------------------------------------------------- word kinds
#: kinds whose words must be equal to be the same (a mismatch is a contradiction, whatever the cost)
EXACT_KINDS = frozenset({"number", "code", "name"})
#: kinds that carry a claim (a replacement between two of them can contradict)
CONTENT_KINDS = frozenset({"number", "code", "name", "content"})

_DIGITS = re.compile(r"^\d+(?:[.,:]\d+)*(?:s|%|st|nd|rd|th)?$", re.I)   # 42.195, 1960s, 3rd
_MATH = set("π²³√∑×÷^=+∞°")
_ZH_NUM_PREFIX = re.compile("^[" + "".join(ZH_NUMERALS) + "]+")
_NAME_TAGS = ("nr", "ns", "nt", "nz")


def _zh_number(s: str) -> Optional[int]:
    """The value of a run of Chinese numerals (二十四 -> 24, 七千万 -> 70000000), None if it is not one."""
    total, section, digit = 0, 0, None
    for ch in s:
        v = ZH_NUMERALS[ch]
        if v < 10:
            digit = v if digit is None else digit * 10 + v  # 一九四九 read digit by digit
        elif v < 10 ** 4:
            section += (1 if digit is None else digit) * v
            digit = None
        else:
            total = ((total + section + (digit or 0)) or 1) * v  # 万 alone is ten thousand
            section, digit = 0, None
    return total + section + (digit or 0)


@functools.lru_cache(maxsize=4096)
def _zh_is_name(word: str) -> bool:
    import jieba.posseg as pseg  # lazy: jieba loads on the first Chinese word (claw --help stays jieba-free)

    _get_jieba()
    tags = [p.flag for p in pseg.lcut(word)]
    return len(tags) == 1 and tags[0].startswith(_NAME_TAGS)


def word_kind(word: str) -> str:
    """"punct" (no letter or digit), "function" (:data:`~claw_lib.text.phrases.FUNCTION_WORDS`),
    "number" (digits, 1960s, English number words, Chinese numerals with a measure word: 二十四个, 万公里),
    "code" (letters with digits or maths signs, or a capital inside: HNO3, 2πr, x², KCl, list.length),
    "name" (a capitalised word; a Chinese word jieba tags as a person, place or organisation name)
    or "content" (any other word)."""
    w = word.strip()
    if not any(ch.isalnum() for ch in w):
        return "punct"
    low = w.casefold()
    if low in FUNCTION_WORDS["en"] or w in FUNCTION_WORDS["zh"]:
        return "function"
    m = _ZH_NUM_PREFIX.match(w)
    if _DIGITS.match(w) or low in NUMBER_WORDS_EN or m and (m.end() == len(w) or w[m.end():].lstrip("个") in ZH_MEASURES
                                                             or w[m.end():] == "个"):
        return "number"
    has_digit, has_alpha = any(ch.isdigit() for ch in w), any(ch.isalpha() and not is_chinese(ch) for ch in w)
    if (has_digit and (has_alpha or is_chinese(w))) or any(ch in _MATH for ch in w) or (
            has_alpha and not is_chinese(w) and (any(ch.isupper() for ch in w[1:]) or re.search(r"\w\.\w", w))):
        return "code"
    if is_chinese(w):
        return "name" if _zh_is_name(w) else "content"
    return "name" if w[0].isupper() else "content"


def value_key(word: str) -> str:
    """What must be equal for two words to say the same: a number's value (八 = 8 = eight,
    二十个 = 二十; 2,718 and 2.718 differ), else the case-folded word without a possessive or
    plural s ("Prizes" = "prize", "Earth's" = "earth")."""
    w = word.strip()
    low = w.casefold()
    if low in NUMBER_WORDS_EN:  # numbers: "value|measure word"
        return f"{NUMBER_WORDS_EN[low]}|"
    m = _ZH_NUM_PREFIX.match(w)
    if m:  # the value, and the measure word unless it is a plain counter (四个 = 四; 一年 != 一天)
        return f"{_zh_number(m.group())}|{w[m.end():].lstrip('个条只位块次种')}"
    if _DIGITS.match(w):
        return re.sub(r"(?:st|nd|rd|th)$", "", low) + "|"
    low = re.sub(r"['’]s$", "", low)
    if len(low) > 3 and low.endswith("s") and not low.endswith("ss") and low.isalpha():
        low = low[:-1]
    return low


_EN_CLAUSE = re.compile(r"[^,;.!?]+(?:\.(?=\d)[^,;.!?]*)*[,;.!?]*")
_ZH_CLAUSE = re.compile(r"[^，,；;。！!？?]+[，,；;。！!？?]*")


def _says_something(part: str) -> bool:
    return any(word_kind(t.text) in CONTENT_KINDS for t in tokenize(part))


def _invert_clause(clause: str, zh: bool) -> Optional[str]:
    inv = _invert_clause_raw(clause, zh)
    return inv if inv is not None and _both_sides(clause, zh) else None


def _both_sides(clause: str, zh: bool) -> bool:
    """Both sides of the copula carry a claim ("应该是64个" and "The year is off" do not turn round)."""
    body = clause.rstrip("，,；;。.！!？? ")
    if zh:
        for cop in COPULAS["zh"]:
            k = body.find(cop)
            if k > 0:
                return _says_something(body[:k]) and _says_something(body[k + len(cop):])
        return False
    m = re.search(r"\b(?:is|are|was|were)\b", body, re.I)
    return bool(m) and _says_something(body[:m.start()]) and _says_something(body[m.end():])


_LEADING_CONJ = re.compile(r"^\s*(?:(?:but|and|so|however|yet|though)\b,?\s*|(?:但是|但|不过|可是|而且|而)，?)", re.I)


def _invert_clause_raw(clause: str, zh: bool) -> Optional[str]:
    conj = _LEADING_CONJ.match(clause)  # "but the capital is Canberra" -> "but Canberra is the capital"
    if conj and conj.end() < len(clause.rstrip()):
        inv = _invert_clause_raw(clause[conj.end():], zh)
        return None if inv is None else clause[:conj.end()] + inv
    body = clause.rstrip("，,；;。.！!？? ")
    tail = clause[len(body):]
    if zh:
        if any(neg in body for neg in ("不是", "并不是", "而不是")):
            return None
        for cop in COPULAS["zh"]:
            k = body.find(cop)
            if k > 0 and k + len(cop) < len(body) and body.count(cop) == 1 and (cop != "是" or body.count("是") == 1):
                return body[k + len(cop):] + cop + body[:k] + tail
        return None
    words = body.split()
    hits = [k for k, x in enumerate(words) if x.casefold() in COPULAS["en"]]
    if len(hits) != 1 or hits[0] in (0, len(words) - 1) or re.search(r"\b(?:not|n't)\b", body, re.I):
        return None
    if hits[0] == 1 and words[0].casefold() in ("it", "they", "he", "she", "this", "that", "these", "those"):
        return None  # "it is Paris" has no second side to bring forward
    k = hits[0]
    lead = len(body) - len(body.lstrip())
    return body[:lead] + " ".join(words[k + 1:] + [words[k]] + words[:k]) + tail


def invert_copula(text: str) -> Optional[str]:
    """``text`` with every clause of the form "A is B" turned into "B is A" ("巴黎才是首都。" ->
    "首都才是巴黎。" (same words, so the two alignments' costs compare), "Jupiter is the largest planet." -> "the largest planet is Jupiter."); clauses
    with a negation or more than one copula stay as they are. None if no clause turns round."""
    zh = is_chinese(text)
    out, changed = [], False
    for m in (_ZH_CLAUSE if zh else _EN_CLAUSE).finditer(text):
        inv = _invert_clause(m.group(), zh)
        changed |= inv is not None
        out.append(inv if inv is not None else m.group())
    return "".join(out) if changed else None
