"""The model runner of the serving engine: several sequences decoded together over one KV cache.

The batch is ``B`` rows; each row's keys and values sit in the cache left-padded to a common length ``C``
(``cache.layers[l].keys``: (B, heads, C, head_dim)) with ``mask`` (B, C) long, 1 = a real token; a row's real
columns are always its last ``mask[b].sum()`` (no padding inside a row). A row's next token goes in at position
``mask[b].sum()`` (its own length, whatever padding its row has), so a sequence sees exactly the positions and keys
it would alone. :meth:`ModelRunner.join` adds rows whose keys and values cover all of their prompt but its last
token: from the prefix cache (:mod:`claw_lib.serve.prefix_cache`) where it holds a prefix, the rest prefilled
together (one forward); :meth:`ModelRunner.step` then feeds one token per row, the joining rows' last prompt token
beside the running rows' last sampled one, so that a batch with joining rows costs one forward, not two;
:meth:`ModelRunner.remember` keeps a finished row's keys and values for the prompts that extend it (the next turn);
:meth:`ModelRunner.keep` drops finished rows and trims the padding columns no row needs any more. :func:`sample`
is the sampler (greedy, temperature, top-p), one uniform number per row from the row's own generator.

Works for the kit's tiny GPT and Hugging Face causal LMs with a ``DynamicCache`` (full attention).
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import torch
from transformers import DynamicCache

from .prefix_cache import LayerKV, PrefixCache

__all__ = ["ModelRunner", "sample"]


class ModelRunner:
    """One batch of rows decoding together (``model``: a causal LM in eval mode; ``prefix``: the prefix cache its
    joins read and fill, None: none; whoever changes the weights clears it)."""

    def __init__(self, model, prefix: Optional[PrefixCache] = None):
        self.model = model
        self.prefix = prefix if prefix is not None else PrefixCache(0)
        self.cache = None  # a transformers Cache with one row per sequence
        self.mask: Optional[torch.Tensor] = None  # (B, C) long
        self._shapes = None  # per layer (heads, head_dim, dtype) of the keys, once seen

    @property
    def rows(self) -> int:
        return 0 if self.mask is None else self.mask.shape[0]

    def reset(self) -> None:
        self.cache, self.mask = None, None

    @torch.inference_mode()
    def join(self, prompts: List[Sequence[int]]) -> None:
        """Add ``prompts`` (each at least one token) as the last rows, their keys and values covering each prompt but
        its last token, which the next :meth:`step` feeds: the longest cached prefix of each is reused, the rest of
        those that need more is prefilled in one forward (left-padded) and kept in the prefix cache."""
        if any(len(p) < 1 for p in prompts):
            raise ValueError("a prompt needs at least one token")
        heads = [list(p[:-1]) for p in prompts]
        found = [self.prefix.lookup(h) for h in heads]
        kvs = [kv for _, kv in found]
        todo = [i for i, (h, (n, _)) in enumerate(zip(heads, found)) if n < len(h)]
        if todo:
            done = self._prefill([heads[i] for i in todo], [found[i] for i in todo])
            for i, kv in zip(todo, done):
                kvs[i] = kv
                self.prefix.insert(heads[i], kv)
        self._add_rows(kvs, [len(h) for h in heads])

    def _prefill(self, heads: List[List[int]], found: List[Tuple[int, List[LayerKV]]]) -> List[List[LayerKV]]:
        """One forward over what the prefix cache lacks of each of ``heads`` (token ids), after its cached part
        ``found`` (length, per layer (keys, values)); returns each head's keys and values, per layer
        (heads, len(head), head_dim), without padding."""
        dev = self._device()
        cached = [n for n, _ in found]
        rest = [h[n:] for h, (n, _) in zip(heads, found)]
        p_w, r_w = max(cached), max(len(r) for r in rest)
        ids = torch.tensor([[0] * (r_w - len(r)) + r for r in rest], device=dev)
        past_mask = torch.tensor([[0] * (p_w - n) + [1] * n for n in cached], device=dev, dtype=torch.long)
        rest_mask = torch.tensor([[0] * (r_w - len(r)) + [1] * len(r) for r in rest], device=dev)
        pos = (rest_mask.cumsum(dim=1) - 1).clamp_min(0) + torch.tensor(cached, device=dev)[:, None]
        past = _cache(_stack_rows([f for _, f in found], p_w)) if p_w else None
        out = self.model(input_ids=ids, attention_mask=torch.cat([past_mask, rest_mask], dim=1), position_ids=pos,
                         cache=past, use_cache=True, logits_to_keep=1)
        self._shapes = _layer_shapes(out.cache)
        return [[(_real(lay.keys[b], p_w, n, len(r)), _real(lay.values[b], p_w, n, len(r))) for lay in out.cache.layers]
                for b, (n, r) in enumerate(zip(cached, rest))]

    def _add_rows(self, kvs: List[List[LayerKV]], lengths: List[int]) -> None:
        """Add rows whose keys and values are ``kvs`` (per row, per layer (heads, length, head_dim)) below the
        batch, left-padded to a common width."""
        width = max(lengths)
        layers = _stack_rows(kvs if any(kvs) else [self._empty()] * len(kvs), width)
        mask = torch.tensor([[0] * (width - n) + [1] * n for n in lengths], device=self._device(), dtype=torch.long)
        if self.mask is None:
            self.cache, self.mask = _cache(layers), mask
            return
        width = max(self.mask.shape[1], width)
        for own, (k, v) in zip(self.cache.layers, layers):
            own.keys = torch.cat([_left_pad(own.keys, width), _left_pad(k, width)])
            own.values = torch.cat([_left_pad(own.values, width), _left_pad(v, width)])
        self.mask = torch.cat([_left_pad(self.mask, width), _left_pad(mask, width)])

    def _device(self) -> torch.device:
        return next(self.model.parameters()).device

    def _empty(self) -> List[LayerKV]:
        """Per layer (keys, values) of no tokens, (heads, 0, head_dim): the shapes seen so far, or one token's."""
        dev = self._device()
        if self._shapes is None:
            out = self.model(input_ids=torch.zeros(1, 1, dtype=torch.long, device=dev), use_cache=True)
            self._shapes = _layer_shapes(out.cache)
        return [(torch.zeros(h, 0, d, dtype=t, device=dev), torch.zeros(h, 0, d, dtype=t, device=dev))
                for h, d, t in self._shapes]

    @torch.inference_mode()
    def step(self, tokens: List[int]) -> torch.Tensor:
        """Feed one token per row (row order); returns the next-token logits (B, V)."""
        dev = self.mask.device
        pos = self.mask.sum(dim=1, keepdim=True)  # (B, 1): each row's own length
        self.mask = torch.cat([self.mask, torch.ones_like(pos)], dim=1)
        out = self.model(input_ids=torch.tensor(tokens, device=dev)[:, None], attention_mask=self.mask,
                         position_ids=pos, cache=self.cache, use_cache=True)
        self.cache = out.cache
        return out.logits[:, -1]

    @torch.inference_mode()
    def remember(self, row: int, ids: Sequence[int]) -> None:
        """Keep row ``row``'s keys and values in the prefix cache as those of ``ids`` (the tokens the row has read:
        its prompt and every sampled token but the last); nothing when the cache is off or the lengths differ."""
        if not self.prefix.budget:
            return
        n = int(self.mask[row].sum())
        if n != len(ids) or n == 0:
            return
        self.prefix.insert(ids, [(lay.keys[row, :, -n:].clone(), lay.values[row, :, -n:].clone())
                                 for lay in self.cache.layers])

    def keep(self, rows: List[int]) -> None:
        """Keep only ``rows`` (indices, in that order); columns that are padding in every kept row go."""
        if not rows:
            return self.reset()
        if rows == list(range(self.rows)):
            return None
        idx = torch.tensor(rows, device=self.mask.device)
        mask = self.mask[idx]
        first = int((mask.sum(dim=0) > 0).nonzero()[0])  # the first column some row still needs
        self.mask = mask[:, first:].contiguous()
        for layer in self.cache.layers:
            layer.keys = layer.keys[idx, :, first:].contiguous()
            layer.values = layer.values[idx, :, first:].contiguous()
        return None


