"""A small end-to-end PPO loop on the fact world (notebooks 08 and 09).

The four public stages of a step, numbered as in cleanrl (the loop that runs them, :func:`~claw_lib.rl.run.train`,
and the run's folder, checkpoint and metrics live in :mod:`claw_lib.rl.run`; what each strategy needs of every stage
is its row in :mod:`claw_lib.rl.strategies`):

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

Metrics per step go to ``metrics.jsonl`` / ``metrics.csv`` with namespaced keys (:data:`METRICS`), written by
:mod:`claw_lib.rl.run`, whose checkpoint every ``save_every`` steps makes an interrupted run resume to the same
result (sampling is seeded per step).
"""
from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch

from ..alignment import encoders  # load_encoder looked up at each call (a test may replace it)
from ..config import PPO_STRATEGIES as STRATEGIES
from ..config import PPOConfig, lr_warning, resolve_for_model, validate
from ..models.lm import (Batch, encode, generate, ids_logprobs, logprobs_from_batch, pack, pad_token_id,
                         response_logits, scaled_logits)
from ..models.lora import AdapterDisabled, count_parameters
from ..models.peft_lora import add_adapters
from ..ops import entropy_from_logits, masked_mean, masked_whiten, selective_log_softmax
from ..signals.judges import hint_candidates
from ..signals.mapping import policy_token_rewards
from ..signals.opd import (
    binary_rl_advantages,
    clipped_topk_opd,
    combined_advantages,
    failed_share,
    frozen_teacher,
    generalized_jsd,
    judge_turn,
    opd_advantages,
    overlap_choice,
    teacher_temperature,
    topk_reverse_kl,
    unrelated_hint,
)
from ..signals.reviser import batch_rewards, run_reviser, wants_base
from ..text.corrections import clean_correction, guess_lang
from ..text.langs import LanguageMismatchWarning
from ..toy.env import step_rewards
from .driver import Rollout, make_rollout, signal_tensors
from .core import aggregate_loss, clipped_surrogate, gae, kl_estimate, reward_to_go
from .strategies import Plan, plan

__all__ = ["PPOConfig", "STRATEGIES", "METRICS", "Rollout", "Scorer", "Signals", "Advantages", "rollout",
           "compute_signals", "compute_advantages", "ppo_update", "decode_response", "prepare_policy",
           "needs_reference", "minibatch"]

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
    "anchor/kl": "with an anchor set (claw_lib.rl.anchor; claw serve --anchor) only: mean KL(initial model || policy) "
                 "per answer token of the initial model's own answers to the anchor prompts, after each optimizer step "
                 "and before the anchor's own step (nats)",
    "anchor/kl_after": "the same after the anchor's step (never above anchor/kl: the step is searched until it is not)",
    "policy/topk_clipfrac": "the v2 hybrid only (combined with loss.distill \"topk_clipped\"): share of the old student's "
                            "top-k ids whose ratio the clipped top-k OPD loss held, over the masked tokens (policy/"
                            "clipfrac is its surrogate's; opd_kl's top-k share is policy/clipfrac)",
    "policy/approx_kl": "mean 0.5 (log pi - log pi_old)^2 during the update",
    "policy/entropy": "mean entropy of the policy at response tokens (nats)",
    "policy/loss": "the surrogate (or distillation) loss of the last minibatch",
    "value/explained_variance": "1 - Var(returns - values) / Var(returns), value head only",
    "opd/accepted_fraction": "share of turns with a usable hint (OPD samples after filtering)",
    "opd/gap_mean": "OPD, hinted responses only: mean teacher-minus-student log-prob per token (nats; logged when a "
                    "turn has a hint)",
    "opd/worst_gap_mean": "OPD, hinted responses: the mean over responses of their most negative gap (nats)",
    "opd/teacher_mass": "OPD, hinted responses: mean probability the hinted teacher gives the student's own tokens",
    "judge/failed_share": "with an LLM judge (opd.judge, claw train --judge): share of its votes (Binary RL votes and "
                          "hint votes) that failed: no valid \\boxed{} (an answer cut off or unparseable, an endpoint "
                          "that did not answer); a turn whose votes all fail scores 0 and gives no hint",
    "timing/rollout_s": "seconds spent sampling, scoring the samples' log-probs and collecting the user's replies",
    "timing/score_s": "seconds spent judging and computing the per-token signals",
    "timing/update_s": "seconds spent on advantages and the PPO update",
    "timing/rollout_tokens": "response tokens sampled this step",
    "timing/load_s": "step 0 only: seconds to load the model and set up the run (adapters, reference, encoder)",
    "memory/peak_gib": "peak memory of the process so far, GiB: torch.cuda.max_memory_allocated on a GPU, the peak "
                       "resident set size (ru_maxrss: weights, optimizer, activations, Python) on the CPU",
}


