"""An anchor on prompts the user did not correct: each update also pulls the policy towards the initial model's
own answers to a fixed set of prompts, so that a correction changes the answer it corrects and not its neighbours'.

The term is InstructGPT's "PPO-ptx" (Ouyang et al. 2022, eq. 2: the RL objective plus gamma times the log-likelihood of
pretraining data) with the data the initial model's own greedy answers to the anchor prompts, and the likelihood a
full-vocabulary divergence to the initial model there (what knowledge-editing methods call a preservation or
locality loss). For anchor answer tokens ``t`` (positions where the initial model's answer is being read),

    anchor_kl = mean_t  sum_v  p_ref(v | x, y_<t) * (log p_ref(v | x, y_<t) - log p_theta(v | x, y_<t))      (nats)

that is KL(p_ref || p_theta) per token: 0 exactly when the policy is the initial model at those positions, and
its gradient pushes the policy's whole next-token distribution back there, not only the greedy token's
probability.

How it is applied (:func:`anchor_steps`, after each optimizer step of :func:`claw_lib.rl.ppo.ppo_update`):
``steps`` plain gradient steps w -= lr * coef * grad anchor_kl, each halved until the KL does not rise. Not added to
the loss that Adam steps on: Adam normalises each parameter's gradient, and in an update's first steps (its moments
still empty) every parameter the term touches moves by the full learning rate, so on the tiny GPT the term in the
loss moved the anchor's answers more as its weight grew, not less (AdamW decouples weight decay from the adaptive
step for the same reason).

The initial model never changes, so its distributions at the answer tokens are computed once, when the set is built,
and kept: N answer tokens x V floats (0.17 GB for 280 tokens of a 152k-token vocabulary), with the constant
sum_v p_ref log p_ref of each part, so that a step reads only the policy (a third fewer forwards per anchor step with
one trial of the search). Above ``cache_mb`` they are recomputed at each use instead, ``rows`` answers at a time.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence

import torch

from ..models.lm import Batch, pack, response_logits

__all__ = ["AnchorSet", "build_anchor", "anchor_kl", "anchor_step", "anchor_steps"]


@dataclass
class AnchorSet:
    """The anchor prompts with the initial model's answers, packed.

    batch:     :class:`~claw_lib.models.lm.Batch` of prompt + answer ids (B rows, T answer positions)
    reference: the initial model (frozen; the answers are its greedy ones)
    coef:      the anchor step's size in learning rates (>= 0; 0: no step, the set is not read)
    rows:      rows scored at a time (None: all at once): the term's memory is a part's (rows, T, V) logits
    steps:     anchor steps after each optimizer step (:func:`anchor_steps`)
    cache:     per part of ``rows`` rows, (p_ref at its answer tokens (n, V), sum p_ref log p_ref over them (nats));
               None: recomputed at each use
    """

    batch: Batch
    reference: torch.nn.Module
    coef: float
    rows: Optional[int] = None
    steps: int = 1
    cache: Optional[list] = None

    @property
    def tokens(self) -> int:
        """Answer tokens the term averages over."""
        return int(self.batch.response_mask.sum())


def build_anchor(reference, prompt_ids: Sequence[Sequence[int]], answer_ids: Sequence[Sequence[int]], pad_id: int,
                 coef: float, rows: Optional[int] = None, steps: int = 1, cache_mb: float = 1024.0) -> AnchorSet:
    """The :class:`AnchorSet` of the prompts ``prompt_ids`` and ``reference``'s answers to them ``answer_ids``
    (token ids; an empty answer is dropped: it has no position to anchor), with the reference's distributions kept
    when they take at most ``cache_mb`` MiB (module docstring). ValueError when no answer has a token, or for a
    negative coef."""
    if not (coef >= 0):
        raise ValueError(f"the anchor's coefficient must be >= 0, got {coef!r}")
    if not (isinstance(steps, int) and steps >= 1):
        raise ValueError(f"the anchor's steps must be an integer >= 1, got {steps!r}")
    kept = [(p, a) for p, a in zip(prompt_ids, answer_ids) if len(a)]
    if not kept:
        raise ValueError("the anchor set has no answer with a token: nothing to anchor")
    dev = next(reference.parameters()).device
    batch = pack([p for p, _ in kept], [a for _, a in kept], pad_id).to(dev)
    anchor = AnchorSet(batch, reference, float(coef), rows, steps)
    if coef > 0:
        parts = _row_parts(len(kept), rows)
        first = _reference_part(anchor, _part(batch, parts[0]))
        if anchor.tokens * first[0].shape[-1] * 4 <= cache_mb * 2 ** 20:
            anchor.cache = [first] + [_reference_part(anchor, _part(batch, idx)) for idx in parts[1:]]
    return anchor


def _reference_part(anchor: AnchorSet, b: Batch) -> tuple:
    """(p_ref (n, V) at the answer tokens of the part ``b``, sum p_ref log p_ref over them): the cache's entry."""
    with torch.no_grad():
        ref = torch.log_softmax(response_logits(anchor.reference, b)[0].float(), -1)[b.response_mask]     # (n, V)
        p = ref.exp()
        return p, float((p * ref).sum())


