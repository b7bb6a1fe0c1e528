"""A small end-to-end PPO loop on the fact world (notebooks 08 and 09).

:func:`train` is a short loop over four public stages, numbered as in cleanrl:

1. :func:`rollout`        sample a response for each prompt (KV cache, temperature), keep the
                          policy's log-probs of its own tokens and the reference's, and the user's
                          reply (the next state) with its score;
2. :func:`compute_signals` a strategy turns (response, next state) into a per-token signal and a
                          mask: ``sentence``, ``binary``, ``continuous``, ``perplexity`` (token
                          rewards of :mod:`claw_lib.signals.rewards`), ``binary_rl``, ``opd``,
                          ``combined`` (OpenClaw-RL, :mod:`claw_lib.signals.opd`), or ``opd_kl``
                          (OPD as distillation to the hinted teacher on the student's own prefixes);
3. :func:`compute_advantages` "direct" (the signal is the advantage: OpenClaw's no-baseline
                          broadcast), "whiten" (the signal whitened over the batch), "reward_to_go"
                          (discounted sum of the signal from each token on), "grpo" (the user's score
                          minus the batch mean) or "gae" (a value head, GAE(gamma, lambda), whitened);
4. :func:`ppo_update`     clipped surrogate (clip range and loss aggregation per strategy as
                          OpenClaw-RL's run scripts), optional KL to the frozen reference (k1, k3,
                          clamped k3), gradient clipping, epochs x minibatches.

Tensors of one step (B prompts, L = longest prompt + response, T = longest response, V vocabulary;
every tensor lives on the policy's device):

=============================  =========  =============================================================
name                           shape      meaning
=============================  =========  =============================================================
``rollout.batch.input_ids``    (B, L)     prompt + response ids, right-padded
``rollout.batch.response_mask`` (B, T)    bool, True at a real response token
``rollout.logprobs``           (B, T)     log pi_old(y_t | x, y_<t) of the sampled token, 0 at padding (when needed)
``rollout.ref_logprobs``       (B, T)     the same under the frozen reference (when the KL term is on)
``signals.token_signal``       (B, T)     per-token reward or OPD gap, 0 outside the mask
``signals.mask``               (B, T)     bool, tokens that count in the loss (a turn without a sample: none)
``advantages.advantages``      (B, T)     what multiplies the ratio in the surrogate
``logits`` (in the update)     (b, T, V)  the policy's logits at the positions predicting each token
=============================  =========  =============================================================

Metrics per step go to ``metrics.jsonl`` / ``metrics.csv`` with namespaced keys (:data:`METRICS`); a
checkpoint every ``save_every`` steps makes an interrupted run resume to the same result (sampling
is seeded per step).
"""
from __future__ import annotations

import csv
import dataclasses
import json
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch

from ..config import PPOConfig, SettingError
from ..config import PPO_STRATEGIES as STRATEGIES
from ..models.lm import (Batch, encode, generate, ids_logprobs, logprobs_from_batch, pack, pad_token_id, peak_memory_gib,
                         scaled_logits)
from ..ops import entropy_from_logits, gather_positions, masked_mean, masked_whiten, selective_log_softmax
from ..prompts import teacher_prompt
from ..signals.opd import (
    binary_rl_advantages,
    clipped_topk_opd,
    combined_advantages,
    generalized_jsd,
    judge_turn,
    opd_advantages,
    topk_reverse_kl,
)
from ..toy.users import Feedback, Task
from .core import ValueHead, aggregate_loss, clipped_surrogate, gae, kl_estimate, reward_to_go
from .strategies import STRATEGY_TABLE, Plan, plan
from .strategies import check as _check

__all__ = ["PPOConfig", "STRATEGIES", "METRICS", "Rollout", "Scorer", "Signals", "Advantages", "rollout",
           "compute_signals", "compute_advantages", "ppo_update", "train", "decode_response", "prepare_policy",
           "needs_reference"]

#: strategies whose signal comes from the alignment or a judge LM's perplexity (token rewards)
TOKEN_REWARD_STRATEGIES = tuple(n for n, s in STRATEGY_TABLE.items() if s.signal == "token_reward")

#: Glossary of every logged metric.
METRICS = {
    "step": "PPO step (1-based)",
    "reward/score": "mean user score of the batch's sampled responses, in [0, 1]",
    "eval/score": "mean user score of greedy answers on the fixed evaluation prompts",
    "eval/score/<user>": "joint optimisation (task.user \"joint\") only: eval/score on that persona's own prompts",
    "reward/advantage_mean": "mean advantage over the masked tokens",
    "reward/token_mean": "mean per-token signal (reward or OPD gap) before GRPO/GAE, over masked tokens",
    "reward/token_std": "its standard deviation",
    "reward/positive_share": "share of masked tokens with a positive signal",
    "reward/negative_share": "share of masked tokens with a negative signal",
    "reward/masked_fraction": "share of responses that give a training sample (mask not empty)",
    "objective/kl": "mean KL(policy || reference) per token (k3, clamped to [-10, 10]: low_var_kl); logged when the "
                    "KL term is on (the reference is only run then)",
    "policy/clipfrac": "share of tokens whose ratio was clipped",
    "policy/approx_kl": "mean 0.5 (log pi - log pi_old)^2 during the update",
    "policy/entropy": "mean entropy of the policy at response tokens (nats)",
    "policy/loss": "the surrogate (or distillation) loss of the last minibatch",
    "value/explained_variance": "1 - Var(returns - values) / Var(returns), value head only",
    "opd/accepted_fraction": "share of turns with a usable hint (OPD samples after filtering)",
    "opd/gap_mean": "OPD, hinted responses only: mean teacher-minus-student log-prob per token (nats; logged when a "
                    "turn has a hint)",
    "opd/worst_gap_mean": "OPD, hinted responses: the mean over responses of their most negative gap (nats)",
    "opd/teacher_mass": "OPD, hinted responses: mean probability the hinted teacher gives the student's own tokens",
    "timing/rollout_s": "seconds spent sampling, scoring the samples' log-probs and collecting the user's replies",
    "timing/score_s": "seconds spent judging and computing the per-token signals",
    "timing/update_s": "seconds spent on advantages and the PPO update",
    "timing/rollout_tokens": "response tokens sampled this step",
    "timing/load_s": "step 0 only: seconds to load the model and set up the run (adapters, reference, encoder)",
    "memory/peak_gib": "peak memory of the process so far, GiB: torch.cuda.max_memory_allocated on a GPU, the peak "
                       "resident set size (ru_maxrss: weights, optimizer, activations, Python) on the CPU",
}


