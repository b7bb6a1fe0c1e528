"""The model runner of the serving engine: several sequences decoded together over one KV cache.

The batch is ``B`` rows; each row's keys and values sit in the cache left-padded to a common length ``C``
(``cache.layers[l].keys``: (B, heads, C, head_dim)) with ``mask`` (B, C) long, 1 = a real token. A row's next
token goes in at position ``mask[b].sum()`` (its own length, whatever padding its row has), so a sequence sees
exactly the positions and keys it would alone. :meth:`ModelRunner.join` prefills the prompts that join (together,
left-padded) and adds their rows; :meth:`ModelRunner.step` feeds one token per row; :meth:`ModelRunner.keep` drops
finished rows and trims the padding columns no row needs any more. :func:`sample` is the sampler (greedy,
temperature, top-p), one uniform number per row from the row's own generator.

Works for the kit's tiny GPT and Hugging Face causal LMs with a ``DynamicCache`` (full attention).
"""
from __future__ import annotations

from typing import List, Optional, Sequence

import torch

__all__ = ["ModelRunner", "sample"]


class ModelRunner:
    """One batch of rows decoding together (``model``: a causal LM in eval mode)."""

    def __init__(self, model):
        self.model = model
        self.cache = None  # a transformers Cache with one row per sequence
        self.mask: Optional[torch.Tensor] = None  # (B, C) long

    @property
    def rows(self) -> int:
        return 0 if self.mask is None else self.mask.shape[0]

    def reset(self) -> None:
        self.cache, self.mask = None, None

    @torch.inference_mode()
    def join(self, prompts: List[Sequence[int]]) -> torch.Tensor:
        """Prefill ``prompts`` together (left-padded to the longest, one forward) and add them as the last rows;
        returns their next-token logits (k, V)."""
        dev = next(self.model.parameters()).device
        width = max(len(p) for p in prompts)
        ids = torch.tensor([[0] * (width - len(p)) + list(p) for p in prompts], device=dev)
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=dev)
        pos = (mask.cumsum(dim=1) - 1).clamp_min(0)
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True, logits_to_keep=1)
        if self.mask is None:
            self.cache, self.mask = out.cache, mask
        else:
            self._append(out.cache, mask)
        return out.logits[:, -1]

    def _append(self, cache, mask: torch.Tensor) -> None:
        """Add the rows of ``cache`` below the batch, left-padding whichever is shorter."""
        width = max(self.mask.shape[1], mask.shape[1])
        for own, new in zip(self.cache.layers, cache.layers):
            own.keys = torch.cat([_left_pad(own.keys, width), _left_pad(new.keys, width)])
            own.values = torch.cat([_left_pad(own.values, width), _left_pad(new.values, width)])
        self.mask = torch.cat([_left_pad(self.mask, width), _left_pad(mask, width)])

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
