"""Word rewards onto the policy's own action tokens (notebook 07; the PPO loop).

A reward strategy gives one value per *word* of the output; PPO needs one per *action token* (the
ids the policy sampled, eos included). :func:`subtoken_spans` finds each id's characters by
incremental decoding (:func:`claw_lib.text.tokens.subtoken_spans`: any id sequence works, also one
that re-tokenising the text would not reproduce), and :func:`policy_token_rewards` moves the word rewards onto those ids and checks the
lengths (:func:`check_lengths`: exactly one reward per action token).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..text.tokens import Token, map_subtokens_to_words, subtoken_spans, words_to_subtokens
from .rewards import TokenRewards

__all__ = ["policy_token_rewards", "check_lengths"]


def check_lengths(rewards: Sequence[float], response_ids: Sequence[int], what: str = "rewards") -> None:
    """Raise if there is not exactly one reward per response token (the PPO contract)."""
    if len(rewards) != len(response_ids):
        raise ValueError(f"length mismatch: {len(rewards)} {what} for {len(response_ids)} response tokens; "
                         "PPO needs exactly one per action token (special tokens included in the ids)")


def policy_token_rewards(tr: TokenRewards, tokenizer, response_ids: Sequence[int], mode: str = "first",
                         special_value: float = 0.0) -> np.ndarray:
    """Word rewards -> one reward per policy action token (``response_ids``, e.g. eos included).

    mode: "first" (the word's reward on its first sub-token, 0 on the rest: the article's
    advice) or "spread" (on every sub-token). Special tokens get ``special_value``.
    Checks that the ids decode to ``tr.output`` and that the lengths agree.
    """
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    subs = subtoken_spans(tokenizer, response_ids)
    decoded = tokenizer.decode([t for t in response_ids if t not in special], skip_special_tokens=True)
    if decoded.strip() != tr.output.strip():
        raise ValueError(f"the response ids decode to {decoded!r}, not to the rewarded output {tr.output!r}")
    shift = decoded.find(tr.output.strip()) - tr.output.find(tr.output.strip())
    words = [Token(w.text, w.start + shift, w.end + shift) for w in tr.tokens]
    mapping = map_subtokens_to_words(words, subs)
    out = words_to_subtokens(tr.rewards, mapping, mode, fill=0.0)
    out[[k for k, t in enumerate(response_ids) if t in special]] = special_value
    check_lengths(out, response_ids)
    return out