# --------------------------------------------------------------------------- 1. rollout
@dataclass
class Rollout:
    """One batch of interactions (shapes in the module docstring).

    tasks: the B questions; prompt_ids / response_ids: their token ids (the responses are the
    policy's actions, eos included when generated; an empty sample is one eos); texts: the decoded
    responses the user read; batch: prompt + response packed (on the policy's device); logprobs,
    ref_logprobs: (B, T); feedback: the user's reply (the next state) and score per response; old_topk: the
    sampling policy's most likely ids at each response position and their log-probs, ((B, T, K) long,
    (B, T, K) float), when the step needs them (:func:`old_topk_width`), else None.
    """

    tasks: List[Task]
    prompt_ids: List[List[int]]
    response_ids: List[List[int]]
    texts: List[str]
    batch: Batch
    logprobs: torch.Tensor
    ref_logprobs: Optional[torch.Tensor]
    feedback: List[Feedback]
    old_topk: Optional[Tuple[torch.Tensor, torch.Tensor]] = None

    @property
    def scores(self) -> List[float]:
        """The user's score of each response, in [0, 1]."""
        return [f.score for f in self.feedback]


def decode_response(tokenizer, ids: List[int]) -> str:
    """The text a user reads for response ids: eos and special tokens dropped, whitespace stripped."""
    return tokenizer.decode([t for t in ids if t != tokenizer.eos_token_id], skip_special_tokens=True).strip()


def needs_old_logprobs(cfg: PPOConfig) -> bool:
    """Whether a step needs the rollout's log-probs before its update (:attr:`~claw_lib.rl.strategies.Plan.old_logprobs`)."""
    return plan(cfg).old_logprobs


def topk_loss(cfg: PPOConfig) -> bool:
    """Whether the update uses the paper's second version's clipped top-k OPD loss (``loss.distill="topk_clipped"``
    with ``opd_kl``, or the v2 hybrid)."""
    return plan(cfg).loss_family in ("topk_clipped", "hybrid")


def old_topk_width(cfg: PPOConfig) -> int:
    """How many of the sampling policy's most likely ids per position the step reads
    (:attr:`~claw_lib.rl.strategies.Plan.old_topk`); the rollout takes them from the forward that gives its log-probs."""
    return plan(cfg).old_topk


@torch.no_grad()
def rollout(policy, tokenizer, env, cfg: PPOConfig, step: int, ref=None) -> Rollout:
    """Stage 1: ``cfg.batch_size`` prompts of ``env`` (re-seeded for ``step``), one sampled response
    each, the log-probs of the sampled tokens under ``policy`` when the step needs them
    (:func:`needs_old_logprobs`, else None) and under ``ref`` if given (the KL term), and the user's
    replies. Sampling is reproducible from ``cfg.seed`` and ``step``."""
    policy.eval()
    seed = cfg.seed * 100_003 + step
    env.reset(seed)
    tasks = env.sample(cfg.batch_size)
    gens = generate(policy, tokenizer, [t.prompt for t in tasks], max_new_tokens=cfg.max_new_tokens,
                    temperature=cfg.temperature, seed=seed)
    response_ids = [g.ids or [tokenizer.eos_token_id] for g in gens]  # an empty sample: one eos action
    prompt_ids = [encode(tokenizer, t.prompt) for t in tasks]
    dev = next(policy.parameters()).device
    batch = pack(prompt_ids, response_ids, tokenizer.pad_token_id).to(dev)
    temp = cfg.temperature  # log-probs of the distribution that was sampled, as upstream
    p = plan(cfg)
    logprobs, old_topk, k = None, None, p.old_topk
    if p.old_logprobs:  # (B, T), and the top-k pair ((B, T, k), (B, T, k)) from the same forward
        logprobs, old_topk = logprobs_from_batch(policy, batch, temperature=temp, topk=k) if k else \
            (logprobs_from_batch(policy, batch, temperature=temp), None)
    ref_logprobs = logprobs_from_batch(ref, batch, temperature=temp) if ref is not None else None        # (B, T)
    texts = [decode_response(tokenizer, ids) for ids in response_ids]
    feedback = [env.step(t, x) for t, x in zip(tasks, texts)]
    return Rollout(tasks, prompt_ids, response_ids, texts, batch, logprobs, ref_logprobs, feedback, old_topk)


# --------------------------------------------------------------------------- 2. signals
@dataclass
class Scorer:
    """What turns a rollout into signals, besides the config.

    tokenizer: the policy's; teacher: the model that scores log pi_T(y | x + hint) (the frozen
    reference or the live policy); encoder: the alignment encoder (binary, continuous, sentence);
    judge_lm: (model, tokenizer) for perplexity rewards; judge: the next-state judge of Binary RL
    and OPD (None: the rule judge of the toy world).
    """

    tokenizer: object
    teacher: object = None
    encoder: object = None
    judge_lm: Optional[Tuple[object, object]] = None
    judge: object = None

    @classmethod
    def for_run(cls, cfg: PPOConfig, policy, ref, tokenizer) -> "Scorer":
        """The scorer ``train`` uses: teacher per ``cfg.opd.teacher``, the encoder of
        ``cfg.reward.align`` for alignment strategies, the reference as perplexity judge."""
        encoder, s = None, plan(cfg).strategy
        if s.encoder:
            from ..alignment.encoders import load_encoder

            a = cfg.reward.align
            encoder = load_encoder(a.encoder, a.layer, str(next(policy.parameters()).device))
        return cls(tokenizer, teacher=policy if cfg.opd.teacher == "live" else ref, encoder=encoder,
                   judge_lm=(ref, tokenizer) if s.judge_lm else None)


@dataclass
class Signals:
    """Stage 2's output: token_signal (B, T) float and mask (B, T) bool on the policy's device;
    hints: the accepted hint per turn (None: no OPD sample); teacher_batch: ``opd_kl`` and the v2 hybrid, the
    teacher prompts packed with the same responses; metrics: their ``reward/*`` and ``opd/*``."""

    token_signal: torch.Tensor
    mask: torch.Tensor
    hints: List[Optional[str]]
    teacher_batch: Optional[Batch] = None
    metrics: Dict[str, float] = field(default_factory=dict)
    judged: Optional[list] = None
    """Binary RL, OPD and combined: each turn's :class:`~claw_lib.signals.opd.TurnSignal` (score, votes, hint votes,
    the chosen hint), which the live server records; None for the token-reward strategies"""


def _token_reward_rows(ro: Rollout, cfg: PPOConfig, scorer: Scorer):
    """Alignment / perplexity rewards on each response's own action tokens (onto sub-tokens as
    ``cfg.subtokens`` says)."""
    from ..signals.mapping import policy_token_rewards
    from ..signals.rewards import token_rewards
    from ..text.corrections import clean_correction
    from ..text.langs import LanguageMismatchWarning

    if scorer.encoder is not None:  # every text of the batch in a few padded encoder passes
        nexts = [clean_correction(f.next_state).text if cfg.reward.clean else f.next_state for f in ro.feedback]
        scorer.encoder.prefetch(list(ro.texts) + nexts, cfg.reward.align.layer)
    rows = []
    for t, ids, text, fb in zip(ro.tasks, ro.response_ids, ro.texts, ro.feedback):
        with warnings.catch_warnings():  # a sample in the wrong language is the policy's error, and rewarded as one
            warnings.simplefilter("ignore", LanguageMismatchWarning)
            tr = token_rewards(text, fb.next_state, cfg.strategy, cfg.reward, encoder=scorer.encoder,
                               judge=scorer.judge_lm, question=t.fact.question(), response_ids=ids)
        try:
            a = policy_token_rewards(tr, scorer.tokenizer, ids, cfg.subtokens)
        except ValueError:  # a response the word tokenizer cannot map (e.g. empty): no sample
            a = np.zeros(len(ids))
        rows.append((a, np.full(len(ids), bool(len(tr.tokens)))))
    return rows