# --------------------------------------------------------------------------- 1. rollout
def decode_response(tokenizer, ids: List[int]) -> str:
    """The text a user reads for response ids: eos and special tokens dropped, whitespace stripped."""
    return tokenizer.decode([t for t in ids if t != tokenizer.eos_token_id], skip_special_tokens=True).strip()


def needs_old_logprobs(cfg: PPOConfig) -> bool:
    """Whether a step needs the rollout's log-probs before its update
    (:attr:`~claw_lib.rl.strategies.Plan.old_logprobs`)."""
    return plan(cfg).old_logprobs


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
    temp = cfg.temperature  # log-probs of the distribution that was sampled, as upstream
    p = plan(cfg)

    def score(batch):
        logprobs, old_topk, k = None, None, p.old_topk
        if p.old_logprobs:  # (B, T), and the top-k pair ((B, T, k), (B, T, k)) from the same forward
            logprobs, old_topk = logprobs_from_batch(policy, batch, temperature=temp, topk=k) if k else \
                (logprobs_from_batch(policy, batch, temperature=temp), None)
        ref_logprobs = logprobs_from_batch(ref, batch, temperature=temp) if ref is not None else None    # (B, T)
        return logprobs, ref_logprobs, old_topk

    texts = [decode_response(tokenizer, ids) for ids in response_ids]
    feedback = [env.step(t, x) for t, x in zip(tasks, texts)]
    return make_rollout(tasks, prompt_ids, response_ids, texts, feedback, tokenizer.pad_token_id,
                        next(policy.parameters()).device, score=score)


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
    reviser: object = None
    """binary / continuous / sentence: the reviser that reads the corrections (:mod:`claw_lib.signals.reviser`)"""

    @classmethod
    def for_run(cls, cfg: PPOConfig, policy, ref, tokenizer) -> "Scorer":
        """The scorer ``train`` uses: teacher per ``cfg.opd.teacher``, the encoder of
        ``cfg.reward.align`` for alignment strategies, the reference as perplexity judge."""
        encoder, s = None, plan(cfg).strategy
        if s.encoder:
            a = cfg.reward.align
            encoder = encoders.load_encoder(a.encoder, a.layer, str(next(policy.parameters()).device))
        return cls(tokenizer, teacher=policy if cfg.opd.teacher == "live" else ref, encoder=encoder,
                   judge_lm=(ref, tokenizer) if s.judge_lm else None, reviser=run_reviser(cfg, ref, tokenizer))


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
    if scorer.encoder is not None:  # every text of the batch in a few padded encoder passes
        nexts = [clean_correction(f.next_state).text if cfg.reward.clean else f.next_state for f in ro.feedback]
        scorer.encoder.prefetch(list(ro.texts) + nexts, cfg.reward.align.layer)
    pairs = [{"output": text, "correction": fb.next_state, "question": t.question}
             for t, text, fb in zip(ro.tasks, ro.texts, ro.feedback)]
    with warnings.catch_warnings():  # a sample in the wrong language is the policy's error, and rewarded as one
        warnings.simplefilter("ignore", LanguageMismatchWarning)
        trs = batch_rewards(pairs, cfg.strategy, cfg.reward, scorer.encoder, scorer.judge_lm, scorer.reviser,
                            ro.response_ids)  # through the reviser when the run has one
    rows = []
    for ids, tr in zip(ro.response_ids, trs):
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
    teacher_ids = {b: encode(tok, ro.tasks[b].teacher_prompt(sigs[b].hint, tok)) for b in hinted}
    t_temp = teacher_temperature(cfg.opd, cfg.temperature)  # opd.teacher_temperature (None: the rollout's)
    teacher_lps = dict(zip(hinted, ids_logprobs(scorer.teacher, [teacher_ids[b] for b in hinted],
                                                [ro.response_ids[b] for b in hinted], pad_token_id(tok),
                                                temperature=t_temp)[0])) if hinted else {}
    ctl = {b: encode(tok, ro.tasks[b].teacher_prompt(unrelated_hint(guess_lang(ro.texts[b], sigs[b].hint), b), tok))
           for b in hinted} if cfg.opd.contrast != "none" else {}  # opd.contrast: the unrelated follow-up's teacher
    control_lps = dict(zip(ctl, ids_logprobs(scorer.teacher, list(ctl.values()), [ro.response_ids[b] for b in ctl],
                                             pad_token_id(tok), temperature=t_temp)[0])) if ctl else {}
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
            rows.append(_turn_row(p.strategy.turn, s, teacher_lps.get(b), old_b, n, opd_cfg, control_lps.get(b)))
    teacher_batch = None
    if p.teacher_batch:  # the teacher's prompt where there is a hint, the student's elsewhere
        dev = ro.batch.input_ids.device
        teacher_batch = pack([teacher_ids.get(b, p) for b, p in enumerate(ro.prompt_ids)], ro.response_ids,
                             tok.pad_token_id).to(dev)
    return rows, sigs, teacher_batch, _opd_health(teacher_lps, old)


