"""What a free correction says about a long output (notebook 10).

Real models answer in several sentences, and users correct one claim in their own words. Four
readings of a correction, each a rule (no model), each switched by a field of
:class:`~claw_lib.config.RewardConfig`:

* :func:`sentence_spans`: where the output's sentences are (。！？, or . ! ? before white space).
* :func:`quoted_spans` (``quotes``): words the correction names *in order to reject them*:
  "十五万公里不对", "1592差了一百年", "大英博物馆？不是吧", "你说的一千五百米是水里的速度",
  "Bach didn't write it", "1913 is ten years too late", "You said 36". Without this reading a
  quoted wrong value is matched (+0.5) because the correction repeats it.
* :func:`polarity_flips` (``polarity``): the correction denies what the output affirms ("不能。"
  against "声音也能传播"; "they can't" against "They can blink"), or affirms what the output denies
  ("Even." against "Zero is not an even number"): the output's verb or its negation is wrong.
* :func:`swap_items` (``swaps``): "内存和硬盘说反了", "You've got latitude and longitude mixed up":
  both named values are wrong where the output says them.

:func:`clause_spans` splits a correction into the clauses that each address one sentence
(:func:`claw_lib.signals.rewards.addressed_sentences` uses them).
"""
from __future__ import annotations

import re
from typing import List, Optional, Sequence, Tuple

from .corrections import CONTENT_KINDS, EXACT_KINDS, is_chinese, value_key, word_kind
from .memo import recall
from .tokens import Token, tokenize

__all__ = ["sentence_spans", "clause_spans", "quoted_spans", "polarity_flips", "swap_items", "SWAP_CUES"]

# a sentence ends after 。！？ (zh) or after . ! ? followed by white space or the end (en; "3.14", "xs.sort()"
# do not end one, nor the dot of an initial or a title: "J. R. R. Tolkien", "Dr. Watson", "Mt. Fuji")
_NOT_AN_END = r"(?<!\b[A-Z]\.)(?<!\bMr\.)(?<!\bMs\.)(?<!\bDr\.)(?<!\bSt\.)(?<!\bMt\.)(?<!\bvs\.)(?<!\bMrs\.)"
_END = re.compile(rf"(?<=[。！？])|(?<=[.!?]){_NOT_AN_END}(?=\s|$)")
_CLAUSE_END = re.compile(rf"(?<=[。！？，；：,;:])|(?<=[.!?]){_NOT_AN_END}(?=\s|$)")


def _spans(text: str, pattern: re.Pattern) -> List[Tuple[int, int]]:
    spans, pos = [], 0
    for piece in pattern.split(text):
        start = pos + (len(piece) - len(piece.lstrip()))
        end = pos + len(piece.rstrip())
        if end > start:
            spans.append((start, end))
        pos += len(piece)
    return spans


def sentence_spans(text: str) -> List[Tuple[int, int]]:
    """[start, end) character offsets of the sentences of a zh or en text, stripped of surrounding white
    space: "月球是卫星。它离地球约38万公里！" -> [(0, 6), (6, 18)]; "Pi is about 3.14. Use xs.sort()!" -> two;
    "It was written by J. R. R. Tolkien." -> one."""
    return _spans(text, _END)


def clause_spans(text: str) -> List[Tuple[int, int]]:
    """[start, end) of the clauses of a correction: sentences, further split at ，；： , ; : ("Cairo, and it's
    over 100 million people." -> "Cairo," and "and it's over 100 million people.")."""
    return recall(_clauses, text)


def _clauses(text: str) -> List[Tuple[int, int]]:
    return _spans(text, _CLAUSE_END)


# --------------------------------------------------------------------------- quoted to be rejected
_ZH_REJECT_AFTER = re.compile(
    r"(?:是?不对|是错的|错了|有误|不正确|说错了|写错了|差了|弄错了|搞错了|[？?]\s*(?:不是吧|不对吧|不对|错了)|怎么(?:会|可能)|不可能)")
_ZH_SAID = re.compile(r"你(?:说的|说|写的|写)")
_EN_REJECT_AFTER = re.compile(
    r"\s+(?:is|was|are|were) (?:wrong|incorrect|not right|(?:way )?off(?=\s*(?:by\b|[,.;!?]|$))|(?:[\w-]+ ){0,3}too "
    r"(?:late|early|high|low|big|small|many|few|much|long|short|far|old|young|hot|cold))\b"
    r"|\s*\?\s+(?:no|nope|not)\b", re.I)