def _openclaw_rows(ro: Rollout, cfg: PPOConfig, scorer: Scorer):
    """Binary RL, OPD and combined on each response: the judge reads the next state once; the
    hinted teacher scores all hinted responses in one padded pass, on the responses' own ids."""
    tok, p = scorer.tokenizer, plan(cfg)
    sigs = [judge_turn(text, fb.next_state, scorer.judge, cfg.opd, fb.role) for text, fb in zip(ro.texts, ro.feedback)]
    if p.hint_overlap:
        sigs = _choose_hints_by_overlap(ro, sigs, cfg, scorer)
    hinted = [b for b, s in enumerate(sigs) if s.hint] if p.strategy.hint else []
    teacher_ids = {b: encode(tok, task_teacher_prompt(ro.tasks[b], sigs[b].hint, tok)) for b in hinted}
    teacher_lps = dict(zip(hinted, ids_logprobs(scorer.teacher, [teacher_ids[b] for b in hinted],
                                                [ro.response_ids[b] for b in hinted], pad_token_id(tok),
                                                temperature=cfg.temperature)[0])) if hinted else {}
    old = ro.logprobs.cpu().numpy() if ro.logprobs is not None else None
    chain = _chain_step_rewards(ro, sigs, cfg)  # multi-step episodes: R_j = o (+ p_j), else None
    # the v2 hybrid: the OPD term is the update's top-k loss; the advantage holds the RL term alone
    opd_cfg = dataclasses.replace(cfg.opd, w_opd=0.0) if p.rl_only_advantage else cfg.opd
    rows = []
    for b, (ids, s) in enumerate(zip(ro.response_ids, sigs)):
        n, old_b = len(ids), (old[b, :len(ids)] if old is not None else None)
        if chain is not None:
            rows.append((np.full(n, chain[b]), np.ones(n, bool)))
        else:
            rows.append(_turn_row(p.strategy.turn, s, teacher_lps.get(b), old_b, n, opd_cfg))
    teacher_batch = None
    if p.teacher_batch:  # the teacher's prompt where there is a hint, the student's elsewhere
        dev = ro.batch.input_ids.device
        teacher_batch = pack([teacher_ids.get(b, p) for b, p in enumerate(ro.prompt_ids)], ro.response_ids,
                             tok.pad_token_id).to(dev)
    return rows, sigs, teacher_batch, _opd_health(teacher_lps, old)


def _turn_row(turn: str, s, tlp: Optional[np.ndarray], old_b: Optional[np.ndarray], n: int, opd_cfg):
    """One turn's (signal (n,) float, mask (n,) bool) as the plan's ``turn`` says: "vote" (Binary RL's score on
    every token, a 0 vote masked), "gap" (OPD's teacher-minus-student gap; no hint: no sample) or "vote+gap"."""
    if turn == "vote":
        return binary_rl_advantages(s.score, n)
    if turn == "gap":
        return (opd_advantages(tlp, old_b, opd_cfg), np.ones(n, bool)) if tlp is not None \
            else (np.zeros(n), np.zeros(n, bool))
    return combined_advantages(s, tlp, old_b, opd_cfg)


def task_teacher_prompt(task, hint: str, tokenizer) -> str:
    """The hinted teacher's prompt for ``task``: the task's own ``teacher_prompt(hint, tokenizer)`` where it has one
    (a turn served by the live server: its messages with the hint appended, :class:`~claw_lib.serve.engine.ServedTask`),
    else the question of its fact in the task's prompt form (:func:`~claw_lib.prompts.teacher_prompt`)."""
    own = getattr(task, "teacher_prompt", None)
    if own is not None:
        return own(hint, tokenizer)
    return teacher_prompt(task.fact.question(), hint, task.fact.lang, tokenizer=tokenizer, form=task.form)


@torch.no_grad()
def _choose_hints_by_overlap(ro: Rollout, sigs, cfg: PPOConfig, scorer: Scorer):
    """The paper's second version's sequence-optimal hint choice, on every turn with more than one candidate
    (:func:`~claw_lib.signals.judges.hint_candidates`): the sampling policy's top-k at each response position
    (``ro.old_topk``, from the rollout's forward) against the teacher's under each candidate (one padded forward of
    all candidates), :func:`~claw_lib.signals.opd.overlap_choice`. Returns the turn signals with the chosen hints."""
    from ..signals.judges import hint_candidates
    from ..signals.opd import overlap_choice

    o = cfg.opd
    cands = {b: hint_candidates(s.hint_votes, o.min_hint_chars, o.hint_candidates) for b, s in enumerate(sigs) if s.hint}
    multi = [b for b, c in cands.items() if len(c) > 1]
    if not multi:
        return sigs
    tok, dev, k = scorer.tokenizer, ro.batch.input_ids.device, o.selection_k
    s_top = _rollout_topk(ro, k)[0][torch.as_tensor(multi, device=dev)]                           # (n, T, k)
    pairs = [(b, h) for b in multi for h in cands[b]]
    t_ids = [encode(tok, task_teacher_prompt(ro.tasks[b], h, tok)) for b, h in pairs]
    tb = pack(t_ids, [ro.response_ids[b] for b, _ in pairs], tok.pad_token_id).to(dev)
    t_top = gather_positions(scorer.teacher(input_ids=tb.input_ids, attention_mask=tb.attention_mask).logits,
                             tb.logit_index).topk(k, -1).indices                                  # (sum M, T', k)
    out, j = list(sigs), 0
    for i, b in enumerate(multi):
        m, n = len(cands[b]), len(ro.response_ids[b])
        choice, _ = overlap_choice(s_top[i, :n], t_top[j:j + m, :n])
        out[b] = dataclasses.replace(sigs[b], hint=cands[b][choice])
        j += m
    return out


def _rollout_topk(ro: Rollout, k: int):
    """The first ``k`` of the rollout's top ids per position and their log-probs; a rollout made with a config that
    needed none is refused, naming the fix."""
    if ro.old_topk is None or ro.old_topk[0].shape[-1] < k:
        raise ValueError(f"this step needs the sampling policy's top {k} ids per position, and the rollout kept "
                         f"{0 if ro.old_topk is None else ro.old_topk[0].shape[-1]}: make the rollout with the step's config")
    return ro.old_topk[0][..., :k], ro.old_topk[1][..., :k]


