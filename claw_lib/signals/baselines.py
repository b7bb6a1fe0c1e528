"""Baselines the reviser (:mod:`claw_lib.signals.reviser`) is measured against (notebook 10,
``tools/probe_report.py``). Each gives one reward per output word token, like every strategy
(:class:`~claw_lib.signals.rewards.TokenRewards`), binary values (``match`` / ``reject``, punctuation ``absent``):

* :func:`last_word_rewards`: the trivial one: the output's last content word is wrong, nothing else (an error is
  often the answer, and the answer often comes last);
* :func:`lexical_rewards`: a plain lexical edit distance, no embeddings, no rules: ``difflib``'s opcodes between the
  output's words and the cleaned correction's (case-folded); an output word inside an "equal" block is kept, one in a
  "replace" or "delete" block is rejected;
* :func:`contrast_rewards`: the with-minus-without perplexity contrast *with a control*: a judge LM scores the output
  after the correction and after a control reply (an unrelated one, :func:`~claw_lib.signals.opd.unrelated_hint`, or a
  wrong correction), and the difference of the word log-probs ``log p(w | correction) - log p(w | control)`` is the
  signal: what the correction's *content* does to each word, the privilege-induced style drift on the first tokens
  (any extra user text moves them) cancelled. ``reward = clip((gap + margin) / ppl_scale, -1, 1)``: a word is negative
  when the correction makes it more than ``margin`` nats less likely than the control does.
"""
from __future__ import annotations

import difflib
from dataclasses import replace
from typing import Optional

import numpy as np

from ..config import RewardConfig
from ..text.corrections import CONTENT_KINDS, clean_correction, guess_lang, word_kind
from ..text.tokens import tokenize
from .rewards import TokenRewards, token_rewards

__all__ = ["last_word_rewards", "lexical_rewards", "contrast_rewards", "contrast_from_scores"]


def _binary(output: str, tokens, negative: np.ndarray, cfg: RewardConfig, info: dict) -> TokenRewards:
    punct = np.array([word_kind(t.text) == "punct" for t in tokens], bool)
    negative = negative & ~punct
    r = np.where(negative, cfg.reject, np.where(punct, cfg.absent, cfg.match)).astype(np.float64)
    return TokenRewards(output, "binary", tokens, r, negative, None, info)


def last_word_rewards(output: str, correction: str = "", config: Optional[RewardConfig] = None) -> TokenRewards:
    """The trivial baseline: the last content word of ``output`` gets ``reject``, every other word ``match``
    (punctuation ``absent``); the correction is not read. (n,) rewards; none negative without a content word."""
    cfg = config or RewardConfig()
    tokens = tokenize(output, cfg.align.max_chars)
    neg = np.zeros(len(tokens), bool)
    content = [i for i, t in enumerate(tokens) if word_kind(t.text) in CONTENT_KINDS]
    if content:
        neg[content[-1]] = True
    return _binary(output, tokens, neg, cfg, {"baseline": "last content word"})


def lexical_rewards(output: str, correction: str, config: Optional[RewardConfig] = None) -> TokenRewards:
    """The lexical edit-distance baseline: ``difflib.SequenceMatcher`` (no junk heuristic) on the case-folded words of
    ``output`` and of the cleaned correction; output words in "replace" / "delete" opcodes get ``reject``, in "equal"
    ones ``match`` (punctuation ``absent``). An affirmation rejects nothing."""
    cfg = config or RewardConfig()
    tokens = tokenize(output, cfg.align.max_chars)
    cc = clean_correction(correction)
    neg = np.zeros(len(tokens), bool)
    if not cc.affirmation and cc.text.strip():
        a = [t.text.casefold() for t in tokens]
        b = [t.text.casefold() for t in tokenize(cc.text, cfg.align.max_chars)]
        for op, i1, i2, _, _ in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
            if op in ("replace", "delete"):
                neg[i1:i2] = True
    return _binary(output, tokens, neg, cfg, {"baseline": "lexical edit distance", "clean_correction": cc.text})


def contrast_from_scores(output: str, with_scores: np.ndarray, control_scores: np.ndarray, margin: float = 0.0,
                         config: Optional[RewardConfig] = None, info: Optional[dict] = None) -> TokenRewards:
    """The contrast's rewards from word log-probs already computed: with_scores / control_scores (n,) nats, log p of
    each output word after the correction / after the control; ``clip((with - control + margin) / ppl_scale, -1,
    1)``, negative words "rejected"."""
    cfg = config or RewardConfig()
    tokens = tokenize(output, cfg.align.max_chars)
    gap = np.asarray(with_scores, np.float64) - np.asarray(control_scores, np.float64)
    if gap.shape != (len(tokens),):
        raise ValueError(f"scores have shape {gap.shape}, the output has {len(tokens)} words")
    r = np.clip((gap + margin) / cfg.ppl_scale, -1.0, 1.0)
    return TokenRewards(output, "perplexity", tokens, r, r < 0, None,
                        {**(info or {}), "baseline": "perplexity contrast with a control", "gap": gap})


def contrast_rewards(output: str, correction: str, judge, question: Optional[str] = None,
                     control: Optional[str] = None, margin: float = 0.0,
                     config: Optional[RewardConfig] = None) -> TokenRewards:
    """The perplexity contrast with a control (module docstring). judge: ``(model, tokenizer)``; control: the control
    reply (default: the first unrelated follow-up in the output's language); two scoring passes of the judge (the
    kit's perplexity strategy without its own contrast, with the question when given)."""
    from .opd import unrelated_hint  # lazy: signals.opd imports torch; the other baselines need none

    cfg = replace(config or RewardConfig(), contrast=False, clean=False)
    control = control if control is not None else unrelated_hint(guess_lang(output, correction), 0)
    with_k = token_rewards(output, clean_correction(correction).text or correction, "perplexity", cfg, judge=judge,
                           question=question).info.get("word_scores")
    with_c = token_rewards(output, control, "perplexity", cfg, judge=judge, question=question).info.get("word_scores")
    n = len(tokenize(output, cfg.align.max_chars))
    if with_k is None:  # an empty output: no word to score
        with_k = with_c = np.zeros(n)
    return contrast_from_scores(output, with_k, with_c, margin, cfg, {"control": control})
