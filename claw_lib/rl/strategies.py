"""One row per strategy, and the plan a config resolves to (notebooks 08 and 09; torch-free).

Every stage of :mod:`claw_lib.rl.ppo` and the TRL engine (:mod:`claw_lib.integrations.trl`) reads the
:class:`Plan` of its config instead of testing the strategy's name. A new variant is one row of
:data:`STRATEGY_TABLE` and, at most, one loss function in the update.

=============  ============  ========  ===========  ============  ==========  =========================
strategy       signal        hint      encoder /    loss family   every row   TRL engine
                             teacher   judge LM                   counts
=============  ============  ========  ===========  ============  ==========  =========================
``sentence``   token_reward  no        encoder      surrogate     no          yes
``binary``     token_reward  no        encoder      surrogate     no          yes
``continuous`` token_reward  no        encoder      surrogate     no          yes
``perplexity`` token_reward  no        judge LM     surrogate     no          yes
``binary_rl``  openclaw      no        --           surrogate     yes         yes
``opd``        openclaw      yes       --           surrogate     no          yes
``opd_kl``     openclaw      yes       --           distillation  no          yes (the kit's loss)
``combined``   openclaw      yes       --           surrogate     no          yes
=============  ============  ========  ===========  ============  ==========  =========================

What a config adds to its row (:func:`plan`): the loss family (``opd_kl`` with ``loss.distill
"topk_clipped"`` is the clipped top-k loss, ``combined`` with it the v2 hybrid), the clip range and
aggregation (:meth:`~claw_lib.config.LossConfig.for_strategy`: OpenClaw-RL's run scripts), whether the
rollout keeps the old log-probs and how many top-k ids, and whether the run holds a reference.

>>> p = plan(PPOConfig(strategy="combined"))
>>> (p.loss_family, p.loss.eps_high, p.loss.loss_agg, p.old_logprobs, p.old_topk, p.reference)
('surrogate', 0.28, 'sample_mean', True, 0, True)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

from ..config import (
    ADVANTAGES,
    ALIGNMENT_STRATEGIES,
    DISTILL_LOSSES,
    LOSS_AGGREGATIONS,
    PPO_STRATEGIES,
    REWARD_STRATEGIES,
    LossConfig,
    PPOConfig,
)

__all__ = ["Strategy", "STRATEGY_TABLE", "LOSS_FAMILIES", "TRL_STRATEGIES", "JUDGED_STRATEGIES", "Plan", "plan",
           "check", "Driver", "DRIVERS", "driver_refusal"]

#: how the update turns a minibatch into a loss (one function each in :mod:`claw_lib.rl.ppo`): "surrogate" (the
#: clipped surrogate on the advantages), "distill" (a divergence to the hinted teacher: forward KL or top-K
#: reverse KL), "topk_clipped" (the paper's second version: a clipped surrogate over the old student's top-k ids),
#: "hybrid" (the v2 combined: w_rl x the surrogate on the judge's score + w_opd x the clipped top-k loss)
LOSS_FAMILIES = ("surrogate", "distill", "topk_clipped", "hybrid")



@dataclass(frozen=True)
class Strategy:
    """One strategy's row: what it needs from the other stages, whatever the rest of the config says."""

    name: str
    signal: str
    """"token_reward" (alignment or perplexity rewards, :mod:`claw_lib.signals.rewards`) or "openclaw" (a judge
    reads the next state: Binary RL votes and / or OPD hints, :mod:`claw_lib.signals.opd`)"""
    turn: Optional[str] = None
    """openclaw only, each turn's row: "vote" (Binary RL's score broadcast), "gap" (OPD's teacher-minus-student
    gap), "vote+gap" (combined)"""
    hint: bool = False
    """the hinted teacher scores the student's tokens (OPD's term): a teacher, and the old log-probs"""
    encoder: bool = False
    """the alignment encoder (``reward.align``) scores the responses"""
    judge_lm: bool = False
    """a judge LM's perplexity (the reference) scores the responses"""
    distillation: bool = False
    """the loss is a divergence to the hinted teacher, not a surrogate on advantages"""
    every_row: bool = False
    """a "sample_mean" loss counts every response, a 0-scored turn too (upstream submits it with its mask zeroed)"""
    trl: Optional[str] = None
    """None: the TRL engine trains it; else why not (the refusal's text)"""


