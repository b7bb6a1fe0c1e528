"""The serving engine's prefix cache: keys and values of token sequences it has already read, reused by the
prompts that start with them.

A prompt that joins the batch is prefilled only from where its longest cached prefix ends: a repeated question,
the ``n`` choices of one request, a chat template's system prompt, and above all the next turn of a conversation,
whose prompt is the last turn's prompt and answer plus one new message. This is vLLM's automatic prefix caching
and SGLang's radix cache in their simplest form (whole sequences, the longest common prefix found by a scan,
least recently used out first), for one model's weights: the batcher that owns it empties it when the weights or
the version change (:class:`~claw_lib.serve.batcher.Batcher`), so no answer reads keys that another version wrote.

An entry is ``ids`` (the token ids, a tuple) and per layer ``(keys, values)``, each (heads, len(ids), head_dim), the
layer's cache for exactly those positions (position ``i`` is token ``ids[i]`` at position ``i``, no padding).
"""
from __future__ import annotations

from collections import OrderedDict
from typing import List, Sequence, Tuple

import torch

__all__ = ["PrefixCache", "common_prefix"]

LayerKV = Tuple[torch.Tensor, torch.Tensor]


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """The length of the longest common prefix of ``a`` and ``b``."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo]; a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo


class PrefixCache:
    """Least recently used entries holding at most ``budget_tokens`` tokens in all (0: the cache is off: lookups
    find nothing and nothing is kept). ``hits`` and ``reused_tokens`` count the lookups that found a prefix and
    the tokens they did not prefill; ``lookups`` and ``looked_tokens`` all lookups and their lengths."""

    def __init__(self, budget_tokens: int = 8192):
        if not isinstance(budget_tokens, int) or budget_tokens < 0:
            raise ValueError(f"the prefix cache's budget must be an integer >= 0 tokens, got {budget_tokens!r}")
        self.budget = budget_tokens
        self.entries: "OrderedDict[tuple, List[LayerKV]]" = OrderedDict()
        self.tokens = 0
        self.hits = self.reused_tokens = self.lookups = self.looked_tokens = 0

    def stats(self) -> dict:
        """The counters as ``GET /v1/claw/status`` shows them (``prefix_cache``)."""
        return {"budget_tokens": self.budget, "tokens": self.tokens, "entries": len(self.entries),
                "lookups": self.lookups, "hits": self.hits, "prompt_tokens": self.looked_tokens,
                "reused_tokens": self.reused_tokens}

    def clear(self) -> None:
        """Forget every entry (the weights changed)."""
        self.entries.clear()
        self.tokens = 0

    def lookup(self, ids: Sequence[int]) -> Tuple[int, List[LayerKV]]:
        """The longest cached prefix of ``ids``: its length ``n`` and per layer (keys, values) of shape
        (heads, n, head_dim) (views of the entry's tensors); (0, []) when none."""
        ids = tuple(ids)
        best, best_key = 0, None
        for key in self.entries:
            n = common_prefix(key, ids)
            if n > best:
                best, best_key = n, key
        self.lookups += 1
        self.looked_tokens += len(ids)
        if best_key is None:
            return 0, []
        self.entries.move_to_end(best_key)
        self.hits += 1
        self.reused_tokens += best
        return best, [(k[:, :best], v[:, :best]) for k, v in self.entries[best_key]]

    def insert(self, ids: Sequence[int], kv: List[LayerKV]) -> None:
        """Keep ``kv`` (per layer (keys, values), each (heads, len(ids), head_dim), owned by the cache from now on)
        as the entry for ``ids``; entries that are a prefix of ``ids`` go (this one covers them), then the least
        recently used until the budget holds. Nothing is kept for a sequence longer than the budget or one an entry
        already starts with."""
        ids = tuple(ids)
        if not ids or len(ids) > self.budget:
            return
        longer = next((k for k in self.entries if len(k) >= len(ids) and k[:len(ids)] == ids), None)
        if longer is not None:  # an entry already covers ids
            self.entries.move_to_end(longer)
            return
        for key in [k for k in self.entries if len(k) <= len(ids) and ids[:len(k)] == k]:
            self._drop(key)
        self.entries[ids] = kv
        self.tokens += len(ids)
        while self.tokens > self.budget:
            self._drop(next(iter(self.entries)))

    def _drop(self, key: tuple) -> None:
        del self.entries[key]
        self.tokens -= len(key)
