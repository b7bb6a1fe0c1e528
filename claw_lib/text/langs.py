"""Which scripts a text is written in, and a warning when a model's output and the user's correction are not
in the same language (notebook 01 shows why).

The alignment pairs words by meaning *and* by spelling (the lexical term), and the reward rules compare
numbers, names and negations word by word. A correction in another language than the output ("法国的首都是伦敦。"
answered with "No, the capital of France is Paris.") pairs words that share neither: 法国 ("France", which the
correction confirms) is rejected like 伦敦. The kit does not translate; it warns (:class:`LanguageMismatchWarning`,
naming both languages) and computes the rewards anyway, so a caller who knows better can go on.

The test is on letters only (digits, punctuation and emoji are ignored): each text's share of letters per script,
a Chinese character counting as two letters (a Chinese word has about 1.7 characters, an English one about 5);
the warning comes when the two distributions differ by a total variation distance of at least
:data:`MISMATCH_DISTANCE` (and each text has :data:`MIN_LETTERS` letters: "Pb。" says nothing about a language). A Chinese sentence with one English name ("法国的首都是Paris。", distance 0.29 from a
Chinese correction) passes; Chinese against English (distance 1) and an output that mixes three scripts against a
correction in two ("法国的capital是London。Париж" / "不对，法国的首都是Paris。", 0.40) warn.
"""
from __future__ import annotations

import unicodedata
import warnings
from typing import Dict, Optional

__all__ = ["LanguageMismatchWarning", "script_shares", "language_mismatch", "warn_language_mismatch",
           "MISMATCH_DISTANCE"]

#: total variation distance between the two texts' script shares from which the warning is given
MISMATCH_DISTANCE = 0.35
#: fewest letters (a Chinese character counting two) each text needs for the test: a bare symbol ("Pb。",
#: "No.") says nothing about the language
MIN_LETTERS = 6
#: the language a script stands for, in the warning
LANGUAGE = {"HAN": "Chinese", "LATIN": "English", "CYRILLIC": "Russian",
            "HIRAGANA": "Japanese", "KATAKANA": "Japanese", "HANGUL": "Korean", "ARABIC": "Arabic", "GREEK": "Greek",
            "HEBREW": "Hebrew", "THAI": "Thai", "DEVANAGARI": "Hindi (Devanagari)"}
_WIDE = {"HAN", "HIRAGANA", "KATAKANA", "HANGUL"}


class LanguageMismatchWarning(UserWarning):
    """The output and the correction are in different languages: their rewards are unreliable."""


def _script(ch: str) -> Optional[str]:
    """The script of a letter (the first word of its Unicode name: "CJK ..." -> HAN, "LATIN SMALL LETTER A" ->
    LATIN), None for a non-letter or a letter of a script not in :data:`LANGUAGE`."""
    if not ch.isalpha():
        return None
    name = unicodedata.name(ch, "")
    if name.startswith("CJK "):
        return "HAN"
    head = name.split(" ")[0]
    return head if head in LANGUAGE else None


def script_shares(text: str, min_letters: float = 1) -> Dict[str, float]:
    """Share of the letters of ``text`` per script ({"HAN": 0.7, "LATIN": 0.3}), a Chinese (or Japanese,
    Korean) character counting twice; {} for a text with fewer than ``min_letters`` letters."""
    counts: Dict[str, float] = {}
    for ch in text:
        s = _script(ch)
        if s is not None:
            counts[s] = counts.get(s, 0.0) + (2.0 if s in _WIDE else 1.0)
    total = sum(counts.values())
    return {s: c / total for s, c in counts.items()} if total and total >= min_letters else {}


def _languages(shares: Dict[str, float]) -> str:
    names = []
    for s, v in sorted(shares.items(), key=lambda kv: -kv[1]):
        n = LANGUAGE.get(s, s.title())
        if v >= 0.1 and n not in names:
            names.append(n)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def language_mismatch(output: str, correction: str) -> Optional[str]:
    """None when both texts are in the same language (or one has fewer than :data:`MIN_LETTERS` letters), else
    a sentence naming both languages (what :func:`warn_language_mismatch` warns with)."""
    a, b = script_shares(output, MIN_LETTERS), script_shares(correction, MIN_LETTERS)
    if not a or not b:
        return None
    distance = 0.5 * sum(abs(a.get(s, 0.0) - b.get(s, 0.0)) for s in set(a) | set(b))
    if distance < MISMATCH_DISTANCE:
        return None
    return (f"the output is in {_languages(a)} and the correction in {_languages(b)}: words of different languages "
            "rarely align, so these rewards are unreliable; give the correction in the output's language")


def warn_language_mismatch(output: str, correction: str) -> None:
    """Warn (:class:`LanguageMismatchWarning`) when the output and the correction are in different languages."""
    if isinstance(output, str) and isinstance(correction, str):
        msg = language_mismatch(output, correction)
        if msg:
            warnings.warn(msg, LanguageMismatchWarning, stacklevel=1)  # one location: shown once per message
