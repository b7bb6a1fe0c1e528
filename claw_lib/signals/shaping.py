"""Reward shaping and the pitfalls of the article's section 6 (notebook 07).

Shaping functions work on one response's word rewards (numpy arrays of shape (n,)); the batch
tensor helpers (masked mean, variance, whitening) are in :mod:`claw_lib.ops`.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..utils import check_real, finite_array

__all__ = ["positive_shaping", "decayed_credit", "confidence_weights", "aggregate_corrections"]


def positive_shaping(rewards: np.ndarray, costs: np.ndarray, matched: np.ndarray, bonus: float = 0.2) -> np.ndarray:
    """Add ``bonus * (1 - cost)`` to matched tokens: the closer the match, the larger the bonus
    (the article's "对匹配的Token给予小幅正奖励"). Shapes (n,); returns a new array."""
    r = finite_array("rewards", rewards).copy()
    c = finite_array("costs", costs)
    m = np.asarray(matched, dtype=bool)
    if not len(r) == len(c) == len(m):
        raise ValueError(f"rewards, costs and matched must have one value per token, got lengths {len(r)}, {len(c)} "
                         f"and {len(m)}")
    check_real("bonus", bonus)
    r[m] += bonus * np.clip(1.0 - c[m], 0.0, 1.0)
    return r


def decayed_credit(rewards: np.ndarray, errors: np.ndarray, k: int = 2, gamma: float = 0.5,
                   share: float = 1.0) -> np.ndarray:
    """Pass part of each error's negative reward on to the ``k`` tokens after it.

    Token ``i + d`` (1 <= d <= k) receives ``share * gamma**d * min(r_i, 0)`` for each error
    token ``i``: a wrong word also makes the words generated right after it less trustworthy.
    Errors are not passed backwards (the earlier tokens did not depend on them).
    """
    r = finite_array("rewards", rewards)
    e = np.asarray(errors, dtype=bool)
    if e.shape != r.shape:
        raise ValueError(f"rewards and errors must have one value per token, got lengths {len(r)} and {e.size}")
    check_real("k", k, lo=0, integer=True)
    check_real("gamma", gamma, lo=0.0, hi=1.0)
    check_real("share", share, lo=0.0)
    out = r.copy()
    for i in np.flatnonzero(e):
        for d in range(1, k + 1):
            if i + d < len(r):
                out[i + d] += share * gamma ** d * min(r[i], 0.0)
    return out


def confidence_weights(costs: np.ndarray, threshold: float = 0.3, margin: float = 0.15,
                       floor: float = 0.2) -> np.ndarray:
    """How sure the alignment is of each token's verdict: ``clip(|cost - threshold| / margin,
    floor, 1)``. A cost near the match threshold is an uncertain call; multiply the rewards by
    these weights to shrink them there (the article's "置信度加权")."""
    c = finite_array("costs", costs)
    check_real("margin", margin, lo=0.0, lo_open=True)
    check_real("threshold", threshold)
    check_real("floor", floor, lo=0.0, hi=1.0)
    return np.clip(np.abs(c - threshold) / margin, floor, 1.0)


def aggregate_corrections(rewards: Sequence[np.ndarray], mode: str = "mean") -> np.ndarray:
    """Several corrections of the same output -> one reward per token (shape (n,)).

    mode="mean": the average; mode="vote": the majority sign (+1 / -1), ties -> 0, scaled by the
    mean absolute reward of the winning side.
    """
    R = np.stack([np.asarray(r, dtype=np.float64) for r in rewards])  # (k, n)
    if mode == "mean":
        return R.mean(0)
    if mode != "vote":
        raise ValueError(f"mode must be 'mean' or 'vote', got {mode!r}")
    pos, neg = (R > 0).sum(0), (R < 0).sum(0)
    out = np.zeros(R.shape[1])
    for t in range(R.shape[1]):
        if pos[t] > neg[t]:
            out[t] = R[R[:, t] > 0, t].mean()
        elif neg[t] > pos[t]:
            out[t] = R[R[:, t] < 0, t].mean()
    return out
