"""The seam between the four stages (:mod:`claw_lib.rl.ppo`) and the three drivers that feed them: the
kit's loop (:func:`claw_lib.rl.ppo.rollout`, run by :mod:`claw_lib.rl.run`), the TRL engine
(:mod:`claw_lib.integrations.trl`: TRL generates, the kit scores) and the live server (:mod:`claw_lib.serve.loops`:
users' turns, served earlier, with their next states). Each driver builds the stages' input with this module only:

* the tasks, anything that answers :class:`TaskView` (the toy :class:`~claw_lib.toy.env.Task`, the server's
  :class:`~claw_lib.serve.engine.ServedTask`): the stages read ``prompt``, ``question``, ``lang`` and
  ``teacher_prompt(hint, tokenizer)``, never what stands behind them;
* one :class:`Rollout`, made by :func:`make_rollout` (prompts and responses packed once on the device; the
  log-probs a driver has, as a (B, >= T) tensor or as rows, set to 0 outside the response);
* the per-token signal rows of stage 2, as (B, T) tensors: :func:`signal_tensors` (the loop's and TRL's
  :func:`~claw_lib.rl.ppo.compute_signals`, and the server's trainer, which reads them back from ``samples.jsonl``).

What each driver can supply (reference log-probs, top-k ids, the user's own score, a value head, episodes) is the
table :data:`~claw_lib.rl.strategies.DRIVERS`, beside the strategy table; ``plan(cfg, driver)`` refuses a config
that needs what the driver lacks, with the reason.

=====================  =========  ==========================================================================
name                   shape      meaning
=====================  =========  ==========================================================================
``prompt_ids[b]``      (P_b,)     the prompt's ids, no padding
``response_ids[b]``    (T_b,)     the response's ids (the policy's actions, eos included when generated)
``batch``              (B, L)     prompt + response packed, right-padded (:func:`claw_lib.models.lm.pack`)
``logprobs``           (B, T)     log pi_old(y_t | ...) of the response tokens, 0 at padding (or None)
``ref_logprobs``       (B, T)     the same under the frozen reference (or None)
``old_topk``           (B, T, K)  the sampling policy's top-k ids and their log-probs (or None)
=====================  =========  ==========================================================================
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, List, Optional, Protocol, Sequence, Tuple, Union

import torch

from ..models.lm import Batch, pack
from ..toy.env import Feedback

__all__ = ["TaskView", "Rollout", "make_rollout", "signal_tensors"]


class TaskView(Protocol):
    """What the stages read of a task: the prompt the policy answered, the question inside it and its language (the
    token rewards' pair), and the hinted teacher's prompt (OPD: the prompt with the hint, as the task's source
    builds it)."""

    prompt: str

    @property
    def question(self) -> str: ...

    @property
    def lang(self) -> str: ...

    def teacher_prompt(self, hint: str, tokenizer) -> str: ...


@dataclass
class Rollout:
    """One batch of interactions (shapes in the module docstring).

    tasks: the B questions; prompt_ids / response_ids: their token ids (the responses are the
    policy's actions, eos included when generated; an empty sample is one eos); texts: the decoded
    responses the user read; batch: prompt + response packed (on the policy's device); logprobs,
    ref_logprobs: (B, T); feedback: the user's reply (the next state) and score per response; old_topk: the
    sampling policy's most likely ids at each response position and their log-probs, ((B, T, K) long,
    (B, T, K) float), when the step needs them (:attr:`~claw_lib.rl.strategies.Plan.old_topk`), else None.
    """

    tasks: List[TaskView]
    prompt_ids: List[List[int]]
    response_ids: List[List[int]]
    texts: List[str]
    batch: Batch
    logprobs: Optional[torch.Tensor]
    ref_logprobs: Optional[torch.Tensor]
    feedback: List[Feedback]
    old_topk: Optional[Tuple[torch.Tensor, torch.Tensor]] = None

    @property
    def scores(self) -> List[float]:
        """The user's score of each response, in [0, 1]."""
        return [f.score for f in self.feedback]


#: per-token log-probs as a driver has them: a (B, >= T) tensor (TRL's, padded to its own length), one row per
#: response (the server's recorded log-probs), or None
PerToken = Union[torch.Tensor, Sequence[Sequence[float]], None]


def _per_token(x: PerToken, batch: Batch) -> Optional[torch.Tensor]:
    """``x`` as a (B, T) float tensor on the batch's device, 0 outside the responses (None stays None)."""
    if x is None:
        return None
    mask = batch.response_mask
    if isinstance(x, torch.Tensor):
        return x[:, :mask.shape[1]].float().masked_fill(~mask, 0.0)
    out = torch.zeros(mask.shape, device=mask.device)
    for b, row in enumerate(x):
        out[b, :len(row)] = torch.as_tensor(row)
    return out


def make_rollout(tasks: Sequence[TaskView], prompt_ids, response_ids, texts: Sequence[str],
                 feedback: Sequence[Feedback], pad_id: int, device, logprobs: PerToken = None,
                 ref_logprobs: PerToken = None, old_topk=None,
                 score: Optional[Callable[[Batch], tuple]] = None) -> Rollout:
    """The :class:`Rollout` of B turns, the one way a driver makes one: prompts and responses packed once on
    ``device`` (``pad_id``: the tokenizer's pad id); ``logprobs`` / ``ref_logprobs`` as the driver has them
    (:data:`PerToken`: a (B, >= T) tensor or rows; 0 outside the responses); ``score(batch) -> (logprobs,
    ref_logprobs, old_topk)`` for what a driver computes from the packed batch (a forward of the policy), each None
    where it has none (the given ones are kept). ``feedback``: the next states (empty for a trainer that reads stored
    signals)."""
    batch = pack(list(prompt_ids), list(response_ids), pad_id).to(device)
    lps, ref = _per_token(logprobs, batch), _per_token(ref_logprobs, batch)
    if score is not None:
        s_lps, s_ref, s_topk = score(batch)
        lps, ref = (s_lps if s_lps is not None else lps), (s_ref if s_ref is not None else ref)
        old_topk = s_topk if s_topk is not None else old_topk
    return Rollout(list(tasks), list(prompt_ids), list(response_ids), list(texts), batch, lps, ref, list(feedback),
                   old_topk)


def signal_tensors(rows, response_mask: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """Stage 2's rows as tensors: ``rows[b] = (signal (n_b,), mask (n_b,))`` per response (numpy arrays or lists;
    n_b <= T) -> (token_signal (B, T) float32, mask (B, T) bool) on ``response_mask``'s device, 0 / False past each
    row, the mask also False outside the responses (``response_mask``: (B, T) bool)."""
    A = torch.zeros(response_mask.shape, device=response_mask.device)
    M = torch.zeros(response_mask.shape, dtype=torch.bool, device=response_mask.device)
    for b, (a, m) in enumerate(rows):
        A[b, :len(a)] = torch.as_tensor(a, dtype=torch.float32)
        M[b, :len(m)] = torch.as_tensor(m)
    M &= response_mask
    return A, M