def _turn_row(turn: str, s, tlp: Optional[np.ndarray], old_b: Optional[np.ndarray], n: int, opd_cfg, clp=None):
    """One turn's (signal (n,) float, mask (n,) bool) as the plan's ``turn`` says: "vote" (Binary RL's score on
    every token, a 0 vote masked), "gap" (OPD's teacher-minus-student gap; no hint: no sample) or "vote+gap"."""
    if turn == "vote":
        return binary_rl_advantages(s.score, n)
    if turn == "gap":
        return (opd_advantages(tlp, old_b, opd_cfg, clp), np.ones(n, bool)) if tlp is not None \
            else (np.zeros(n), np.zeros(n, bool))
    return combined_advantages(s, tlp, old_b, opd_cfg, clp)


@torch.no_grad()
def _choose_hints_by_overlap(ro: Rollout, sigs, cfg: PPOConfig, scorer: Scorer):
    """The paper's second version's sequence-optimal hint choice, on every turn with more than one candidate
    (:func:`~claw_lib.signals.judges.hint_candidates`): the sampling policy's top-k at each response position
    (``ro.old_topk``, from the rollout's forward) against the teacher's under each candidate (one padded forward of
    all candidates), :func:`~claw_lib.signals.opd.overlap_choice`. Returns the turn signals with the chosen hints."""
    o = cfg.opd
    cands = {b: hint_candidates(s.hint_votes, o.min_hint_chars, o.hint_candidates) for b, s in enumerate(sigs) if s.hint}
    multi = [b for b, c in cands.items() if len(c) > 1]
    if not multi:
        return sigs
    tok, dev, k = scorer.tokenizer, ro.batch.input_ids.device, o.selection_k
    s_top = _rollout_topk(ro, k)[0][torch.as_tensor(multi, device=dev)]                           # (n, T, k)
    pairs = [(b, h) for b in multi for h in cands[b]]
    t_ids = [encode(tok, ro.tasks[b].teacher_prompt(h, tok)) for b, h in pairs]
    tb = pack(t_ids, [ro.response_ids[b] for b, _ in pairs], tok.pad_token_id).to(dev)
    t_top = response_logits(scorer.teacher, tb)[0].topk(k, -1).indices                          # (sum M, T', k)
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
    """The steps of multi-step episodes (the tasks' own answer, :func:`claw_lib.toy.env.step_rewards`; for
    :class:`~claw_lib.toy.chains.ChainStep` the episode's outcome plus, with ``cfg.task.chain_reward ==
    "outcome+prm"``, the judge's vote on the step's next state); None for any other batch."""
    return step_rewards(ro.tasks, ro.scores, [s.score for s in sigs], cfg.task.chain_reward)


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
    A, M = signal_tensors(rows, ro.batch.response_mask)
    v = A[M]
    metrics = {"opd/accepted_fraction": float(np.mean([h is not None for h in hints])),
               "reward/token_mean": float(v.mean()) if v.numel() else 0.0,
               "reward/token_std": float(v.std()) if v.numel() > 1 else 0.0,
               "reward/positive_share": float((v > 0).float().mean()) if v.numel() else 0.0,
               "reward/negative_share": float((v < 0).float().mean()) if v.numel() else 0.0, **health}
    if scorer.judge is not None and judged:  # an LLM judge's votes can fail: counted, never a crash
        metrics["judge/failed_share"] = failed_share(judged)
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
    return value_head(response_logits(policy, batch, hidden=True)[1])


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
    loss, clipfrac = clipped_surrogate(mb.lp, mb.old if mb.old is not None else mb.lp.detach(), mb.advantages,
                                       mb.mask, L.eps, L.eps_high, L.loss_agg, mb.rows)
    return loss, {"clipfrac": clipfrac}