def _layer_shapes(cache) -> list:
    """Per layer of ``cache``: (heads, head_dim, dtype) of its keys."""
    return [(lay.keys.shape[1], lay.keys.shape[3], lay.keys.dtype) for lay in cache.layers]


def _cache(layers) -> DynamicCache:
    """A cache holding ``layers`` (per layer (keys, values), each (B, heads, C, head_dim))."""
    cache = DynamicCache()
    for i, (k, v) in enumerate(layers):
        cache.update(k, v, i)
    return cache


def _stack_rows(rows: List[List[LayerKV]], width: int) -> List[LayerKV]:
    """Per layer (keys, values), each (B, heads, ``width``, head_dim): the ``rows`` (per row, per layer (keys,
    values) of (heads, n, head_dim); a row with none: ``[]``, at least one row with some) left-padded with zeros."""
    ref = next(r for r in rows if r)
    out = []
    for li, (k0, v0) in enumerate(ref):
        pair = []
        for j, t0 in enumerate((k0, v0)):
            t = t0.new_zeros((len(rows), t0.shape[0], width, t0.shape[2]))
            for b, r in enumerate(rows):
                if r and r[li][j].shape[1]:
                    t[b, :, width - r[li][j].shape[1]:] = r[li][j]
            pair.append(t)
        out.append(tuple(pair))
    return out


