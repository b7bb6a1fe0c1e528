"""Word-level tokens with character offsets, model sub-tokens, and the map between them (notebook 01).

Word level (what people read and what the alignment works on):

* Chinese runs (CJK ideographs) are cut into words by ``jieba`` (deterministic, HMM on);
* everything else is split by a regex into words (letters/digits, with inner apostrophes,
  hyphens and decimal points), single punctuation marks, and emoji sequences (ZWJ, skin tones
  and variation selectors kept together);
* whitespace and invisible characters (controls, zero-width marks) never become tokens.

Sub-token level (what a model acts on): the offsets a Hugging Face *fast* tokenizer returns.
:func:`map_subtokens_to_words` links the two, and :func:`words_to_subtokens` /
:func:`subtokens_to_words` move any per-token score between the levels.
"""
from __future__ import annotations

import logging
import re
import unicodedata
from dataclasses import dataclass
from typing import List, Sequence

import numpy as np

from .memo import recall

__all__ = [
    "Token", "tokenize", "subword_tokens", "map_subtokens_to_words", "word_subtoken_overlaps",
    "words_to_subtokens", "subtokens_to_words", "subtoken_spans", "MAX_TEXT_CHARS", "check_text",
]

#: Texts longer than this are rejected by :func:`tokenize` (override with ``max_chars``).
MAX_TEXT_CHARS = 20_000


@dataclass(frozen=True)
class Token:
    """A token of a text: ``text == source[start:end]`` (character offsets, end exclusive)."""

    text: str
    start: int
    end: int

    def to_dict(self) -> dict:
        return {"text": self.text, "start": self.start, "end": self.end}


_CJK = (
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
    "\U00020000-\U0002a6df\U0002a700-\U0002ebef\U00030000-\U0003134f"
)
_CJK_RUN = re.compile(f"[{_CJK}]+")
_EMOJI_MOD = "\u200d\ufe0e\ufe0f\u20e3\U0001f3fb-\U0001f3ff\U000e0020-\U000e007f"
_WORD = re.compile(
    r"[^\W_]+(?:[\'’\-\.][^\W_]+)*"                      # words, 3.14, don't, e-mail
    rf"|[\U0001F1E6-\U0001F1FF]{{2}}"                     # flags (regional indicator pairs)
    rf"|[^\w\s{_EMOJI_MOD}](?:[{_EMOJI_MOD}]+[^\w\s{_EMOJI_MOD}]?)*"  # punctuation / emoji seqs
    rf"|_|[{_EMOJI_MOD}]+"                                # stray modifiers, underscores
)

_jieba = None

#: Words added to jieba's dictionary so corrections split the way a reader splits them
#: (without these, 不对 -> 不/对 and 一百度 -> 一/百度 "Baidu").
KIT_WORDS = ("不对", "错了", "一百")


def _get_jieba():
    global _jieba
    if _jieba is None:
        import jieba  # lazy: jieba loads on the first Chinese text (claw --help stays jieba-free)

        jieba.setLogLevel(logging.WARNING)  # no "Building prefix dict" chatter in notebooks
        jieba.initialize()
        for w in KIT_WORDS:
            jieba.add_word(w, freq=100_000)
        _jieba = jieba
    return _jieba


def _invisible(s: str) -> bool:
    """Only control or format characters (\x08, zero-width space ...): not a word."""
    return all(unicodedata.category(ch) in ("Cc", "Cf") for ch in s)


def _split_non_cjk(text: str, offset: int, out: List[Token]) -> None:
    for mt in _WORD.finditer(text):
        if not _invisible(mt.group()):
            out.append(Token(mt.group(), offset + mt.start(), offset + mt.end()))