def _distill_loss(mb: _Minibatch, L, cfg: PPOConfig):
    """opd_kl: KL(T || S) over the vocabulary ("forward_kl") or KL(S || T) over the teacher's top-K; no clip."""
    div = generalized_jsd(mb.logits, mb.t_logits, beta=0.0) if L.distill == "forward_kl" \
        else topk_reverse_kl(mb.logits, mb.t_logits, L.distill_topk)
    return aggregate_loss(div, mb.mask, L.loss_agg, mb.rows), {"clipfrac": torch.tensor(0.0)}


def _topk_clipped_loss(mb: _Minibatch, L, cfg: PPOConfig):
    """The paper's second version: a clipped surrogate over the old student's top-k ids, the teacher's gap clipped
    (:func:`~claw_lib.signals.opd.clipped_topk_opd`); its clip share is the share of (token, top-k id) pairs held."""
    ids_k, old_k = mb.old_topk
    div, held = clipped_topk_opd(torch.log_softmax(mb.logits.float(), -1).gather(-1, ids_k), old_k,
                                 torch.log_softmax(mb.t_logits.float(), -1).gather(-1, ids_k),
                                 L.clipped_gap, L.eps, L.eps_high)
    return aggregate_loss(div, mb.mask, L.loss_agg, mb.rows), {"clipfrac": masked_mean(held, mb.mask)}


def _hybrid_loss(mb: _Minibatch, L, cfg: PPOConfig):
    """The v2 combined: the surrogate on w_rl r (in the advantages) + w_opd x the clipped top-k loss; each term's
    clip share is logged (``policy/clipfrac`` the surrogate's, ``policy/topk_clipfrac`` the top-k loss's)."""
    topk, topk_stats = _topk_clipped_loss(mb, L, cfg)
    loss, stats = _surrogate_loss(mb, L, cfg)
    return loss + cfg.opd.w_opd * topk, {**stats, "topk_clipfrac": topk_stats["clipfrac"]}


#: the update's loss per :data:`~claw_lib.rl.strategies.LOSS_FAMILIES`: (minibatch, resolved loss config, cfg) ->
#: (loss, its clip shares by :data:`UPDATE_STATS` name: "clipfrac", and the hybrid's "topk_clipfrac")
LOSSES = {"surrogate": _surrogate_loss, "distill": _distill_loss, "topk_clipped": _topk_clipped_loss,
          "hybrid": _hybrid_loss}


