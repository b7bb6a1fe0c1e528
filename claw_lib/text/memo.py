"""One pair's texts read once (notebook 05b): a correction on its way to its token rewards
(:func:`claw_lib.signals.rewards.token_rewards`) is read by the cleaner, the aligner and a dozen rules, each of which
tokenizes or splits the text it is given. Inside :func:`one_pair` the pure readings that go through :func:`recall`
(:func:`~claw_lib.text.tokens.tokenize`, :func:`~claw_lib.text.claims.clause_spans`,
:func:`~claw_lib.text.corrections.negated_spans`) run once per distinct text; outside it nothing is kept, so a
notebook or a long batch holds no cache.

The memo is keyed by the text itself (the rules pass the cleaned correction, its copula turned round, its clauses and
the output), lives in a :class:`~contextvars.ContextVar` (a server's judge thread and its request threads each have
their own) and hands out a fresh list each time (its items, tokens and spans, are immutable).
"""
from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Callable, Iterator, List, Optional

__all__ = ["one_pair", "recall"]

_MEMO: ContextVar[Optional[dict]] = ContextVar("claw_text_memo", default=None)


@contextmanager
def one_pair() -> Iterator[None]:
    """Remember what :func:`recall` computes until the block (or the decorated call: ``@one_pair()``) ends; a block
    inside another shares the outer one's memo."""
    if _MEMO.get() is not None:
        yield
        return
    token = _MEMO.set({})
    try:
        yield
    finally:
        _MEMO.reset(token)


def recall(fn: Callable[[str], list], text: str) -> list:
    """``fn(text)``, a pure function of one string returning a list of immutable items; inside :func:`one_pair`
    computed once per (fn, text). Returns a new list each call."""
    memo = _MEMO.get()
    if memo is None:
        return fn(text)
    key = (fn, text)
    if key not in memo:
        memo[key] = fn(text)
    return list(memo[key])