def _row_parts(n: int, rows: Optional[int]) -> List[torch.Tensor]:
    step = n if not rows else max(1, int(rows))
    return [torch.arange(i, min(i + step, n)) for i in range(0, n, step)]


def _part(batch: Batch, idx: torch.Tensor) -> Batch:
    return batch.select(idx.to(batch.input_ids.device))


def anchor_kl(policy, anchor: AnchorSet, backward: bool = False) -> float:
    """``anchor_kl`` of the module docstring under ``policy`` (nats per answer token), scored ``anchor.rows`` rows
    at a time; with ``backward`` the gradient of ``anchor.coef * anchor_kl`` is added to the parameters' ``.grad``
    (each part's backward weighted by its share of the tokens: the same gradient as one pass, to rounding)."""
    total, n = 0.0, anchor.tokens
    for k, idx in enumerate(_row_parts(len(anchor.batch.input_ids), anchor.rows)):
        b = _part(anchor.batch, idx)
        p, plogp = anchor.cache[k] if anchor.cache else _reference_part(anchor, b)             # (n, V), nats
        with torch.set_grad_enabled(backward):
            logp = torch.log_softmax(response_logits(policy, b)[0].float(), -1)[b.response_mask]  # (n, V)
            part = (plogp - (p * logp).sum()) / n
            if backward:
                (anchor.coef * part).backward()
        total += float(part.detach())
    return total


def anchor_step(policy, params, anchor: AnchorSet, lr: float, halvings: int = 6):
    """One step on ``anchor_kl`` (module docstring) of the trainable ``params`` of ``policy``: w -= s * coef * grad,
    s = ``lr`` halved until the KL after the step is not above the KL before (at most ``halvings`` times; then no
    step). Leaves the parameters' ``.grad`` empty. Returns (KL before, KL after) in nats per answer token."""
    for q in params:
        q.grad = None
    before = anchor_kl(policy, anchor, backward=True)
    moves = [(q, q.grad.detach().clone(), q.detach().clone()) for q in params if q.grad is not None]
    for q in params:
        q.grad = None
    step = lr
    with torch.no_grad():
        for _ in range(halvings + 1):
            for q, g, w in moves:
                q.copy_(w - step * g)
            after = anchor_kl(policy, anchor)
            if after <= before:
                return before, after
            step /= 2
        for q, _, w in moves:
            q.copy_(w)
    return before, before


def anchor_steps(policy, params, anchor: AnchorSet, lr: float):
    """``anchor.steps`` of :func:`anchor_step` one after the other (each searched on its own), with ``policy`` in
    eval mode (no dropout: the search compares the same function before and after; the mode is restored); (the KL
    before the first, the KL after the last)."""
    was = policy.training
    policy.eval()
    try:
        before, after = anchor_step(policy, params, anchor, lr)
        for _ in range(anchor.steps - 1):
            after = anchor_step(policy, params, anchor, lr)[1]
    finally:
        policy.train(was)
    return before, after