#: the rows, in the order of :data:`claw_lib.config.PPO_STRATEGIES`
STRATEGY_TABLE: Dict[str, Strategy] = {s.name: s for s in (
    Strategy("sentence", "token_reward", encoder=True),
    Strategy("binary", "token_reward", encoder=True),
    Strategy("continuous", "token_reward", encoder=True),
    Strategy("perplexity", "token_reward", judge_lm=True),
    Strategy("binary_rl", "openclaw", turn="vote", every_row=True),
    Strategy("opd", "openclaw", turn="gap", hint=True),
    Strategy("opd_kl", "openclaw", turn="gap", hint=True, distillation=True),
    Strategy("combined", "openclaw", turn="vote+gap", hint=True),
)}
assert tuple(STRATEGY_TABLE) == PPO_STRATEGIES
assert {n for n, s in STRATEGY_TABLE.items() if s.signal == "token_reward"} == set(REWARD_STRATEGIES)
assert {n for n, s in STRATEGY_TABLE.items() if s.encoder} == set(ALIGNMENT_STRATEGIES)

#: the strategies the TRL engine trains (the rows without a ``trl`` refusal)
TRL_STRATEGIES = tuple(n for n, s in STRATEGY_TABLE.items() if s.trl is None)
#: the strategies whose judge reads the next state into an advantage (OpenClaw-RL's Binary RL, OPD and combined;
#: not ``opd_kl``, a distillation loss): what the live server trains, drawn thicker in the grids' curves
JUDGED_STRATEGIES = tuple(n for n, s in STRATEGY_TABLE.items() if s.signal == "openclaw" and not s.distillation)


@dataclass(frozen=True)
class Driver:
    """What a driver of the stages (:mod:`claw_lib.rl.driver`) can supply, one row of :data:`DRIVERS`; a config that
    needs more is refused by ``plan(cfg, driver)`` (:func:`driver_refusal`)."""

    name: str
    """how a refusal names it"""
    advantages: Tuple[str, ...]
    """the advantage estimators it can feed ("grpo" needs the user's own score, "gae" a value head)"""
    reference: bool
    """reference log-probs (the KL term, ``loss.kl_coef > 0``)"""
    topk: bool
    """the sampling policy's top-k ids (``loss.distill "topk_clipped"``)"""
    overlap: bool
    """hints chosen among candidates by top-k overlap (``opd.hint_selection "overlap"``)"""
    episodes: bool
    """episodes of several calls or several personas (``task.user`` one of :data:`EPISODE_USERS`)"""
    instead: str = ""
    """what the refusal advises"""


#: the users whose tasks make episodes of several calls, or come from several personas
EPISODE_USERS = ("tool-chain", "joint")

#: what each driver can supply, beside what each strategy needs (:data:`STRATEGY_TABLE`)
DRIVERS: Dict[str, Driver] = {d: r for d, r in (
    ("loop", Driver("the kit's loop", ADVANTAGES, True, True, True, True)),
    ("trl", Driver("the TRL engine", ("direct", "grpo"), True, True, False, False,
                   "it runs in the kit's loop only: use claw_lib.rl.run.train")),
    ("serve", Driver("the live server", tuple(a for a in ADVANTAGES if a not in ("grpo", "gae")), False, False, False,
                     False, "the server knows the judge's vote, not the user's own score, and keeps no reference, "
                     "value head or top-k ids")),
)}


def driver_refusal(cfg: PPOConfig, driver: str) -> Optional[str]:
    """Why ``driver`` (a key of :data:`DRIVERS`) cannot run ``cfg`` (one line), or None."""
    d = DRIVERS[driver]
    lacks = [(cfg.task.user in EPISODE_USERS and not d.episodes,
              f"task.user {cfg.task.user!r} (episodes of several calls, or several personas)"),
             (cfg.opd.hint_selection == "overlap" and not d.overlap,
              "opd.hint_selection 'overlap' (choosing among hint candidates with the policy's top-k)"),
             (cfg.advantage not in d.advantages, f"advantage {cfg.advantage!r} (it supports "
              f"{', '.join(map(repr, d.advantages))}; grpo needs the user's own score, gae a value head)"),
             (bool(cfg.loss.kl_coef) and not d.reference, "loss.kl_coef > 0 (the KL term needs reference log-probs)"),
             (cfg.loss.distill == "topk_clipped" and not d.topk,
              "loss.distill 'topk_clipped' (the loss needs the sampling policy's top-k ids)")]
    what = next((w for bad, w in lacks if bad), None)
    return None if what is None else f"{d.name} does not support {what}" + (f"; {d.instead}" if d.instead else "")