def _real(t: torch.Tensor, past_width: int, cached: int, fresh: int) -> torch.Tensor:
    """One row of a prefill's keys or values (heads, past_width + rest width, head_dim) without its padding: the
    ``cached`` columns that end the past part and the ``fresh`` ones that end the whole."""
    parts = [t[:, past_width - cached:past_width]] if cached else []
    parts += [t[:, t.shape[1] - fresh:]] if fresh else []
    return torch.cat(parts, dim=1).contiguous()


def _left_pad(t: torch.Tensor, width: int) -> torch.Tensor:
    """``t`` (B, C) or (B, H, C, D) with zeros prepended along C up to ``width`` columns."""
    dim = 1 if t.dim() == 2 else 2
    missing = width - t.shape[dim]
    if missing == 0:
        return t
    shape = list(t.shape)
    shape[dim] = missing
    return torch.cat([t.new_zeros(shape), t], dim=dim)


def sample(logits: torch.Tensor, temperatures: List[float], top_ps: List[float],
           generators: List[Optional[torch.Generator]]) -> List[int]:
    """One token per row of next-token ``logits`` (B, V): the argmax where the row's temperature is 0, else a
    draw from softmax(logits / temperature) restricted to the smallest set of most likely tokens whose mass
    reaches ``top_p`` (at least one token), by inverting the cumulative distribution at one uniform number from the
    row's own ``generator`` (None: torch's global one). Rows do not interact: a row's token is the same in any
    batch."""
    out = torch.argmax(logits, dim=-1).tolist()
    rows = [b for b, t in enumerate(temperatures) if t > 0.0]
    if not rows:
        return out
    temp = torch.tensor([temperatures[b] for b in rows], device=logits.device)[:, None]
    probs = torch.softmax(logits[rows].float() / temp, dim=-1)
    for i, b in enumerate(rows):
        if top_ps[b] < 1.0:
            probs[i] = _nucleus(probs[i], top_ps[b])
    cdf = probs.cumsum(dim=-1)
    u = torch.stack([torch.rand((), generator=generators[b]) for b in rows]).to(cdf.device) * cdf[:, -1]
    picks = torch.searchsorted(cdf, u[:, None], right=True).clamp(max=cdf.shape[1] - 1)[:, 0].tolist()
    for b, k in zip(rows, picks):
        out[b] = int(k)
    return out


def _nucleus(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """``probs`` (V,) with every token outside the top-``top_p`` nucleus set to 0 (the most likely always kept)."""
    sorted_p, order = probs.sort(descending=True)
    before = sorted_p.cumsum(0) - sorted_p  # mass of the tokens strictly more likely
    sorted_p = sorted_p.masked_fill(before >= top_p, 0.0)
    sorted_p[0] = sorted_p[0].clamp_min(1e-30)
    return torch.zeros_like(probs).scatter(0, order, sorted_p)