#: what the update logs per minibatch (the mean over minibatches is logged): stat -> its metric (:data:`METRICS`)
UPDATE_STATS = {"clipfrac": "policy/clipfrac", "approx_kl": "policy/approx_kl", "entropy": "policy/entropy",
                "kl": "objective/kl", "loss": "policy/loss", "topk_clipfrac": "policy/topk_clipfrac",
                "anchor_kl": "anchor/kl", "anchor_kl_after": "anchor/kl_after"}


def minibatch(policy, ro: Rollout, sig: Signals, adv: Advantages, cfg: PPOConfig, mb_t, value_head, teacher,
               old_topk):
    """The policy's forward on the rows ``mb_t`` (and the teacher's, when the plan reads it): (_Minibatch, the
    policy's last hidden state at the response positions (b, T, H) when there is a value head (else None))."""
    sub = ro.batch.select(mb_t)
    raw, hidden = response_logits(policy, sub, hidden=value_head is not None)   # (b, T, V), (b, T, H) or None
    logits = scaled_logits(raw, cfg.temperature)
    lp = selective_log_softmax(logits.float(), sub.response_ids)   # (b, T)
    t_logits = None
    if sig.teacher_batch is not None:  # opd_kl, or the v2 hybrid's OPD term
        tb = sig.teacher_batch.select(mb_t)
        with torch.no_grad():
            t_logits = response_logits(teacher, tb)[0] / cfg.temperature
    old = ro.logprobs[mb_t] if ro.logprobs is not None else None
    k = (old_topk[0][mb_t], old_topk[1][mb_t]) if old_topk is not None else None
    mb = _Minibatch(lp, logits, t_logits, old, adv.advantages[mb_t], adv.mask[mb_t], adv.sample_rows[mb_t], k)
    return mb, hidden


def _terms(policy, ro: Rollout, sig: Signals, adv: Advantages, cfg: PPOConfig, p: Plan, rows_t, value_head, teacher,
           old_topk):
    """The loss terms of the rows ``rows_t``: (the plan's loss plus the KL term, each reduced by ``loss_agg``; the
    value head's squared error, a token mean, or None; the _Minibatch; the per-token KL or None; the clip shares)."""
    L = p.loss
    mb, hidden = minibatch(policy, ro, sig, adv, cfg, rows_t, value_head, teacher, old_topk)
    loss, clip = LOSSES[p.loss_family](mb, L, cfg)
    kl = kl_estimate(mb.lp, ro.ref_logprobs[rows_t], L.kl_estimator) if ro.ref_logprobs is not None else None
    if L.kl_coef:
        loss = loss + L.kl_coef * aggregate_loss(kl, mb.mask, L.loss_agg, mb.rows)
    value = None
    if value_head is not None:
        v = value_head(hidden)
        value = masked_mean((v - adv.returns[rows_t]) ** 2, mb.mask)
    return loss, value, mb, kl, clip


def _part_stats(mb: _Minibatch, kl, clip: dict, L, ro: Rollout, rows_t) -> Dict[str, float]:
    """The update statistics of one scored part (token means over its mask; UPDATE_STATS keys but "loss")."""
    with torch.no_grad():
        out = {k: float(v) for k, v in clip.items()}
        if mb.old is not None:
            out["approx_kl"] = float(masked_mean(0.5 * (mb.lp - mb.old) ** 2, mb.mask))
        out["entropy"] = float(masked_mean(entropy_from_logits(mb.logits), mb.mask))
        if kl is not None:
            k3 = kl if L.kl_estimator == "low_var_kl" else kl_estimate(mb.lp, ro.ref_logprobs[rows_t])
            out["kl"] = float(masked_mean(k3, mb.mask))
    return out