def _chain_step_rewards(ro: Rollout, sigs, cfg: PPOConfig) -> Optional[np.ndarray]:
    """The steps of multi-step episodes (:class:`~claw_lib.toy.chains.ChainStep`): each step's reward, the episode's
    outcome plus (``cfg.task.chain_reward == "outcome+prm"``) the judge's vote on the step's next state; None for
    any other batch."""
    from ..toy.chains import ChainStep, chain_rewards, episode_outcomes

    if not ro.tasks or not isinstance(ro.tasks[0], ChainStep):
        return None
    return chain_rewards(episode_outcomes(ro.tasks, ro.scores), [s.score for s in sigs], cfg.task.chain_reward)


def v2_hybrid(cfg: PPOConfig) -> bool:
    """Combined as the paper's second version trains it (``strategy="combined"`` with
    ``loss.distill="topk_clipped"``): the loss is w_rl x the clipped surrogate with the judge's score r on the
    sampled tokens plus w_opd x the clipped top-k OPD loss, on every turn that gives a sample. Where the turn has
    no hint the teacher reads the student's own prompt (upstream's RL-only sample, whose only teacher context is
    the un-hinted one: with the frozen teacher the term pulls towards the initial model; docs/openclaw_v2.md)."""
    return plan(cfg).loss_family == "hybrid"


#: the OPD health metrics :func:`compute_signals` logs on a step with a hinted turn (see :data:`METRICS`)
OPD_HEALTH = ("opd/gap_mean", "opd/worst_gap_mean", "opd/teacher_mass")


def _opd_health(teacher_lps: Dict[int, np.ndarray], old: Optional[np.ndarray]) -> Dict[str, float]:
    """OPD's health on the hinted responses (none: {}): the mean teacher-minus-student gap per token, the mean of
    each response's most negative gap (how hard the teacher rejects its worst token), and the teacher's mass on
    the student's own tokens (mean exp(log pi_T): low when the hinted model would not have said them)."""
    if not teacher_lps or old is None:
        return {}
    gaps = [np.asarray(t) - old[b, :len(t)] for b, t in teacher_lps.items()]
    values = (float(np.mean(np.concatenate(gaps))), float(np.mean([g.min() for g in gaps])),
              float(np.mean(np.exp(np.concatenate(list(teacher_lps.values()))))))
    return dict(zip(OPD_HEALTH, values))


def compute_signals(ro: Rollout, cfg: PPOConfig, scorer: Scorer) -> Signals:
    """Stage 2: the strategy's per-token signal and mask for every response (shapes (B, T))."""
    if plan(cfg).strategy.signal == "token_reward":
        rows, judged, teacher_batch, health = _token_reward_rows(ro, cfg, scorer), None, None, {}
        hints = [None] * len(ro.tasks)
    else:
        rows, judged, teacher_batch, health = _openclaw_rows(ro, cfg, scorer)
        hints = [s.hint for s in judged]
    rmask = ro.batch.response_mask
    A = torch.zeros(rmask.shape, device=rmask.device)
    M = torch.zeros(rmask.shape, dtype=torch.bool, device=rmask.device)
    for b, (a, m) in enumerate(rows):
        A[b, :len(a)] = torch.as_tensor(a, dtype=torch.float32)
        M[b, :len(m)] = torch.as_tensor(m)
    M &= rmask
    v = A[M]
    metrics = {"opd/accepted_fraction": float(np.mean([h is not None for h in hints])),
               "reward/token_mean": float(v.mean()) if v.numel() else 0.0,
               "reward/token_std": float(v.std()) if v.numel() > 1 else 0.0,
               "reward/positive_share": float((v > 0).float().mean()) if v.numel() else 0.0,
               "reward/negative_share": float((v < 0).float().mean()) if v.numel() else 0.0, **health}
    return Signals(A, M, hints, teacher_batch, metrics, judged)


# --------------------------------------------------------------------------- 3. advantages
@dataclass
class Advantages:
    """Stage 3's output: advantages (B, T) and the loss mask (B, T) bool; sample_rows (B,) bool, the
    responses that count in a "sample_mean" loss's denominator (Binary RL and GRPO: every response, a
    0-scored turn included, as upstream submits it with its mask zeroed; otherwise the responses with
    a sample); returns (B, T) for the value loss (advantage "gae" only); metrics:
    ``reward/advantage_mean``, ``reward/masked_fraction``."""

    advantages: torch.Tensor
    mask: torch.Tensor
    sample_rows: torch.Tensor
    returns: Optional[torch.Tensor] = None
    metrics: Dict[str, float] = field(default_factory=dict)


def _values(policy, value_head, batch: Batch) -> torch.Tensor:
    """The value head on the policy's last hidden state at the response positions: (B, T)."""
    out = policy(input_ids=batch.input_ids, attention_mask=batch.attention_mask, output_hidden_states=True)
    return value_head(gather_positions(out.hidden_states[-1], batch.logit_index))


def compute_advantages(ro: Rollout, sig: Signals, cfg: PPOConfig, policy=None, value_head=None) -> Advantages:
    """Stage 3: "direct" uses the signal as it is; "whiten" whitens it over the mask (mean 0, std 1
    across the batch's tokens); "reward_to_go" sums each token's signal and the ones after it,
    discounted by ``cfg.gamma``; "grpo" broadcasts each response's user score minus the batch mean to
    all its tokens (every response counts); "gae" runs GAE with ``value_head``'s values and whitens the
    result over the mask."""
    A, M, returns = sig.token_signal, sig.mask, None
    rmask = ro.batch.response_mask
    if cfg.advantage == "grpo":
        seq = torch.tensor(ro.scores, device=rmask.device)
        A = (seq - seq.mean()).unsqueeze(1).expand(-1, rmask.shape[1]) * rmask
        M = rmask.clone()
    elif cfg.advantage == "gae":
        with torch.no_grad():
            values = _values(policy, value_head, ro.batch)
        A, returns = gae(A.clone(), values, M, cfg.gamma, cfg.lam)
        if M.sum() > 1:
            A = masked_whiten(A, M) * M
    elif cfg.advantage == "whiten" and M.sum() > 1:
        A = masked_whiten(A, M) * M
    elif cfg.advantage == "reward_to_go":
        A = reward_to_go(A, M, cfg.gamma)
    metrics = {"reward/advantage_mean": float(masked_mean(A, M)) if M.any() else 0.0,
               "reward/masked_fraction": float(M.any(1).float().mean())}
    rows = torch.ones_like(M[:, 0]) if plan(cfg).every_row else M.any(1)
    return Advantages(A, M, rows, returns, metrics)


# --------------------------------------------------------------------------- 4. update
@dataclass
class _Minibatch:
    """What a loss function reads of one minibatch (b rows): lp (b, T) the policy's log-probs of the sampled tokens;
    logits (b, T, V); t_logits (b, T, V) the hinted teacher's (the plan's ``teacher_batch``, else None); old (b, T)
    log pi_old (None: ``lp`` detached); advantages (b, T); mask (b, T) bool; rows (b,) bool, the sample rows;
    old_topk ((b, T, k) long, (b, T, k) float) for the top-k losses, else None."""

    lp: torch.Tensor
    logits: torch.Tensor
    t_logits: Optional[torch.Tensor]
    old: Optional[torch.Tensor]
    advantages: torch.Tensor
    mask: torch.Tensor
    rows: torch.Tensor
    old_topk: Optional[Tuple[torch.Tensor, torch.Tensor]]