def check_text(text: str, max_chars: int = MAX_TEXT_CHARS) -> None:
    """Raise TypeError for a non-string and ValueError for a text longer than ``max_chars`` or one
    that is not valid Unicode (a lone surrogate such as "\\ud800" cannot be encoded)."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    if len(text) > max_chars:
        raise ValueError(
            f"a text has {len(text)} characters, more than the limit of {max_chars}; "
            "split it into paragraphs or raise the limit (max_chars, claw --max-chars)"
        )
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"a text holds a character that is not valid Unicode ({e.reason} at position {e.start})") from None


def tokenize(text: str, max_chars: int = MAX_TEXT_CHARS) -> List[Token]:
    """Split ``text`` into word-level :class:`Token` s with character offsets.

    Returns a list ordered by ``start``, non-overlapping, no whitespace tokens; ``[]`` for an
    empty or whitespace-only string. Mixed Chinese/English text is handled run by run.
    Raises ``TypeError`` for a non-string and ``ValueError`` for text longer than ``max_chars``.
    Inside :func:`claw_lib.text.memo.one_pair` each distinct text is split once.
    """
    check_text(text, max_chars)
    return recall(_split, text)


def _split(text: str) -> List[Token]:
    """The word tokens of a checked ``text`` (:func:`tokenize`)."""
    out: List[Token] = []
    pos = 0
    for run in _CJK_RUN.finditer(text):
        _split_non_cjk(text[pos:run.start()], pos, out)
        jb = _get_jieba()
        for word, s, e in jb.tokenize(run.group(), HMM=True):
            out.append(Token(word, run.start() + s, run.start() + e))
        pos = run.end()
    _split_non_cjk(text[pos:], pos, out)
    return out


def subword_tokens(text: str, tokenizer, add_special_tokens: bool = False) -> List[Token]:
    """Sub-tokens of ``text`` under a Hugging Face fast tokenizer, with character offsets.

    Byte-level BPE tokenizers may give several sub-tokens the same span (a Chinese character
    split into bytes); ``Token.text`` is then the spanned text, repeated.
    Returns one :class:`Token` per token id the tokenizer produces (special tokens included
    only if ``add_special_tokens``).
    """
    if not getattr(tokenizer, "is_fast", False):
        raise TypeError("subword_tokens needs a Hugging Face *fast* tokenizer (offset mapping)")
    enc = tokenizer(text, add_special_tokens=add_special_tokens, return_offsets_mapping=True)
    return [Token(text[s:e], int(s), int(e)) for s, e in enc["offset_mapping"]]


def map_subtokens_to_words(words: Sequence[Token], subtokens: Sequence[Token]) -> np.ndarray:
    """For each sub-token, the index of the word it overlaps most, or -1 if none.

    Returns an int64 array of shape (len(subtokens),). A sub-token that covers only whitespace
    or a special token (empty span) maps to -1.
    """
    out = np.full(len(subtokens), -1, dtype=np.int64)
    starts = np.array([w.start for w in words], dtype=np.int64)
    ends = np.array([w.end for w in words], dtype=np.int64)
    for k, st in enumerate(subtokens):
        if st.end <= st.start or len(words) == 0:
            continue
        overlap = np.minimum(ends, st.end) - np.maximum(starts, st.start)
        best = int(np.argmax(overlap))
        if overlap[best] > 0:
            out[k] = best
    return out


def words_to_subtokens(values: Sequence[float], mapping: np.ndarray, mode: str = "first",
                       fill: float = 0.0) -> np.ndarray:
    """Move per-word values (shape (n_words,)) onto sub-tokens (shape (n_sub,)).

    mode="first":  the word's value goes to its first sub-token, ``fill`` to the others;
    mode="spread": every sub-token of the word gets the word's value;
    mode="split":  the value is divided equally among the word's sub-tokens (sums agree).
    Sub-tokens that map to no word (mapping -1) get ``fill``.
    """
    v = np.asarray(values, dtype=np.float64)
    mapping = np.asarray(mapping)
    out = np.full(len(mapping), fill, dtype=np.float64)
    valid = mapping >= 0
    if v.ndim != 1 or (valid.any() and mapping[valid].max() >= len(v)):
        raise ValueError(f"values has shape {v.shape}, mapping refers to word {mapping.max()}")
    if mode == "spread":
        out[valid] = v[mapping[valid]]
    elif mode == "first":
        seen = set()
        for k, w in enumerate(mapping):
            if w >= 0 and w not in seen:
                out[k] = v[w]
                seen.add(int(w))
    elif mode == "split":
        counts = np.bincount(mapping[valid], minlength=len(v))
        out[valid] = v[mapping[valid]] / counts[mapping[valid]]
    else:
        raise ValueError(f"mode must be 'first', 'spread' or 'split', got {mode!r}")
    return out


def word_subtoken_overlaps(words: Sequence[Token], subtokens: Sequence[Token]) -> List[np.ndarray]:
    """For each word, the indices of all sub-tokens whose span overlaps it (many-to-many).

    Sub-tokens need not respect word boundaries: e5 cuts 首都是 into 首 | 都是, so 都是 overlaps
    both 首都 and 是. Returns a list of int64 arrays, one per word (possibly empty).
    """
    if not subtokens:
        return [np.zeros(0, dtype=np.int64) for _ in words]
    s = np.array([t.start for t in subtokens])
    e = np.array([t.end for t in subtokens])
    return [np.flatnonzero((np.minimum(e, w.end) - np.maximum(s, w.start)) > 0) for w in words]


def subtokens_to_words(values: Sequence[float], words: Sequence[Token], subtokens: Sequence[Token],
                       mode: str = "mean", fill: float = float("nan")) -> np.ndarray:
    """Pool per-sub-token values (shape (n_sub,)) into per-word values (shape (n_words,)).

    Every sub-token that overlaps a word contributes to it (see :func:`word_subtoken_overlaps`),
    so a word that shares its only sub-token with a neighbour still gets a value.
    mode is "mean", "sum", "first" or "min"; a word no sub-token overlaps gets ``fill``.
    """
    v = np.asarray(values, dtype=np.float64)
    if v.shape != (len(subtokens),):
        raise ValueError(f"values has shape {v.shape} but there are {len(subtokens)} sub-tokens")
    pool = {"mean": np.mean, "sum": np.sum, "first": lambda x: x[0], "min": np.min}
    if mode not in pool:
        raise ValueError(f"mode must be 'mean', 'sum', 'first' or 'min', got {mode!r}")
    out = np.full(len(words), fill, dtype=np.float64)
    for w, idx in enumerate(word_subtoken_overlaps(words, subtokens)):
        if idx.size:
            out[w] = pool[mode](v[idx])
    return out


def subtoken_spans(tokenizer, ids: Sequence[int]) -> List[Token]:
    """Character spans of each token id in the decoded text, found by incremental decoding (works
    for any tokenizer, also for ids that re-tokenising the text would not reproduce). A byte token
    that ends inside a character gets that character's span; special tokens get an empty span at
    the end of the text so far."""
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    spans, prev = [], 0
    pending = []
    kept: List[int] = []
    for k, t in enumerate(ids):
        if t in special:
            spans.append([prev, prev])
            continue
        kept.append(t)
        text = tokenizer.decode(kept, skip_special_tokens=True)
        complete = text.rstrip("\ufffd")
        spans.append([prev, len(complete)])
        if len(complete) == prev:          # inside a multi-byte character: wait for its end
            pending.append(k)
        else:
            for p in pending:
                spans[p][1] = len(complete)
            pending = []
            prev = len(complete)
    full = tokenizer.decode(kept, skip_special_tokens=True)
    return [Token(full[s:e], s, e) for s, e in spans]
