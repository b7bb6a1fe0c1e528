"""Small tensor helpers shared by rewards, log-probs and the PPO loss (TRL's semantics,
re-implemented, not imported; notebooks 05a, 07 and 08).

* ``masked_mean(x, mask)``: mean over positions where mask is True;
* ``masked_var(x, mask, unbiased=True)``: variance with Bessel's correction n / (n - 1);
* ``masked_whiten(x, mask, shift_mean=True)``: (x - mean) / sqrt(var + 1e-8); with
  ``shift_mean=False`` the mean is added back (only the scale changes);
* ``selective_log_softmax(logits, index)``: log p(index) without the full log-softmax;
* ``entropy_from_logits(logits)``: entropy in nats;
* ``gather_positions(x, logit_index)``: the rows of (B, L, D) that predict each response token.

Shapes: B sequences, L positions, T response tokens, V vocabulary.
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

__all__ = ["masked_mean", "masked_var", "masked_whiten", "selective_log_softmax", "entropy_from_logits",
           "gather_positions"]


def masked_mean(x: torch.Tensor, mask: torch.Tensor, dim: Optional[int] = None) -> torch.Tensor:
    """Mean of ``x`` where ``mask`` (bool or 0/1, same shape) is True, over ``dim`` or everything."""
    m = mask.to(x.dtype)
    if dim is None:
        return (x * m).sum() / m.sum()
    return (x * m).sum(dim) / m.sum(dim)


def masked_var(x: torch.Tensor, mask: torch.Tensor, unbiased: bool = True) -> torch.Tensor:
    """Variance of the masked entries; ``unbiased`` applies Bessel's correction n / (n - 1)."""
    mean = masked_mean(x, mask)
    var = masked_mean((x - mean) ** 2, mask)
    if unbiased:
        n = mask.sum()
        if n == 0:
            raise ValueError("masked_var: the mask selects nothing")
        if n == 1:
            raise ValueError("masked_var: one element has no unbiased variance (n - 1 = 0)")
        var = var * n / (n - 1)
    return var


def masked_whiten(x: torch.Tensor, mask: torch.Tensor, shift_mean: bool = True) -> torch.Tensor:
    """Whiten over the masked entries of the whole batch: (x - mean) / sqrt(var + 1e-8).

    shift_mean=False keeps the mean (rewards keep their sign balance; only the scale changes).
    Entries outside the mask are transformed too; mask them yourself if they must stay 0.
    """
    mean, var = masked_mean(x, mask), masked_var(x, mask)
    white = (x - mean) * torch.rsqrt(var + 1e-8)
    return white if shift_mean else white + mean


def selective_log_softmax(logits: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """log_softmax(logits)[..., index] without materialising the full log-softmax.

    logits: (..., V) float; index: (...) long -> (...) float, log p(index).
    float32/64: gather minus logsumexp; half precision: row-wise log_softmax (stabler).
    """
    if logits.dtype in (torch.float32, torch.float64):
        picked = torch.gather(logits, -1, index.unsqueeze(-1)).squeeze(-1)
        return picked - torch.logsumexp(logits, dim=-1)
    rows = [torch.gather(F.log_softmax(lg.float(), -1), -1, ix.unsqueeze(-1)).squeeze(-1)
            for lg, ix in zip(logits, index)]
    return torch.stack(rows)


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of softmax(logits) in nats. (..., V) -> (...)."""
    logp = F.log_softmax(logits.float(), dim=-1)
    return -(logp.exp() * logp).sum(-1)


def gather_positions(x: torch.Tensor, logit_index: torch.Tensor) -> torch.Tensor:
    """Rows of ``x`` (B, L, D) at the positions ``logit_index`` (B, T) -> (B, T, D): the logits
    (or hidden states) that predict each response token."""
    return torch.gather(x, 1, logit_index.unsqueeze(-1).expand(-1, -1, x.shape[-1]))