def _surrogate_loss(mb: _Minibatch, L, cfg: PPOConfig):
    """The clipped surrogate on the advantages (pi_old: the rollout's log-probs, or the first forward's)."""
    return clipped_surrogate(mb.lp, mb.old if mb.old is not None else mb.lp.detach(), mb.advantages, mb.mask,
                             L.eps, L.eps_high, L.loss_agg, mb.rows)


def _distill_loss(mb: _Minibatch, L, cfg: PPOConfig):
    """opd_kl: KL(T || S) over the vocabulary ("forward_kl") or KL(S || T) over the teacher's top-K; no clip."""
    div = generalized_jsd(mb.logits, mb.t_logits, beta=0.0) if L.distill == "forward_kl" \
        else topk_reverse_kl(mb.logits, mb.t_logits, L.distill_topk)
    return aggregate_loss(div, mb.mask, L.loss_agg, mb.rows), torch.tensor(0.0)


def _topk_clipped_loss(mb: _Minibatch, L, cfg: PPOConfig):
    """The paper's second version: a clipped surrogate over the old student's top-k ids, the teacher's gap clipped
    (:func:`~claw_lib.signals.opd.clipped_topk_opd`); the clip share is the top-k loss's."""
    ids_k, old_k = mb.old_topk
    div, held = clipped_topk_opd(torch.log_softmax(mb.logits.float(), -1).gather(-1, ids_k), old_k,
                                 torch.log_softmax(mb.t_logits.float(), -1).gather(-1, ids_k),
                                 L.clipped_gap, L.eps, L.eps_high)
    return aggregate_loss(div, mb.mask, L.loss_agg, mb.rows), masked_mean(held, mb.mask)


def _hybrid_loss(mb: _Minibatch, L, cfg: PPOConfig):
    """The v2 combined: the surrogate on w_rl r (in the advantages) + w_opd x the clipped top-k loss; the logged
    clip share is the surrogate's (the top-k loss's own is not logged)."""
    topk, _ = _topk_clipped_loss(mb, L, cfg)
    loss, clipfrac = _surrogate_loss(mb, L, cfg)
    return loss + cfg.opd.w_opd * topk, clipfrac


#: the update's loss per :data:`~claw_lib.rl.strategies.LOSS_FAMILIES`: (minibatch, resolved loss config, cfg) ->
#: (loss, clip share)
LOSSES = {"surrogate": _surrogate_loss, "distill": _distill_loss, "topk_clipped": _topk_clipped_loss,
          "hybrid": _hybrid_loss}


def _minibatch(policy, ro: Rollout, sig: Signals, adv: Advantages, cfg: PPOConfig, mb_t, value_head, teacher,
               old_topk):
    """The policy's forward on the rows ``mb_t`` (and the teacher's, when the plan reads it): (_Minibatch, the
    policy's output, the packed rows)."""
    sub = ro.batch.select(mb_t)
    out = policy(input_ids=sub.input_ids, attention_mask=sub.attention_mask, output_hidden_states=value_head is not None)
    logits = scaled_logits(gather_positions(out.logits, sub.logit_index), cfg.temperature)   # (b, T, V)
    lp = selective_log_softmax(logits.float(), sub.response_ids)   # (b, T)
    t_logits = None
    if sig.teacher_batch is not None:  # opd_kl, or the v2 hybrid's OPD term
        tb = sig.teacher_batch.select(mb_t)
        with torch.no_grad():
            t_logits = gather_positions(teacher(input_ids=tb.input_ids, attention_mask=tb.attention_mask).logits,
                                        tb.logit_index) / cfg.temperature
    old = ro.logprobs[mb_t] if ro.logprobs is not None else None
    k = (old_topk[0][mb_t], old_topk[1][mb_t]) if old_topk is not None else None
    return _Minibatch(lp, logits, t_logits, old, adv.advantages[mb_t], adv.mask[mb_t], adv.sample_rows[mb_t], k), out, sub


def _minibatch_step(policy, optimizer, params, ro: Rollout, sig: Signals, adv: Advantages, cfg: PPOConfig, p: Plan,
                    mb_t, value_head, teacher, old_topk, stats: Dict[str, list]) -> None:
    """One optimizer step on the rows ``mb_t``: the plan's loss, plus the KL and value terms; its stats appended."""
    L = p.loss
    mb, out, sub = _minibatch(policy, ro, sig, adv, cfg, mb_t, value_head, teacher, old_topk)
    loss, clipfrac = LOSSES[p.loss_family](mb, L, cfg)
    kl = kl_estimate(mb.lp, ro.ref_logprobs[mb_t], L.kl_estimator) if ro.ref_logprobs is not None else None
    if L.kl_coef:
        loss = loss + L.kl_coef * aggregate_loss(kl, mb.mask, L.loss_agg, mb.rows)
    if value_head is not None:
        v = value_head(gather_positions(out.hidden_states[-1], sub.logit_index))
        loss = loss + L.vf_coef * masked_mean((v - adv.returns[mb_t]) ** 2, mb.mask)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, L.max_grad_norm)
    optimizer.step()
    with torch.no_grad():
        stats["clipfrac"].append(float(clipfrac))
        if mb.old is not None:
            stats["approx_kl"].append(float(masked_mean(0.5 * (mb.lp - mb.old) ** 2, mb.mask)))
        stats["entropy"].append(float(masked_mean(entropy_from_logits(mb.logits), mb.mask)))
        if kl is not None:
            k3 = kl if L.kl_estimator == "low_var_kl" else kl_estimate(mb.lp, ro.ref_logprobs[mb_t])
            stats["kl"].append(float(masked_mean(k3, mb.mask)))
        stats["loss"].append(float(loss))