#: "Bach didn't write it, Vivaldi did.": a denial whose subject is replaced later in the correction
_EN_DENIED_BY = re.compile(r"\s+(?:didn't|did not|doesn't|does not|wasn't|was not)\b", re.I)
_EN_SAID = re.compile(r"\byou(?:'ve)? (?:said|say|wrote|write|claimed|claim|got|have)\s+(?:that\s+|it's\s+|it is\s+)?",
                      re.I)
_EN_CLAUSE_STOP = re.compile(r"[,;.!?]|\s(?:but|and|which|because|so)\s", re.I)


def _claims(text: str, start: int, end: int, last: bool, exact_only: bool = False) -> List[Tuple[int, int]]:
    """The claim words of text[start:end]: its numbers, codes and names, else (unless ``exact_only``) its last
    (``last``) or first content word; spans in ``text``."""
    toks = [Token(t.text, t.start + start, t.end + start) for t in tokenize(text[start:end])]
    exact = [t for t in toks if word_kind(t.text) in EXACT_KINDS]
    if exact or exact_only:
        return [(t.start, t.end) for t in exact]
    content = [t for t in toks if word_kind(t.text) in CONTENT_KINDS]
    if not content:
        return []
    t = content[-1] if last else content[0]
    return [(t.start, t.end)]


def quoted_spans(correction: str) -> List[Tuple[int, int]]:
    """Character spans of ``correction`` that name something in order to reject it.

    Chinese: the clause before 不对 / 错了 / 有误 / 差了 / "？不是吧" / 怎么会 ("十五万公里不对" ->
    十五万; "1592差了一百年" -> 1592; "12月怎么会是夏天" -> 12月), and what follows 你说的 ("你说的一千五百米是水里的
    速度" -> 一千五百米). English: the words before "is wrong", "is off", "is ten years too late", "? No"
    ("1913 is ten years too late" -> 1913), the name or number before "didn't" / "doesn't" when another one
    follows ("Bach didn't write it, Vivaldi did." -> Bach; "Honey doesn't spoil" rejects nothing), and what follows "you
    said" up to the end of its clause ("You said 36 at first" -> 36). Numbers, codes and names of the quoted
    part are returned, else its nearest content word (after 你说的 / "you said": only numbers, codes and names;
    "You said they can blink" rejects "can", which :func:`polarity_flips` finds, not "blink").
    """
    out = []
    if is_chinese(correction):
        for m in _ZH_REJECT_AFTER.finditer(correction):
            head = correction[:m.start()].rstrip()
            cut = max([x.end() for x in re.finditer(r"[，,。；;！!：:]", head)], default=0)
            if head[cut:].strip():
                out += _claims(correction, cut, len(head), last=True)
        for m in _ZH_SAID.finditer(correction):
            rest = re.split(r"(?:是|不|其实|应该|[，,。；;！!？?])", correction[m.end():], maxsplit=1)[0]
            out += _claims(correction, m.end(), m.end() + len(rest), last=False, exact_only=True)
        return sorted(set(out))
    for m in _EN_REJECT_AFTER.finditer(correction):
        head = correction[:m.start()]
        cut = max([x.end() for x in _EN_CLAUSE_STOP.finditer(head)], default=0)
        out += _claims(correction, cut, m.start(), last=True)
    for m in _EN_DENIED_BY.finditer(correction):
        head = correction[:m.start()]
        cut = max([x.end() for x in _EN_CLAUSE_STOP.finditer(head)], default=0)
        denied = _claims(correction, cut, m.start(), last=True, exact_only=True)
        later = {value_key(correction[a:b]) for a, b in _claims(correction, m.end(), len(correction), last=True,
                                                                 exact_only=True)}
        if later - {value_key(correction[a:b]) for a, b in denied}:  # someone else did it: the subject is wrong
            out += denied
    for m in _EN_SAID.finditer(correction):
        stop = _EN_CLAUSE_STOP.search(correction, m.end())
        out += _claims(correction, m.end(), stop.start() if stop else len(correction), last=False, exact_only=True)
    return sorted(set(out))


