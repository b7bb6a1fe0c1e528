"""Cost matrices between output tokens and correction tokens (notebook 01).

``C[i, j] = (1 - w) * (1 - cos(e_i, f_j)) + w * lexical(i, j)``, a (n, m) float64 array in [0, 2]
(the semantic part is in [0, 2]; the lexical part in [0, 1]).

Why a lexical term: with an encoder whose vocabulary lacks the script (MiniLM on Chinese), 伦敦
and 巴黎 both become ``[UNK]`` and look alike; character overlap cannot be fooled that way.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import List, Optional, Sequence

import numpy as np

from ..config import AlignConfig
from ..text.tokens import MAX_TEXT_CHARS, Token, tokenize

__all__ = ["cosine_cost", "lexical_cost", "lexical_cost_reference", "cost_matrix", "TextCost", "text_cost",
           "check_words"]


def cosine_cost(E: np.ndarray, F: np.ndarray, eps: float = 1e-8) -> np.ndarray:
    """1 - cosine similarity between rows. E: (n, d), F: (m, d) -> (n, m) float64 in [0, 2].

    A zero row (no information) has cosine 0 with everything, i.e. cost 1.
    """
    E = np.asarray(E, dtype=np.float64)
    F = np.asarray(F, dtype=np.float64)
    if E.ndim != 2 or F.ndim != 2 or (E.size and F.size and E.shape[1] != F.shape[1]):
        raise ValueError(f"expected (n, d) and (m, d) arrays, got {E.shape} and {F.shape}")
    if not (np.all(np.isfinite(E)) and np.all(np.isfinite(F))):
        raise ValueError("embeddings contain NaN or inf")
    En = E / np.maximum(np.linalg.norm(E, axis=1, keepdims=True), eps)
    Fn = F / np.maximum(np.linalg.norm(F, axis=1, keepdims=True), eps)
    return np.clip(1.0 - En @ Fn.T, 0.0, 2.0).reshape(len(E), len(F))


def check_words(n_output: int, n_correction: int, max_words: Optional[int] = None) -> None:
    """Raise ValueError when the output or the correction has more than ``max_words`` word tokens (default
    ``AlignConfig.max_words``): the cost matrix and the DP grow with n x m (benchmarks/bench_lengths.py)."""
    limit = AlignConfig.max_words if max_words is None else max_words
    for what, n in (("output", n_output), ("correction", n_correction)):
        if n > limit:
            raise ValueError(f"the {what} has {n} words, more than the limit of {limit}: a pair this long takes too long "
                             "to align (words x words); split it into paragraphs or raise the limit (max_words, claw "
                             "--max-words)")


def _grams(s: str) -> Counter:
    """Character bigrams of the case-folded word (its single character if it has only one)."""
    s = s.casefold()
    return Counter([s[k:k + 2] for k in range(len(s) - 1)] if len(s) > 1 else [s] if s else [])


def lexical_cost(a: Sequence[Token | str], b: Sequence[Token | str]) -> np.ndarray:
    """1 - Dice overlap of the words' character-bigram multisets: 0 for equal words (case
    folded), 1 for words that share no bigram. Returns (len(a), len(b)) float64 in [0, 1].

    Bigrams, not single characters: "west"/"east" share three letters but one bigram (st), and
    蓝色/红色 share 色 but no bigram; single-character words compare as themselves.

    Vectorised (a cell-by-cell ``Counter`` intersection made a 10,000-word pair run for
    minutes): each distinct word once, the shared bigram counts of all pairs from a join on the
    bigram ids; the same numbers as :func:`lexical_cost_reference` to the last bit (the same
    integer counts, then the same ``1 - 2 * shared / total``).
    """
    wa = [(t.text if isinstance(t, Token) else t).casefold() for t in a]
    wb = [(t.text if isinstance(t, Token) else t).casefold() for t in b]
    out = np.ones((len(wa), len(wb)))
    if not wa or not wb:
        return out
    ua, ia = np.unique(np.array(wa, dtype=object), return_inverse=True)
    ub, ib = np.unique(np.array(wb, dtype=object), return_inverse=True)
    ids: dict = {}

    def entries(words):  # (word, bigram id, count) triples, and each word's number of bigrams
        rows, cols, cnts, tot = [], [], [], np.zeros(len(words))
        for k, w in enumerate(words):
            g = _grams(w)
            tot[k] = sum(g.values())
            for gram, c in g.items():
                rows.append(k)
                cols.append(ids.setdefault(gram, len(ids)))
                cnts.append(c)
        return np.array(rows, np.int64), np.array(cols, np.int64), np.array(cnts, np.int64), tot

    ra, ga, ca, ta = entries(ua)
    rb, gb, cb, tb = entries(ub)
    shared = np.zeros((len(ua), len(ub)))
    if len(ga) and len(gb):
        order = np.argsort(gb, kind="stable")
        rb, gb, cb = rb[order], gb[order], cb[order]
        lo, hi = np.searchsorted(gb, ga, "left"), np.searchsorted(gb, ga, "right")
        n = hi - lo
        if n.sum():
            left = np.repeat(np.arange(len(ga)), n)                       # entry of a, once per partner
            right = np.repeat(lo - np.cumsum(n) + n, n) + np.arange(n.sum())  # the partners' positions in b
            np.add.at(shared, (ra[left], rb[right]), np.minimum(ca[left], cb[right]))
    tot = ta[:, None] + tb[None, :]
    uniq = np.where(tot > 0, 1.0 - 2.0 * shared / np.where(tot > 0, tot, 1.0), 1.0)
    return uniq[ia][:, ib].reshape(len(wa), len(wb))


def lexical_cost_reference(a: Sequence[Token | str], b: Sequence[Token | str]) -> np.ndarray:
    """:func:`lexical_cost` cell by cell with ``Counter`` intersections (readable, quadratic in Python; kept
    for the tests and ``benchmarks/bench_lengths.py``)."""
    ga = [_grams(t.text if isinstance(t, Token) else t) for t in a]
    gb = [_grams(t.text if isinstance(t, Token) else t) for t in b]
    out = np.ones((len(ga), len(gb)))
    for i, x in enumerate(ga):
        nx = sum(x.values())
        for j, y in enumerate(gb):
            tot = nx + sum(y.values())
            if tot:
                out[i, j] = 1.0 - 2.0 * sum((x & y).values()) / tot
    return out


def cost_matrix(E: np.ndarray, F: np.ndarray, a: Optional[Sequence] = None, b: Optional[Sequence] = None,
                lexical_weight: float = 0.0) -> np.ndarray:
    """Blend of :func:`cosine_cost` and :func:`lexical_cost` (needs the tokens ``a``, ``b``)."""
    if not 0.0 <= lexical_weight <= 1.0:
        raise ValueError(f"lexical_weight must be in [0, 1], got {lexical_weight}")
    C = cosine_cost(E, F)
    if lexical_weight > 0:
        if a is None or b is None:
            raise ValueError("lexical_weight > 0 needs the token lists a and b")
        C = (1.0 - lexical_weight) * C + lexical_weight * lexical_cost(a, b)
    return C


@dataclass
class TextCost:
    """output_tokens (n), correction_tokens (m), cost (n, m) float64."""

    output_tokens: List[Token]
    correction_tokens: List[Token]
    cost: np.ndarray


def text_cost(output: str, correction: str, encoder, layer: Optional[int] = None,
              lexical_weight: float = 0.0, contextual: bool = True,
              output_tokens: Optional[List[Token]] = None, correction_tokens: Optional[List[Token]] = None,
              max_chars: int = MAX_TEXT_CHARS, max_words: Optional[int] = None) -> TextCost:
    """Tokenize both texts (unless their word tokens are given; texts over ``max_chars`` characters
    are refused), embed the words (in context, or each alone if ``contextual=False``) with ``encoder``
    (a loaded :class:`~claw_lib.alignment.encoders.Encoder`) and build the cost matrix. A text of more
    than ``max_words`` words (default ``AlignConfig.max_words``) is refused before it is embedded."""
    a = tokenize(output, max_chars) if output_tokens is None else list(output_tokens)
    b = tokenize(correction, max_chars) if correction_tokens is None else list(correction_tokens)
    check_words(len(a), len(b), max_words)
    if contextual:
        E = encoder.embed_words(output, a, layer).vectors
        F = encoder.embed_words(correction, b, layer).vectors
    else:
        E, F = encoder.embed_isolated(a, layer), encoder.embed_isolated(b, layer)
    return TextCost(a, b, cost_matrix(E, F, a, b, lexical_weight))