def ppo_update(policy, optimizer, ro: Rollout, sig: Signals, adv: Advantages, cfg: PPOConfig, step: int,
               value_head=None, teacher=None) -> Dict[str, float]:
    """Stage 4: ``cfg.epochs`` passes of ``cfg.minibatches`` minibatches (shuffled with a seed per
    step): the loss of the strategy's plan (:data:`LOSSES`: the clipped surrogate, or, for ``opd_kl``, the
    divergence to ``teacher`` on ``sig.teacher_batch``, or a top-k loss), plus the KL and value terms, each
    reduced as ``cfg.loss`` resolves for the strategy (clip range and token or sample mean:
    :meth:`~claw_lib.config.LossConfig.for_strategy`); returns the ``policy/*``, ``objective/kl`` and ``value/*``
    metrics (token means). Nothing is trained when the mask is empty."""
    p = plan(cfg)
    M = adv.mask
    params = list(policy.parameters()) + (list(value_head.parameters()) if value_head is not None else [])
    policy.train()
    idx = np.arange(len(ro.response_ids))
    stats: Dict[str, list] = {"clipfrac": [], "approx_kl": [], "entropy": [], "kl": [], "loss": []}
    old_topk = _rollout_topk(ro, p.loss.clipped_k) if p.loss_family in ("topk_clipped", "hybrid") and M.any() else None
    if M.any():
        for _ in range(cfg.epochs):
            np.random.default_rng(cfg.seed * 7919 + step).shuffle(idx)
            for mb in np.array_split(idx, cfg.minibatches):
                mb_t = torch.as_tensor(mb, device=M.device)
                if M[mb_t].any():
                    _minibatch_step(policy, optimizer, params, ro, sig, adv, cfg, p, mb_t, value_head, teacher,
                                    old_topk, stats)
    names = {"clipfrac": "policy/clipfrac", "approx_kl": "policy/approx_kl", "entropy": "policy/entropy",
             "kl": "objective/kl", "loss": "policy/loss"}
    metrics = {name: float(np.mean(stats[k])) if stats[k] else 0.0 for k, name in names.items()
               if k != "kl" or ro.ref_logprobs is not None}  # no reference pass, no KL to log
    if adv.returns is not None and M.sum() > 1:
        with torch.no_grad():
            vals = _values(policy, value_head, ro.batch)
        r, v = adv.returns[M], vals[M]
        metrics["value/explained_variance"] = float(1 - (r - v).var() / r.var().clamp(min=1e-8))
    policy.eval()
    return metrics


def _eval_metrics(policy, tok, env, tasks, cfg: PPOConfig) -> Dict[str, float]:
    """``eval/score`` (greedy answers to the fixed evaluation prompts), and with several personas (``task.user
    "joint"``) each persona's own ``eval/score/<user>``."""
    from ..toy.evaluation import evaluate_by_user

    by = evaluate_by_user(policy, tok, env, tasks, eval_tokens(cfg))
    return {"eval/score": by.pop("all"), **{f"eval/score/{name}": v for name, v in by.items()}}


# --------------------------------------------------------------------------- the loop
def train(cfg: PPOConfig, out_dir=None, resume: bool = True, stop_after: Optional[int] = None,
          force: bool = False) -> List[Dict]:
    """Run PPO; returns the list of per-step metric dicts (also written to ``out_dir``).

    ``out_dir`` is locked while the run writes to it. A folder that holds a run with the same
    settings (``steps`` aside, so a run can be extended) is resumed from its checkpoint; one that
    holds a run with other settings, or a run that cannot be resumed, is refused (ValueError naming
    the differing settings) unless ``force``, which starts over there. ``resume=False`` starts over
    as well. stop_after: stop (as if interrupted) after this many steps of this call (for tests).
    """
    from ..config import validate
    from ..utils import OutputFolder

    validate(cfg)
    if out_dir is None:
        return _train(_Run.start(cfg, None, False, False), stop_after)
    folder = OutputFolder.claim(out_dir, "train", force, "training output", names=_RUN_FILES, legacy=_legacy_run_files)
    with folder.locked(force):  # checked again under the lock; stale temporary files of a killed run removed
        return _train(_Run.start(cfg, folder, resume, force), stop_after)


def _train(run: "_Run", stop_after: Optional[int]) -> List[Dict]:
    from tqdm.auto import tqdm

    cfg, policy, tok = run.cfg, run.policy, run.tokenizer
    bar = tqdm(range(run.start_step, cfg.steps), desc=f"ppo {cfg.strategy}", disable=not cfg.progress, leave=False)
    for k, step in enumerate(bar):
        t0 = time.time()
        ro = rollout(policy, tok, run.env, cfg, step, ref=run.ref if cfg.loss.kl_coef else None)  # 1.
        t1 = time.time()
        sig = compute_signals(ro, cfg, run.scorer)                                         # 2.
        t2 = time.time()
        adv = compute_advantages(ro, sig, cfg, policy, run.value_head)                     # 3.
        stats = ppo_update(policy, run.optimizer, ro, sig, adv, cfg, step, run.value_head,
                           teacher=run.scorer.teacher)                                      # 4.
        _check_finite(policy, run.value_head, cfg, step + 1)
        metrics = {"step": step + 1, "reward/score": float(np.mean(ro.scores)), **sig.metrics, **adv.metrics,
                   **stats, "timing/rollout_s": t1 - t0, "timing/score_s": t2 - t1,
                   "timing/update_s": time.time() - t2,
                   "timing/rollout_tokens": int(ro.batch.response_mask.sum())}
        if cfg.eval_every and ((step + 1) % cfg.eval_every == 0 or step + 1 == cfg.steps):
            metrics.update(_eval_metrics(policy, tok, run.eval_env, run.eval_tasks, cfg))
        metrics["memory/peak_gib"] = peak_memory_gib(str(next(policy.parameters()).device))
        run.record(metrics)
        bar.set_postfix(score=f"{metrics['reward/score']:.2f}")
        if stop_after is not None and k + 1 >= stop_after:
            break
    return run.history


def needs_reference(cfg: PPOConfig) -> bool:
    """Whether a run needs the initial policy besides the trained one: the KL term (``kl_coef > 0``), the
    frozen OPD teacher (opd, combined, opd_kl), or the perplexity judge. Otherwise no reference is held."""
    return plan(cfg).reference


def prepare_policy(policy, cfg: PPOConfig, reference: bool = True, adapters: bool = True):
    """The settings and the reference of a run on ``policy`` (a loaded causal LM): the per-model settings
    (None in ``cfg``) resolved from its parameter count (:func:`claw_lib.config.resolve_for_model`), a warning
    (``UserWarning``, one line) when the learning rate is far above what the model can take, LoRA adapters
    added in place when ``lora_rank > 0`` (:mod:`claw_lib.models.lora`), and the reference: the adapter-disabled
    view of the same model with adapters (no copy), a frozen copy when :func:`needs_reference`, else None.
    ``reference=False``: no reference is made (None); ``adapters=False``: none are added (a PEFT adapter's rank
    in ``cfg.lora_rank`` then only picks the learning rate). Returns (resolved cfg, reference)."""
    import warnings

    from ..config import lr_warning, resolve_for_model, validate
    from ..models.lora import AdapterDisabled, add_lora, count_parameters
    from ..signals.opd import frozen_teacher

    n = count_parameters(policy)
    cfg = resolve_for_model(cfg, n)
    validate(cfg)
    msg = lr_warning(cfg.lr, n, cfg.lora_rank)
    if msg:
        warnings.warn(msg, UserWarning, stacklevel=3)
    if cfg.lora_rank and adapters:
        add_lora(policy, cfg.lora_rank, seed=cfg.seed)  # drawn from the run's seed: the same run repeats (LR01)
        return cfg, (AdapterDisabled(policy) if reference else None)
    return cfg, (frozen_teacher(policy) if reference and needs_reference(cfg) else None)


