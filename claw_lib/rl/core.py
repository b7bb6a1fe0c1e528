"""The maths of the PPO loop, apart from the loop (Spinning Up's ``core.py``; notebook 08).

Each helper works on right-padded (B, T) tensors: B responses, T the longest response, ``mask``
True at real response tokens.

* :func:`gae` -- generalised advantage estimation, vectorised (:func:`gae_loop` is the reference,
  one sequence and one step at a time);
* :func:`kl_estimate` -- per-token KL(pi || pi_ref) estimators k1 and k3;
* :func:`clipped_surrogate` -- PPO's clipped objective as a loss, and the share of clipped tokens;
* :class:`ValueHead` -- a linear value head on the policy's last hidden state.

Worked example (``clipped_surrogate``): ratios (1.5, 0.5, 1.1, 1.5), advantages (1, 1, -1, -1),
eps 0.2, eps_high 0.28 -> per-token objectives min(r A, clip(r) A) = (1.28, 0.5, -1.1, -1.5), loss =
-(1.28 + 0.5 - 1.1 - 1.5) / 4 = 0.205, one token of four clipped (tests/rl/test_core.py).
"""
from __future__ import annotations

import torch

from ..ops import masked_mean

__all__ = ["gae", "gae_loop", "kl_estimate", "clipped_surrogate", "ValueHead"]


def gae_loop(rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float, lam: float):
    """Reference GAE, one sequence and one step at a time (for tests). Inputs (B, T)."""
    B, T = rewards.shape
    adv = torch.zeros_like(rewards)
    for b in range(B):
        n = int(mask[b].sum())
        last = 0.0
        for t in reversed(range(n)):
            nxt = values[b, t + 1] if t + 1 < n else 0.0
            delta = rewards[b, t] + gamma * nxt - values[b, t]
            last = delta + gamma * lam * last
            adv[b, t] = last
    return adv, adv + values * mask


def gae(rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float, lam: float):
    """Generalised advantage estimation, vectorised over the batch. rewards, values, mask: (B, T)
    (right-padded; values after the last real token count as 0). Returns (advantages, returns)."""
    m = mask.to(rewards.dtype)
    v = values * m
    nxt = torch.cat([v[:, 1:], torch.zeros_like(v[:, :1])], 1)
    delta = (rewards + gamma * nxt - v) * m
    adv = torch.zeros_like(rewards)
    last = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(rewards.shape[1])):
        last = delta[:, t] + gamma * lam * last * m[:, t]
        adv[:, t] = last
    adv = adv * m
    return adv, adv + v


def kl_estimate(logprobs: torch.Tensor, ref_logprobs: torch.Tensor, estimator: str = "k3") -> torch.Tensor:
    """Per-token KL(pi || pi_ref) estimators on samples from pi: k1 = log pi - log ref;
    k3 = exp(ref - log pi) - 1 - (ref - log pi) (unbiased, always >= 0)."""
    d = ref_logprobs - logprobs
    if estimator == "k1":
        return -d
    if estimator == "k3":
        return torch.exp(d) - 1 - d
    raise ValueError(f"kl estimator must be 'k1' or 'k3', got {estimator!r}")


def clipped_surrogate(logprobs, old_logprobs, advantages, mask, eps=0.2, eps_high=0.28):
    """PPO's clipped objective as a loss: masked mean of max(-A r, -A clip(r, 1-eps, 1+eps_high)).
    Returns (loss, clipfrac)."""
    ratio = torch.exp(logprobs - old_logprobs)
    pg1 = -advantages * ratio
    pg2 = -advantages * torch.clamp(ratio, 1 - eps, 1 + eps_high)
    loss = masked_mean(torch.max(pg1, pg2), mask)
    clipfrac = masked_mean((pg2 > pg1).to(logprobs.dtype), mask)
    return loss, clipfrac


class ValueHead(torch.nn.Module):
    """A linear value head on the policy's last hidden state: (B, L, d) -> (B, L)."""

    def __init__(self, hidden: int):
        super().__init__()
        self.v = torch.nn.Linear(hidden, 1)
        torch.nn.init.zeros_(self.v.weight)
        torch.nn.init.zeros_(self.v.bias)

    def forward(self, h):
        return self.v(h).squeeze(-1)
