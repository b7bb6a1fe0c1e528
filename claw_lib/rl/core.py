"""The maths of the PPO loop, apart from the loop (Spinning Up's ``core.py``; notebook 08).

Each helper works on right-padded (B, T) tensors: B responses, T the longest response, ``mask``
True at real response tokens.

* :func:`gae` -- generalised advantage estimation, vectorised (:func:`gae_loop` is the reference,
  one sequence and one step at a time);
* :func:`reward_to_go` -- the discounted sum of the rewards at and after each token (GAE with no values
  and lambda 1);
* :func:`kl_estimate` -- per-token KL(pi || pi_ref) estimators k1, k3 and the clamped k3 (low_var_kl);
* :func:`aggregate_loss` -- per-token losses to one number: a token mean, or OpenClaw's sample mean;
* :func:`clipped_surrogate` -- PPO's clipped objective as a loss, and the share of clipped tokens;
* :class:`ValueHead` -- a linear value head on the policy's last hidden state.

Worked example (``clipped_surrogate``): ratios (1.5, 0.5, 1.1, 1.5), advantages (1, 1, -1, -1),
eps 0.2, eps_high 0.28 -> per-token objectives min(r A, clip(r) A) = (1.28, 0.5, -1.1, -1.5), loss =
-(1.28 + 0.5 - 1.1 - 1.5) / 4 = 0.205, one token of four clipped (tests/rl/test_core.py).
"""
from __future__ import annotations

from typing import Optional

import torch

from ..ops import masked_mean

__all__ = ["gae", "gae_loop", "reward_to_go", "kl_estimate", "clipped_surrogate", "aggregate_loss", "ValueHead", "KL_CLAMP"]


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


def reward_to_go(rewards: torch.Tensor, mask: torch.Tensor, gamma: float) -> torch.Tensor:
    """G_t = sum over k >= t of gamma^(k - t) r_k within each response; rewards, mask: (B, T), right-padded;
    returns (B, T), 0 at padding. Equal to :func:`gae` with all values 0 and lambda 1; gamma 0 returns the
    rewards themselves (notebook 08: with gamma 1 a wrong word's -1 flows back onto every token before it)."""
    return gae(rewards, torch.zeros_like(rewards), mask, gamma, 1.0)[0]


#: upstream clamps its low-variance KL estimate per token to this range
KL_CLAMP = 10.0


def kl_estimate(logprobs: torch.Tensor, ref_logprobs: torch.Tensor, estimator: str = "low_var_kl") -> torch.Tensor:
    """Per-token KL(pi || pi_ref) estimators on samples from pi, (B, T) -> (B, T), in nats:
    k1 = log pi - log ref; k3 = exp(ref - log pi) - 1 - (ref - log pi) (unbiased, always >= 0);
    low_var_kl = k3 clamped to [-10, 10] per token (OpenClaw-RL's scripts: at ref - log pi = 3, k3 is
    16.1 and low_var_kl 10).

    k3 is computed as ``expm1(d) - d`` with d = ref - log pi: near d = 0 the written form exp(d) - 1 - d
    subtracts numbers close to 1 and keeps mostly rounding noise (float32, d = 1e-4: k3 = 5.0e-9, the
    written form gives 1.7e-8; d = -1e-4: a negative "KL"); expm1(d) - d has an absolute error of a
    rounding of expm1(d), about 6e-8 |d| in float32 (relative 3e-4 at d = 1e-4), measured against
    the float64 series in tests/rl/test_kl_contracts.py. The gradient, exp(d) - 1 by autograd, is
    accurate to float precision in absolute terms either way."""
    d = ref_logprobs - logprobs
    if estimator == "k1":
        return -d
    if estimator in ("k3", "low_var_kl"):
        k3 = torch.expm1(d) - d
        return k3.clamp(-KL_CLAMP, KL_CLAMP) if estimator == "low_var_kl" else k3
    raise ValueError(f"kl estimator must be 'k1', 'k3' or 'low_var_kl', got {estimator!r}")


def aggregate_loss(x: torch.Tensor, mask: torch.Tensor, how: str = "token_mean",
                   rows: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Reduce per-token losses x (B, T) over the mask (B, T) to one number.

    token_mean:  the mean over every masked token of the batch (long responses weigh more);
    sample_mean: each row's mean over its masked tokens (0 for a row without any), then the mean over
                 the rows that are samples (``rows``, (B,) bool; default all rows), so a sample whose
                 tokens are all masked still counts in the denominator (OpenClaw-RL's run scripts).

    On lengths [40, 3, 17, 25, 1, 9] with per-token losses [0.1, 0.0307, 0.02, 0.05, -0.0631, -0.2]
    (constant within each sample) sample_mean is -0.0104 and token_mean 0.0402 (tests/rl/test_core.py).
    """
    if how == "token_mean":
        return masked_mean(x, mask)
    if how != "sample_mean":
        raise ValueError(f"loss aggregation must be 'token_mean' or 'sample_mean', got {how!r}")
    m = mask.to(x.dtype)
    per_row = (x * m).sum(-1) / m.sum(-1).clamp(min=1.0)                  # (B,)
    if rows is None:
        return per_row.mean()
    rows = rows.to(x.dtype)
    return (per_row * rows).sum() / rows.sum().clamp(min=1.0)


def clipped_surrogate(logprobs, old_logprobs, advantages, mask, eps=0.2, eps_high=0.28, agg="token_mean", rows=None):
    """PPO's clipped objective as a loss: per token max(-A r, -A clip(r, 1-eps, 1+eps_high)), reduced by
    :func:`aggregate_loss` (``agg``, ``rows``). Inputs (B, T); returns (loss, clipfrac), clipfrac the
    share of masked tokens whose ratio was clipped."""
    ratio = torch.exp(logprobs - old_logprobs)
    pg1 = -advantages * ratio
    pg2 = -advantages * torch.clamp(ratio, 1 - eps, 1 + eps_high)
    loss = aggregate_loss(torch.max(pg1, pg2), mask, agg, rows)
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