def eval_tokens(cfg: PPOConfig) -> int:
    """Longest greedy answer in evaluation: EVAL_MAX_NEW_TOKENS (40), or the rollout's cap when longer."""
    from ..toy.evaluation import EVAL_MAX_NEW_TOKENS

    return max(EVAL_MAX_NEW_TOKENS, cfg.max_new_tokens)


class TrainingDivergedError(SettingError):
    """The weights became NaN or inf in an update (a learning rate or a loss weight far too large);
    ``settings``: the dotted names of the settings to lower."""

    settings = ("lr", "loss.kl_coef", "opd.w_rl_negative")


def _check_finite(policy, value_head, cfg: PPOConfig, step: int) -> None:
    """Raise :class:`TrainingDivergedError` when a weight of the policy (or the value head) is NaN or
    inf after the update of ``step``: the next step would fail deep inside sampling ("probability tensor
    contains either inf, nan or element < 0"). One reduction per tensor, one sync."""
    params = list(policy.parameters()) + (list(value_head.parameters()) if value_head is not None else [])
    with torch.no_grad():
        total = torch.stack([p.detach().float().abs().sum().cpu() for p in params]).sum()
    if not torch.isfinite(total):
        if any(p.dtype == torch.float16 for p in params):  # float16 weights (LoRA on them too): the cause (DT01)
            e = TrainingDivergedError(
                f"the policy's weights became NaN or inf in the update of step {step} with dtype float16 (the kit "
                "trains without loss scaling, so float16 updates overflow): train with dtype float32 or bfloat16")
            e.settings = ("dtype",)
            raise e
        raise TrainingDivergedError(
            f"the policy's weights became NaN or inf in the update of step {step} (lr {cfg.lr:g}, loss.kl_coef "
            f"{cfg.loss.kl_coef:g}, opd.w_rl_negative {cfg.opd.w_rl_negative}): lower the learning rate or the loss "
            "weights")


@dataclass
class _Run:
    """Everything a training run holds between steps, and its output folder (metrics, config,
    checkpoint)."""

    cfg: PPOConfig
    policy: object
    tokenizer: object
    ref: object
    value_head: Optional[ValueHead]
    optimizer: torch.optim.Optimizer
    env: object
    eval_env: object
    eval_tasks: List[Task]
    scorer: Scorer
    out: Optional[Path]
    history: List[Dict]
    start_step: int
    saved_step: int = 0
    """the step of the last checkpoint written (0: none yet)"""

    @classmethod
    def start(cls, cfg: PPOConfig, folder, resume: bool, force: bool) -> "_Run":
        """The run's state; ``folder``: its :class:`~claw_lib.utils.OutputFolder` (locked), or None."""
        from ..models.lm import load_causal_lm
        from ..toy.users import make_env
        from ..utils import resolve_device, set_threads

        _check(cfg)
        out = folder.path if folder is not None else None
        saved = _previous_run(cfg, folder, resume, force) if folder is not None else None  # before any slow work
        # a resumed run keeps the thread count of the run it resumes (float sums are ordered by it)
        threads = cfg.threads or (int(saved.get("threads", 0) or 0) if saved else 0)
        cfg = dataclasses.replace(cfg, threads=set_threads(threads))
        if folder is not None:
            folder.register(*_RUN_FILES)
        dev = resolve_device(cfg.device)
        t_load = time.time()
        ck = _load_checkpoint(out / "checkpoint.pt", dev, cfg) if saved is not None else None  # checked before the model
        policy, tok = load_causal_lm(cfg.model, device=dev, dtype=cfg.dtype)
        cfg, ref = prepare_policy(policy, cfg)
        if saved is not None:  # the per-model settings are known only now: they must match the saved run's too
            _check_resolved(saved, cfg, out)
        torch.manual_seed(cfg.seed)
        vhead = ValueHead(policy.config.hidden_size).to(dev) if cfg.advantage == "gae" else None
        params = [p for p in policy.parameters() if p.requires_grad] + (list(vhead.parameters()) if vhead else [])
        opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=0.0)
        env = make_env(cfg.task, cfg.seed, tok)
        eval_env = make_env(cfg.task, 10_000 + cfg.seed, tok, env.world, evaluation=True)
        run = cls(cfg, policy, tok, ref, vhead, opt, env, eval_env, eval_env.sample(cfg.eval_prompts),
                  Scorer.for_run(cfg, policy, ref, tok), out, [], 0)
        from .fit import check_fits  # before anything is written: positions, top-k, a step's memory

        check_fits(cfg, policy, tok, run.eval_tasks, make_env(cfg.task, cfg.seed, tok, env.world).sample(cfg.batch_size),
                   dev)
        if ck is not None:
            path = out / "checkpoint.pt"
            try:
                if cfg.lora_rank:  # adapters: the base is the model on disk, the checkpoint must hold every adapter
                    _check_adapter_keys(policy, ck["model"])
                policy.load_state_dict(ck["model"], strict=not cfg.lora_rank)
                opt.load_state_dict(ck["opt"])
                if vhead is not None:
                    vhead.load_state_dict(ck["vhead"])
                run.history, run.start_step = list(ck["history"]), int(ck["step"])
            except (RuntimeError, KeyError, ValueError, TypeError) as e:
                lines = [x.strip() for x in str(e).splitlines() if x.strip()] or [type(e).__name__]
                detail = lines[min(1, len(lines) - 1)][:160]  # the first size mismatch, not the model's class
                raise ValueError(f"the checkpoint {path} does not fit this run's model ({detail}); delete it or pass "
                                 "--force to start over") from None
            run.saved_step = run.start_step
        if out is not None:
            from ..utils import atomic_write

            with atomic_write(out / "config.json") as f:
                f.write(json.dumps(asdict(cfg), indent=1))
        if run.start_step == 0:
            policy.eval()
            load_s = time.time() - t_load
            run.history.append({"step": 0, **_eval_metrics(policy, tok, eval_env, run.eval_tasks, cfg),
                                "timing/load_s": load_s})
        return run

    def record(self, metrics: Dict) -> None:
        """Append a step's metrics; write the metrics files and, every ``save_every`` steps, a checkpoint."""
        self.history.append(metrics)
        if not self.out:
            return
        _write_metrics(self.out, self.history)
        step = metrics["step"]
        if self.cfg.save_every and (step % self.cfg.save_every == 0 or step == self.cfg.steps):
            from ..utils import atomic_write

            from ..models.lora import trainable_state_dict

            model = trainable_state_dict(self.policy) if self.cfg.lora_rank else self.policy.state_dict()
            ck = {"model": model, "opt": self.optimizer.state_dict(), "history": self.history,
                  "step": step, "config": asdict(self.cfg)}  # the config: a checkpoint resumes only its own run
            if self.value_head is not None:
                ck["vhead"] = self.value_head.state_dict()
            try:
                with atomic_write(self.out / "checkpoint.pt", "wb") as f:
                    torch.save(ck, f)
            except (RuntimeError, OSError) as e:  # torch.save reports a full disk as RuntimeError ("unexpected pos")
                kept = f"the checkpoint of step {self.saved_step} is kept" if self.saved_step else "no checkpoint is kept yet"
                raise CheckpointWriteError(
                    f"no space left writing {self.out / 'checkpoint.pt'} (the disk is full or a file size limit such as "
                    f"`ulimit -f` was reached: {type(e).__name__}); {kept}") from None
            self.saved_step = step