def _micro_parts(mb_t: torch.Tensor, adv: Advantages, how: str, size: int) -> List[Tuple[torch.Tensor, float, float]]:
    """``mb_t`` cut into parts of ``size`` rows: (rows, weight of the part's ``how``-reduced loss, weight of its token
    means). The weights are each part's share of what the whole minibatch averages over: its masked tokens
    (``token_mean``) or its sample rows (``sample_mean``), so the weighted sum of the parts' losses is the
    minibatch's loss."""
    parts = [mb_t[i:i + size] for i in range(0, len(mb_t), size)]
    tokens = [float(adv.mask[r].sum()) for r in parts]
    samples = [float(adv.sample_rows[r].sum()) for r in parts]
    n_tok, n_smp = max(sum(tokens), 1.0), max(sum(samples), 1.0)
    return [(r, (t / n_tok) if how == "token_mean" else (s / n_smp), t / n_tok)
            for r, t, s in zip(parts, tokens, samples)]


def _minibatch_step(policy, optimizer, params, ro: Rollout, sig: Signals, adv: Advantages, cfg: PPOConfig, p: Plan,
                    mb_t, value_head, teacher, old_topk, stats: Dict[str, list], anchor=None) -> None:
    """One optimizer step on the rows ``mb_t``: the plan's loss, plus the KL and value terms (then the anchor's step,
    :func:`_anchor_step`); its stats appended.
    With ``cfg.micro_batch`` rows fewer than the minibatch's, the rows are scored that many at a time and their
    gradients added up, each part's loss weighted by its share (:func:`_micro_parts`): the same step to rounding,
    with the memory of a part (the logits over the vocabulary at every position, the activations)."""
    L = p.loss
    if cfg.micro_batch is not None and cfg.micro_batch < len(mb_t):
        return _accumulated_step(policy, optimizer, params, ro, sig, adv, cfg, p, mb_t, value_head, teacher,
                                 old_topk, stats, anchor)
    loss, value, mb, kl, clip = _terms(policy, ro, sig, adv, cfg, p, mb_t, value_head, teacher, old_topk)
    if value is not None:
        loss = loss + L.vf_coef * value
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, L.max_grad_norm)
    optimizer.step()
    _anchor_step(policy, optimizer, params, anchor, stats)
    for k, v in _part_stats(mb, kl, clip, L, ro, mb_t).items():
        stats[k].append(v)
    stats["loss"].append(float(loss.detach()))


def _accumulated_step(policy, optimizer, params, ro: Rollout, sig: Signals, adv: Advantages, cfg: PPOConfig,
                      p: Plan, mb_t, value_head, teacher, old_topk, stats: Dict[str, list], anchor=None) -> None:
    """:func:`_minibatch_step` ``cfg.micro_batch`` rows at a time (gradients accumulated, one optimizer step); the
    stats are the parts' token-weighted means and the loss their weighted sum."""
    L = p.loss
    optimizer.zero_grad(set_to_none=True)
    total, sums = 0.0, {}
    for rows_t, w_agg, w_tok in _micro_parts(mb_t, adv, L.loss_agg, cfg.micro_batch):
        if w_tok == 0.0:  # no token to train in this part: its loss terms are 0 (and its token means undefined)
            continue
        loss, value, mb, kl, clip = _terms(policy, ro, sig, adv, cfg, p, rows_t, value_head, teacher, old_topk)
        part = w_agg * loss + (w_tok * L.vf_coef * value if value is not None else 0.0)
        part.backward()
        total += float(part.detach())
        for k, v in _part_stats(mb, kl, clip, L, ro, rows_t).items():
            sums[k] = sums.get(k, 0.0) + w_tok * v
    torch.nn.utils.clip_grad_norm_(params, L.max_grad_norm)
    optimizer.step()
    _anchor_step(policy, optimizer, params, anchor, stats)
    for k, v in sums.items():
        stats[k].append(v)
    stats["loss"].append(total)


