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

from ..text.tokens import MAX_TEXT_CHARS, Token, tokenize

__all__ = ["cosine_cost", "lexical_cost", "cost_matrix", "TextCost", "text_cost"]


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


def _grams(s: str) -> Counter:
    """Character bigrams of the case-folded word (its single character if it has only one)."""
    s = s.casefold()
    return Counter([s[k:k + 2] for k in range(len(s) - 1)] if len(s) > 1 else [s] if s else [])


def lexical_cost(a: Sequence[Token | str], b: Sequence[Token | str]) -> np.ndarray:
    """1 - Dice overlap of the words' character-bigram multisets: 0 for equal words (case
    folded), 1 for words that share no bigram. Returns (len(a), len(b)) float64 in [0, 1].

    Bigrams, not single characters: "west"/"east" share three letters but one bigram (st), and
    蓝色/红色 share 色 but no bigram; single-character words compare as themselves.
    """
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
              max_chars: int = MAX_TEXT_CHARS) -> TextCost:
    """Tokenize both texts (unless their word tokens are given; texts over ``max_chars`` characters
    are refused), embed the words (in context, or each alone if ``contextual=False``) with ``encoder``
    (a loaded :class:`~claw_lib.alignment.encoders.Encoder`) and build the cost matrix."""
    a = tokenize(output, max_chars) if output_tokens is None else list(output_tokens)
    b = tokenize(correction, max_chars) if correction_tokens is None else list(correction_tokens)
    if contextual:
        E = encoder.embed_words(output, a, layer).vectors
        F = encoder.embed_words(correction, b, layer).vectors
    else:
        E, F = encoder.embed_isolated(a, layer), encoder.embed_isolated(b, layer)
    return TextCost(a, b, cost_matrix(E, F, a, b, lexical_weight))