# --------------------------------------------------------------------------- polarity
#: Chinese: a denied modal in the correction and the affirmed one the output says
_ZH_DENY = {"不能": "能", "不会": "会", "不可以": "可以", "没有": "有", "不可能": "可能", "不需要": "需要"}
_EN_DENY = {"can't": "can", "cannot": "can", "can not": "can", "couldn't": "could", "won't": "will"}
_ZH_NEGATORS = ("不", "没", "没有", "不是", "并非", "不会", "不能")
_EN_NEGATORS = ("not", "no", "never", "isn't", "aren't", "wasn't", "weren't", "doesn't", "don't", "didn't", "can't",
                "cannot", "won't")


def polarity_flips(output_tokens: Sequence[Token], correction: str, output: str) -> List[int]:
    """Indices of output tokens whose polarity the correction turns round.

    * the correction denies a modal the output affirms: "不能。" / "声音也能传播" -> 能; "they can't" /
      "They can blink" -> can (only modals: 能 会 可以 有 可能 需要, can could will; a denied "is" says which
      subject is wrong, not that the output's "is" is: "1 isn't prime" against "The smallest prime is 1");
    * the output denies a word the correction says without a negation: "Zero is not an even number" /
      "Even." -> not (the negation at most three words before the repeated word, in the same clause).
    """
    zh = is_chinese(correction) or is_chinese(output)
    low = correction.casefold()
    flips = []
    denied = [pos for neg, pos in (_ZH_DENY if zh else _EN_DENY).items()
              if (neg in correction if zh else re.search(rf"(?<![\w']){re.escape(neg)}(?![\w'])", low))]
    for k, t in enumerate(output_tokens):
        w = t.text if zh else t.text.casefold()
        if w in denied:
            before = output[max(0, t.start - 2):t.start] if zh else ""
            if not (zh and before.endswith(("不", "没"))):
                flips.append(k)
    negators = _ZH_NEGATORS if zh else _EN_NEGATORS
    if any(n in correction for n in ("不", "没")) if zh else any(
            re.search(rf"(?<![\w']){re.escape(n)}(?![\w'])", low) for n in _EN_NEGATORS):
        return sorted(set(flips))
    said = {value_key(t.text) for t in tokenize(correction) if word_kind(t.text) != "punct"}
    for k, t in enumerate(output_tokens):
        if (t.text if zh else t.text.casefold()) in negators:
            for nxt in output_tokens[k + 1:k + 4]:
                if word_kind(nxt.text) == "punct":
                    break  # the clause ended
                if value_key(nxt.text) in said and word_kind(nxt.text) != "function" or (
                        not zh and nxt.text.casefold() in said and nxt.text.casefold() not in ("a", "an", "the")):
                    flips.append(k)
                    break
    return sorted(set(flips))


# --------------------------------------------------------------------------- swaps
#: what a user says when two values are the wrong way round
SWAP_CUES = {
    "zh": ("说反了", "搞反了", "弄反了", "写反了", "反了", "颠倒了", "颠倒", "对调", "搞混了", "弄混了", "混淆了"),
    "en": ("swapped", "mixed up", "mixed them up", "backwards", "backward", "the wrong way round", "wrong way round",
           "the wrong way around", "other way round", "other way around", "flipped", "reversed", "switched",
           "the other way", "confused"),
}


def swap_items(output_tokens: Sequence[Token], correction: str) -> Optional[List[int]]:
    """None if the correction says nothing is swapped; else the indices of the output tokens that the clause
    saying so names as swapped ("你把数字写反了，e约等于2.718" names only 数字): the first place the output says each content word of the correction ("内存和硬盘说反了" -> the
    first 内存 and the first 硬盘 of the output; "Red and white are mixed up" -> Red, White). Fewer than two
    found: [] (a swap the rules cannot place: "Those two are swapped.")."""
    zh = is_chinese(correction)
    cues = SWAP_CUES["zh" if zh else "en"]
    clauses = [correction[a:b] for a, b in clause_spans(correction)]
    said = [c for c in clauses if any((x in c) if zh else re.search(rf"\b{re.escape(x)}\b", c.casefold()) for x in cues)]
    if not said:
        return None
    named = {value_key(t.text) for c in said for t in tokenize(c) if word_kind(t.text) in CONTENT_KINDS}
    first = {}
    for k, t in enumerate(output_tokens):
        if word_kind(t.text) in CONTENT_KINDS and value_key(t.text) in named:
            first.setdefault(value_key(t.text), k)
    return sorted(first.values()) if len(first) >= 2 else []