def _anchor_step(policy, optimizer, params, anchor, stats: Dict[str, list]) -> None:
    """After the optimizer's step, the anchor's own steps (:func:`claw_lib.rl.anchor.anchor_steps`, at the
    optimizer's learning rate), its KL before and after logged; nothing without an anchor (None, or coef 0)."""
    if anchor is None or anchor.coef <= 0:
        return
    from .anchor import anchor_steps  # lazy: most runs have no anchor

    before, after = anchor_steps(policy, params, anchor, optimizer.param_groups[0]["lr"])
    optimizer.zero_grad(set_to_none=True)
    stats["anchor_kl"].append(before)
    stats["anchor_kl_after"].append(after)


def ppo_update(policy, optimizer, ro: Rollout, sig: Signals, adv: Advantages, cfg: PPOConfig, step: int,
               value_head=None, teacher=None, anchor=None) -> Dict[str, float]:
    """Stage 4: ``cfg.epochs`` passes of ``cfg.minibatches`` minibatches (shuffled with a seed per
    step): the loss of the strategy's plan (:data:`LOSSES`: the clipped surrogate, or, for ``opd_kl``, the
    divergence to ``teacher`` on ``sig.teacher_batch``, or a top-k loss), plus the KL and value terms, each
    reduced as ``cfg.loss`` resolves for the strategy (clip range and token or sample mean:
    :meth:`~claw_lib.config.LossConfig.for_strategy`); returns the ``policy/*``, ``objective/kl`` and ``value/*``
    metrics (token means). ``anchor``: an :class:`~claw_lib.rl.anchor.AnchorSet` whose own steps follow each
    optimizer step (``anchor/kl`` and ``anchor/kl_after`` logged), or None. Nothing is trained when the mask is
    empty."""
    p = plan(cfg)
    M = adv.mask
    params = list(policy.parameters()) + (list(value_head.parameters()) if value_head is not None else [])
    policy.train()
    idx = np.arange(len(ro.response_ids))
    stats: Dict[str, list] = {k: [] for k in UPDATE_STATS}
    topk = p.loss_family in ("topk_clipped", "hybrid")
    old_topk = _rollout_topk(ro, p.loss.clipped_k) if topk and M.any() else None
    if M.any():
        for _ in range(cfg.epochs):
            np.random.default_rng(cfg.seed * 7919 + step).shuffle(idx)
            for mb in np.array_split(idx, cfg.minibatches):
                mb_t = torch.as_tensor(mb, device=M.device)
                if M[mb_t].any():
                    _minibatch_step(policy, optimizer, params, ro, sig, adv, cfg, p, mb_t, value_head, teacher,
                                    old_topk, stats, anchor)
    logged = {"kl": ro.ref_logprobs is not None,  # no reference pass, no KL to log
              "topk_clipfrac": p.loss_family == "hybrid",  # the top-k share beside the surrogate's
              **dict.fromkeys(("anchor_kl", "anchor_kl_after"), anchor is not None and anchor.coef > 0)}
    metrics = {name: float(np.mean(stats[k])) if stats[k] else 0.0 for k, name in UPDATE_STATS.items()
               if logged.get(k, True)}
    if adv.returns is not None and M.sum() > 1:
        with torch.no_grad():
            vals = _values(policy, value_head, ro.batch)
        r, v = adv.returns[M], vals[M]
        metrics["value/explained_variance"] = float(1 - (r - v).var() / r.var().clamp(min=1e-8))
    policy.eval()
    return metrics


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
    n = count_parameters(policy)
    cfg = resolve_for_model(cfg, n)
    validate(cfg)
    msg = lr_warning(cfg.lr, n, cfg.lora_rank)
    if msg:
        warnings.warn(msg, UserWarning, stacklevel=3)
    if cfg.lora_rank and adapters:
        # PEFT's or the kit's (cfg.lora_impl); drawn from the run's seed: the same run repeats (LR01)
        add_adapters(policy, cfg.lora_rank, cfg.lora_impl, seed=cfg.seed)
        return cfg, (AdapterDisabled(policy) if reference else None)
    # the reviser reads with the frozen base (wants_base)
    return cfg, (frozen_teacher(policy) if reference and (needs_reference(cfg) or wants_base(cfg, n)) else None)