def _check_adapter_keys(policy, state) -> None:
    """Refuse (ValueError) a LoRA checkpoint whose weights are not exactly the policy's adapters: loaded with
    ``strict=False``, it would go on with fresh random adapters under the old history (LR06)."""
    from ..models.lora import trainable_state_dict

    want, got = set(trainable_state_dict(policy)), set(state) if isinstance(state, dict) else set()
    if want != got:
        raise ValueError(f"\nit holds {len(want & got)} of the run's {len(want)} adapter weights"
                         + (f" and {len(got - want)} others" if got - want else ""))


class CheckpointWriteError(OSError):
    """checkpoint.pt could not be written whole (a full disk); the previous checkpoint is intact."""


#: settings that do not change a run's numbers: a folder can be resumed with other values of these
_RESUMABLE = {"steps", "progress", "save_every", "device"}
#: the files a run writes into its folder (its marker lists them)
_RUN_FILES = ("checkpoint.pt", "metrics.jsonl", "metrics.csv", "config.json")


def _legacy_run_files(out: Path) -> set:
    """The run files in a folder that a kit without markers wrote: those of :data:`_RUN_FILES` there, if its
    config.json is a run's (a PPOConfig with its ``strategy`` and ``task``) and it is not a TRL run."""
    try:
        saved = json.loads((out / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()
    if not isinstance(saved, dict) or not {"strategy", "task"} <= set(saved) or (out / "engine.json").exists():
        return set()
    return {n for n in _RUN_FILES if (out / n).exists()}


def _differ(old: Dict, new: Dict) -> List[str]:
    """The settings (flattened) in which two runs differ, those that do not change a run's numbers aside;
    a thread count of 0 ("the free cores") matches any, and so does a per-model setting not resolved yet (None
    before the model is loaded: :func:`_check_resolved` compares it once it is)."""
    from ..config import PER_MODEL

    return [f"{k} {old.get(k)!r} (saved) vs {new[k]!r}" for k in new if k not in _RESUMABLE and old.get(k) != new[k]
            and not (k == "threads" and 0 in (old.get(k), new[k])) and not (k in PER_MODEL and new[k] is None)]


def _check_resolved(saved: Dict, cfg: PPOConfig, out: Path) -> None:
    """Refuse to resume when a per-model setting, resolved from the loaded model, differs from the saved run's."""
    from ..config import PER_MODEL, flatten

    differ = [d for d in _differ(flatten(_config_from_dict(saved)), flatten(cfg)) if d.split(" ", 1)[0] in PER_MODEL]
    if differ:
        raise ValueError(f"{out} holds a run with other settings ({'; '.join(differ[:4])}); choose another folder or "
                         "pass --force to start over there")


def _previous_run(cfg: PPOConfig, folder, resume: bool, force: bool) -> Optional[Dict]:
    """The saved config (config.json) of the run in ``folder`` (an :class:`~claw_lib.utils.OutputFolder`)
    when it is one to resume: its settings match ``cfg`` and it has a checkpoint. Refuses (ValueError) a run
    with other settings or without a checkpoint, unless ``force``, which removes that run's files (only
    those claw wrote). None for a folder without a run."""
    from ..config import flatten

    out = folder.path
    if not folder.used:
        return None
    if force or not resume:
        folder.remove_own()
        return None
    try:
        saved = json.loads((out / "config.json").read_text())
        old = flatten(_config_from_dict(saved))
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as e:
        raise ValueError(f"{out}/config.json cannot be read ({type(e).__name__}); pass --force to start over there") from None
    differ = _differ(old, flatten(cfg))
    if differ:
        raise ValueError(f"{out} holds a run with other settings ({'; '.join(differ[:4])}"
                         f"{'; ...' if len(differ) > 4 else ''}); choose another folder or pass --force to start over there")
    if not (out / "checkpoint.pt").exists():
        raise ValueError(f"{out} holds a run without a checkpoint: no checkpoint yet (it stopped before its first one, "
                         f"at step {saved.get('save_every')}, or save_every is 0), so there is nothing to resume; run "
                         "again with --force to start over there")
    return saved


def _config_from_dict(d: Dict) -> PPOConfig:
    """A PPOConfig from its ``asdict`` form (config.json); unknown fields raise TypeError."""
    from ..config import AlignConfig, LossConfig, OPDConfig, RewardConfig, TaskConfig

    top = {k: v for k, v in d.items() if k not in ("task", "loss", "reward", "opd")}
    reward = {**d["reward"], "align": AlignConfig(**d["reward"]["align"])}
    task = {**d["task"], "relations": tuple(d["task"]["relations"])}
    return PPOConfig(**top, task=TaskConfig(**task), loss=LossConfig(**d["loss"]), reward=RewardConfig(**reward),
                     opd=OPDConfig(**d["opd"]))


def _load_checkpoint(path: Path, device, cfg: Optional[PPOConfig] = None) -> Dict:
    """checkpoint.pt, checked: a dict with the kit's keys and, with ``cfg``, written by a run of the same
    settings (its config inside it): a checkpoint copied from another run is refused, not resumed."""
    from ..config import flatten

    try:
        ck = torch.load(path, weights_only=False, map_location=device)
    except Exception as e:  # a truncated or foreign file: say which and what to do
        raise ValueError(f"the checkpoint {path} cannot be read ({type(e).__name__}); delete it to start over, "
                         "or pass --force") from None
    missing = [k for k in ("model", "opt", "history", "step") if not isinstance(ck, dict) or k not in ck]
    if missing:
        raise ValueError(f"{path} is not a claw training checkpoint (it has no {', '.join(missing)}); delete it or "
                         "pass --force to start over")
    if cfg is not None:
        try:
            old = flatten(_config_from_dict(ck["config"]))
        except (KeyError, TypeError, ValueError, AttributeError):
            raise ValueError(f"{path} holds no record of the run that wrote it (an older claw-kit?), so it cannot be "
                             "matched to this run's config.json; pass --force to start over") from None
        differ = _differ(old, flatten(cfg))
        if differ:
            raise ValueError(f"{path} was written by another run ({'; '.join(differ[:3])}); it does not belong to "
                             f"{path.parent}/config.json: pass --force to start over")
    return ck


def _write_metrics(out: Path, history: List[Dict]) -> None:
    from ..utils import atomic_write

    with atomic_write(out / "metrics.jsonl") as f:
        for h in history:
            f.write(json.dumps(h) + "\n")
    keys = sorted({k for h in history for k in h}, key=lambda k: (k != "step", k))
    with atomic_write(out / "metrics.csv", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        for h in history:
            w.writerow(h)