@dataclass(frozen=True)
class Plan:
    """A config's strategy resolved once: what each stage does (the rollout, the signals, the update, the run)."""

    strategy: Strategy
    loss: LossConfig
    """``cfg.loss`` with the clip range and aggregation resolved for the strategy"""
    loss_family: str
    """one of :data:`LOSS_FAMILIES`"""
    old_logprobs: bool
    """the rollout keeps log pi_old: OPD's gap needs it, and so does the ratio with several epochs or minibatches
    (otherwise the update's own first forward gives the same numbers, detached, as TRL does)"""
    old_topk: int
    """how many of the sampling policy's most likely ids per position the rollout keeps (0: none):
    ``loss.clipped_k`` for the top-k loss, ``opd.selection_k`` for choosing hints by overlap, the larger of both"""
    hint_overlap: bool
    """hints are chosen among the judge's candidates by top-k overlap (``opd.hint_selection "overlap"``)"""
    teacher_batch: bool
    """the update reads the teacher's logits on its prompts packed with the responses (distillation, top-k losses)"""
    rl_only_advantage: bool
    """the v2 hybrid: the advantage holds the RL term alone (w_opd 0), the OPD term is the update's top-k loss"""
    every_row: bool
    """every response counts in a "sample_mean" denominator (Binary RL, or advantage "grpo")"""
    reference: bool
    """the run holds the initial policy besides the trained one: the KL term, the frozen teacher, the judge LM"""


def check(cfg: PPOConfig) -> None:
    """Refuse (ValueError) a strategy, distillation loss or loss aggregation the kit does not know."""
    if cfg.strategy not in PPO_STRATEGIES:
        raise ValueError(f"strategy must be one of {PPO_STRATEGIES}, got {cfg.strategy!r}")
    if cfg.loss.distill not in DISTILL_LOSSES:
        raise ValueError(f"distill must be one of {DISTILL_LOSSES}, got {cfg.loss.distill!r}")
    if cfg.loss.loss_agg not in (None,) + LOSS_AGGREGATIONS:
        raise ValueError(f"loss_agg must be one of {LOSS_AGGREGATIONS}, got {cfg.loss.loss_agg!r}")


def _loss_family(s: Strategy, distill: str) -> str:
    if distill == "topk_clipped" and s.distillation:
        return "topk_clipped"
    if distill == "topk_clipped" and s.turn == "vote+gap":
        return "hybrid"
    return "distill" if s.distillation else "surrogate"


def plan(cfg: PPOConfig, driver: str = "loop") -> Plan:
    """The :class:`Plan` of ``cfg`` (checked by :func:`check` first); a pure function of the config. ``driver``: who
    feeds the stages (a key of :data:`DRIVERS`); a config that needs what it cannot supply is refused (ValueError,
    :func:`driver_refusal`)."""
    check(cfg)
    why = driver_refusal(cfg, driver)
    if why:
        raise ValueError(why)
    s = STRATEGY_TABLE[cfg.strategy]
    family = _loss_family(s, cfg.loss.distill)
    topk_loss = family in ("topk_clipped", "hybrid")
    overlap = s.hint and cfg.opd.hint_selection == "overlap"
    k = cfg.loss.clipped_k if topk_loss else 0
    if overlap:
        k = max(k, cfg.opd.selection_k)
    frozen_teacher = s.hint and cfg.opd.teacher == "frozen"
    return Plan(
        strategy=s, loss=cfg.loss.for_strategy(cfg.strategy), loss_family=family,
        old_logprobs=s.hint or cfg.epochs * cfg.minibatches > 1, old_topk=k, hint_overlap=overlap,
        teacher_batch=s.distillation or family == "hybrid", rl_only_advantage=family == "hybrid",
        every_row=s.every_row or cfg.advantage == "grpo",
        reference=bool(cfg.loss.kl_coef) or frozen_teacher or s.judge_lm)
