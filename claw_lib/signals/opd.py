"""Hindsight-guided on-policy distillation (OPD), Binary RL and the combined advantage, as
OpenClaw-RL does them (notebook 06).

Driving-test picture (from the paper digest): the student took the turn and crossed the line;
the examiner says "check the right mirror earlier". In a parallel world a student heard that
*before* the turn. OPD compares, token by token, how likely the real student's own actions are
for that better-informed student (the **teacher**: the same model with the hint in its context)
and for the student itself::

    A_t = log pi_T(y_t | x + hint, y_<t) - log pi_old(y_t | x, y_<t)

The teacher context is the student's prompt with ``"\\n\\n[user's hint / instruction]\\n" + hint``
appended to the last user message (:mod:`claw_lib.prompts`). Teacher log-probs are computed on the
student's own response token ids, concatenated after the teacher prompt's ids (the public code
re-tokenises the rendered prompt + response text instead; ids are exact where text can merge across
the boundary). The teacher is a frozen copy of the initial policy by default (what the public code
does: its teacher server is never synced) or the live policy without gradient (the paper's wording).

Binary RL: the judge's majority score r in {+1, -1, 0} on every response token; 0-scored turns
are masked out. Combined: ``A_t = w_rl * r + w_opd * (log pi_T - log pi_old)``.
"""
from __future__ import annotations

import copy
import math
import numbers
from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn.functional as F

from ..config import OPDConfig, validate
from ..models.lm import encode, ids_logprobs, pad_token_id
from ..prompts import build_prompt, has_chat_template, parse_prompt, response_text, teacher_prompt
from ..text.corrections import guess_lang
from ..text.tokens import subtoken_spans
from .judges import (HINT_DECISIONS, HintVote, RuleJudge, Vote, hint_candidates, majority_vote, parse_boxed,
                     select_hint)

__all__ = [
    "TurnSignal", "judge_turn", "opd_advantages", "binary_rl_advantages", "combined_advantages", "frozen_teacher",
    "topk_reverse_kl", "clipped_topk_opd", "overlap_choice", "topk_overlap", "generalized_jsd", "token_logprobs", "dispatch", "explain_turn",
    "drift_controls", "contrast_gap", "unrelated_hint", "UNRELATED_HINTS", "teacher_temperature", "failed_share",
]

@dataclass
class TurnSignal:
    """What the judges made of a turn: score (majority, +1/-1/0), hint (or None), the votes."""

    score: int
    hint: Optional[str]
    votes: List[Vote] = field(default_factory=list)
    hint_votes: List[HintVote] = field(default_factory=list)

    @property
    def kind(self) -> str:
        """The combined dispatch: "both", "opd", "rl" or "none" (no sample)."""
        return dispatch(self.score, self.hint)

    @property
    def failed_votes(self) -> Tuple[int, int]:
        """(failed, all) votes of both judges: a Binary RL vote without a valid ``\\boxed{}`` (score None) and a hint
        vote without a valid decision box (an answer cut off before its box, an unreachable endpoint: text ""), or,
        for a vote that says itself whether it failed (a "plain" hint vote: ``HintVote.failed``), one that did."""
        bad = sum(v.score is None for v in self.votes) + sum(
            (parse_boxed(v.text, HINT_DECISIONS) is None) if v.failed is None else v.failed for v in self.hint_votes)
        return bad, len(self.votes) + len(self.hint_votes)


def failed_share(turns: Sequence[TurnSignal]) -> float:
    """The share of failed votes over the judged turns (:attr:`TurnSignal.failed_votes`; no vote: 0.0), the
    ``judge/failed_share`` metric of a run with an LLM judge."""
    bad, total = (sum(x) for x in zip(*(t.failed_votes for t in turns))) if turns else (0, 0)
    return bad / total if total else 0.0


def dispatch(score: int, hint: Optional[str]) -> str:
    """hint and score -> "both"; hint only -> "opd" (r = 0); score only -> "rl" (no OPD term);
    neither -> "none" (no sample)."""
    if hint and score != 0:
        return "both"
    if hint:
        return "opd"
    if score != 0:
        return "rl"
    return "none"


def judge_turn(response_text: str, next_state: str, judge=None, cfg: Optional[OPDConfig] = None,
               role: str = "user") -> TurnSignal:
    """Score and hint for one turn (``judge``: :class:`RuleJudge` by default, with ``cfg.hint_candidates``
    phrasings, or an LLMJudge, which samples its own m votes); ``role``: who wrote the next state, "user" or
    "tool". The hint: the longest good one (v1, ``cfg.hint_selection`` "longest", and "overlap" until the loop,
    which has the models, chooses among :func:`~claw_lib.signals.judges.hint_candidates`), or the shortest."""
    cfg = cfg or OPDConfig()
    judge = judge or RuleJudge(cfg.hint_candidates)
    votes = [v for _ in range(cfg.m if isinstance(judge, RuleJudge) else 1)
             for v in judge.votes(response_text, next_state, role)]
    hvotes = judge.hint_votes(response_text, next_state, role)
    if cfg.hint_selection == "shortest":
        cands = hint_candidates(hvotes, cfg.min_hint_chars, cfg.hint_candidates)
        hint = cands[0] if cands else None
    else:
        hint = select_hint(hvotes, cfg.min_hint_chars)
    return TurnSignal(majority_vote(votes), hint, votes, hvotes)


def frozen_teacher(policy):
    """A frozen copy of the policy (eval mode, no gradients): OpenClaw-RL's default teacher."""
    t = copy.deepcopy(policy).eval()
    for p in t.parameters():
        p.requires_grad_(False)
    return t


def token_logprobs(model, tokenizer, prompts: Sequence[str], response_ids: Sequence[Sequence[int]]) -> List[np.ndarray]:
    """log p(y_t | prompt, y_<t) of given response ids after each prompt (ids concatenated)."""
    return ids_logprobs(model, [encode(tokenizer, p) for p in prompts], response_ids, pad_token_id(tokenizer))[0]


def _check_opd_config(cfg: OPDConfig) -> None:
    """The library refuses what the command line refuses (kappa NaN, clip <= 0, a weight out of range)."""
    validate(cfg, "opd.")


def _check_logprobs(x: np.ndarray, what: str) -> None:
    """Log-probs are finite: a NaN or inf would pass silently into the advantage."""
    bad = np.flatnonzero(~np.isfinite(x))
    if bad.size:
        k = int(bad[0])
        raise ValueError(f"{what} log-prob of token {k} is {x.flat[k]}: log-probs must be finite numbers")


def opd_advantages(teacher_logprobs: np.ndarray, old_logprobs: np.ndarray, cfg: Optional[OPDConfig] = None,
                   control_logprobs: Optional[np.ndarray] = None) -> np.ndarray:
    """``kappa * drift_controls(clip(gap, +-clip))``, one value per response token, where the gap is
    ``log pi_T - log pi_old`` (upstream), or with ``cfg.contrast = "unrelated"`` the contrast
    ``(log pi_T - log pi_old) - (log pi_C - log pi_old) = log pi_T - log pi_C`` against the teacher that read an
    unrelated follow-up instead of the hint (``control_logprobs``, same ids; :func:`contrast_gap`). Then
    ``cfg.skip_first`` and ``cfg.center`` (:func:`drift_controls`). With the defaults: the upstream formula.
    Raises ValueError for shapes that differ, a log-prob that is NaN or inf (naming the token), a config out of
    range, or a contrast without the control's log-probs."""
    cfg = cfg or OPDConfig()
    _check_opd_config(cfg)
    t, o = np.asarray(teacher_logprobs, np.float64), np.asarray(old_logprobs, np.float64)
    if t.shape != o.shape:
        raise ValueError(f"teacher log-probs have shape {t.shape}, student log-probs {o.shape}: "
                         "both must be computed on the same response token ids")
    _check_logprobs(t, "the teacher's")
    _check_logprobs(o, "the student's")
    a = t - o
    contrast = getattr(cfg, "contrast", "none")
    if contrast != "none":
        if control_logprobs is None:
            raise ValueError(f"opd.contrast {contrast!r} needs the control teacher's log-probs (the teacher prompted "
                             "with an unrelated follow-up, unrelated_hint) on the same response ids")
        c = np.asarray(control_logprobs, np.float64)
        if c.shape != o.shape:
            raise ValueError(f"control log-probs have shape {c.shape}, student log-probs {o.shape}")
        _check_logprobs(c, "the control teacher's")
        a = contrast_gap(a, [c - o])
    if cfg.clip is not None:
        a = np.clip(a, -cfg.clip, cfg.clip)
    a = drift_controls(a, getattr(cfg, "skip_first", 0), getattr(cfg, "center", False))
    return cfg.kappa * a


# --------------------------------------------------------------------------- style drift
#: unrelated follow-ups, the null control of the hinted teacher (a next state that says nothing about the answer)
UNRELATED_HINTS = {
    "zh": ("谢谢！顺便问一下，周末有什么好看的电影推荐吗？", "好的。另外，明天早上适合去跑步吗？",
           "收到。请问怎么把照片从手机传到电脑上？", "明白了。你能推荐一本适合初学者的小说吗？"),
    "en": ("Thanks! By the way, can you recommend a good movie for the weekend?",
           "Okay. Also, is tomorrow morning a good time to go for a run?",
           "Got it. How do I move photos from my phone to my computer?",
           "I see. Could you suggest a novel for a beginner reader?"),
}


def unrelated_hint(lang: str, k: int = 0) -> str:
    """The k-th unrelated follow-up (cyclic) in ``lang`` ("zh" or "en"): the control teacher's hint."""
    if lang not in UNRELATED_HINTS:
        raise ValueError(f"lang must be 'zh' or 'en', got {lang!r}")
    pool = UNRELATED_HINTS[lang]
    return pool[k % len(pool)]


def contrast_gap(a_hint: np.ndarray, a_controls: Sequence[np.ndarray]) -> np.ndarray:
    """``A_hint - mean_c A_c``: the hinted teacher's gap minus the mean gap of control teachers (an unrelated
    follow-up, a wrong hint) on the same response ids; what the hint's *content* adds beyond the style drift
    any extra user text causes (RLCSD's contrast). a_hint (n,), each control (n,); returns (n,)."""
    a = np.asarray(a_hint, np.float64)
    if not len(a_controls):
        raise ValueError("contrast_gap needs at least one control gap")
    cs = np.stack([np.asarray(c, np.float64) for c in a_controls])
    if cs.shape[1:] != a.shape:
        raise ValueError(f"control gaps have shape {cs.shape[1:]}, the hinted gap {a.shape}")
    return a - cs.mean(0)


def drift_controls(a: np.ndarray, skip_first: int = 0, center: bool = False) -> np.ndarray:
    """Two cheap removals of the hinted teacher's style drift from a per-token gap ``a`` (n,):
    ``center`` subtracts the mean of the tokens kept (``a[skip_first:]``) from them (a per-response offset:
    the argmin does not move, the signal's sum becomes 0); ``skip_first`` sets the first k tokens to 0 (a chat
    teacher's drift sits on the response's first token). Defaults: ``a`` unchanged. Returns a new (n,) array."""
    if isinstance(skip_first, bool) or int(skip_first) != skip_first or skip_first < 0:
        raise ValueError(f"skip_first must be a whole number >= 0, got {skip_first!r}")
    out = np.array(a, np.float64, copy=True)
    k = min(int(skip_first), len(out))
    if center and len(out) > k:
        out[k:] -= out[k:].mean()
    out[:k] = 0.0
    return out


def teacher_temperature(cfg: Optional[OPDConfig], rollout_temperature: float) -> float:
    """The temperature the hinted teacher's log-probs are taken at: ``cfg.teacher_temperature`` when set (1.0:
    upstream's teacher scores the raw logits), else the rollout's sampling temperature (None, the kit's default:
    teacher and pi_old on the same scale, so the gap is 0 where the hint changes nothing)."""
    t = getattr(cfg, "teacher_temperature", None) if cfg is not None else None
    return float(rollout_temperature if t is None else t)


def binary_rl_advantages(score: int, n_tokens: int):
    """The turn's score on every token, and a mask that drops 0-scored turns.
    Returns (advantages (n,), mask (n,) bool). A score is a judge's vote: -1, 0 or +1 (anything else is
    refused)."""
    if isinstance(score, bool) or score not in (-1, 0, 1):
        raise ValueError(f"a Binary RL score is -1, 0 or +1 (the judge's majority vote), got {score!r}")
    return np.full(n_tokens, float(score)), np.full(n_tokens, score != 0)


def combined_advantages(signal: TurnSignal, teacher_logprobs: Optional[np.ndarray], old_logprobs: np.ndarray,
                        cfg: Optional[OPDConfig] = None, control_logprobs: Optional[np.ndarray] = None):
    """``A_t = w_rl * r + w_opd * A_opd`` with the dispatch of :func:`dispatch` (``w_rl_negative`` in
    place of ``w_rl`` when r = -1, if set); A_opd by :func:`opd_advantages` (``control_logprobs``: the control
    teacher's, for ``cfg.contrast``).

    Returns (advantages (n,), mask (n,) bool); mask all False when the turn gives no sample.
    """
    cfg = cfg or OPDConfig()
    _check_opd_config(cfg)
    if isinstance(signal.score, bool) or signal.score not in (-1, 0, 1):
        raise ValueError(f"a Binary RL score is -1, 0 or +1 (the judge's majority vote), got {signal.score!r}")
    n = len(old_logprobs)
    kind = signal.kind
    if kind == "none":
        return np.zeros(n), np.zeros(n, dtype=bool)
    w_rl = cfg.w_rl if signal.score > 0 or cfg.w_rl_negative is None else cfg.w_rl_negative
    if kind == "rl" and w_rl == 0:
        return np.zeros(n), np.zeros(n, dtype=bool)
    a = np.zeros(n)
    if kind in ("both", "rl"):
        a += w_rl * float(signal.score)
    if kind in ("both", "opd"):
        if teacher_logprobs is None:
            raise ValueError("this turn has a hint: pass the teacher log-probs")
        a += cfg.w_opd * opd_advantages(teacher_logprobs, old_logprobs, cfg, control_logprobs)
    return a, np.ones(n, dtype=bool)


# --------------------------------------------------------------------------- distillation losses
#: OpenClaw-RL's top-K: K = 50 teacher ids per position (run_qwen3_4b_openclaw_opd_topk.sh)
TOPK_DEFAULT = 50
#: the largest log-mass the top-K may have before the tail is computed (upstream's clamp): the tail's
#: log-prob is then at least log(1 - exp(-1e-7)) = -16.1, never log(0)
_TOPK_LOGMASS_MAX = -1e-7


def _tail_logprob(top_logprobs: torch.Tensor) -> torch.Tensor:
    """log(1 - sum exp(top_logprobs)) over the last dim, computed stably: the top-K's log-mass by
    logsumexp, clamped below 0, then ``log(-expm1(.))`` (no cancellation in ``1 - sum p``)."""
    log_mass = torch.logsumexp(top_logprobs, dim=-1).clamp(max=_TOPK_LOGMASS_MAX)
    return torch.log(-torch.expm1(log_mass))


def _same_vocab(student_logits: torch.Tensor, teacher_logits: torch.Tensor) -> None:
    if student_logits.shape != teacher_logits.shape:
        vs, vt = student_logits.shape[-1:], teacher_logits.shape[-1:]
        what = (f"student and teacher vocabularies differ ({vs[0]} vs {vt[0]})" if vs != vt else
                f"student and teacher logits have shapes {tuple(student_logits.shape)} and {tuple(teacher_logits.shape)}")
        raise ValueError(f"{what}: both must score the same positions over the same vocabulary")


def topk_reverse_kl(student_logits: torch.Tensor, teacher_logits: torch.Tensor, k: int = TOPK_DEFAULT) -> torch.Tensor:
    """Reverse KL(student || teacher) over the teacher's top-K tokens plus one tail bin.

    student_logits, teacher_logits: (..., V). The support is the teacher's K most likely ids; the
    rest of each distribution is lumped into a tail bin whose log-prob is computed stably
    (:func:`_tail_logprob`), so a teacher that puts all its mass on K ids in float32 gives a finite,
    bounded tail term (upstream's rule). Student log-probs are gathered at the teacher's ids.
    Returns (...) in nats. With K = V it equals the full reverse KL (the tail adds about 1e-7).
    """
    _same_vocab(student_logits, teacher_logits)
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    s_lp = F.log_softmax(student_logits.float(), -1)
    t_lp = F.log_softmax(teacher_logits.float(), -1)
    k = min(k, t_lp.shape[-1])
    t_top, idx = t_lp.topk(k, dim=-1)                      # (..., K)
    s_top = s_lp.gather(-1, idx)                            # (..., K)
    s_all = torch.cat([s_top, _tail_logprob(s_top).unsqueeze(-1)], -1)
    t_all = torch.cat([t_top, _tail_logprob(t_top).unsqueeze(-1)], -1)
    return (s_all.exp() * (s_all - t_all)).sum(-1)


def _check_clip_args(clip, eps, eps_high) -> None:
    """clip finite (<= 0: no clip), 0 <= eps < 1, eps_high >= 0 and finite, as config.validate requires (P01: a
    NaN clip silently meant no clip; P02: negative eps made clamp's min exceed its max)."""
    for name, v in (("clip", clip), ("eps", eps), ("eps_high", eps_high)):
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v):
            raise ValueError(f"{name} must be a finite number, got {v!r}")
    if not 0 <= eps < 1:
        raise ValueError(f"eps must be in [0, 1), got {eps}")
    if eps_high < 0:
        raise ValueError(f"eps_high must be >= 0, got {eps_high}")


def clipped_topk_opd(current_lp: torch.Tensor, old_lp: torch.Tensor, teacher_lp: torch.Tensor, clip: float = 1.0,
                     eps: float = 0.2, eps_high: float = 0.28):
    """OPD as the paper's second version trains it: a clipped surrogate over the old student's top-k ids at every
    response position (upstream ``openclaw-combine/hint_opd_loss._opd_one_sample``; docs/openclaw_v2.md, section 6).

    current_lp, old_lp, teacher_lp: (..., k) full-vocabulary log-probs (nats, never renormalised within the k ids)
    of the same k ids S_i, by the current policy (with gradient), the policy before the update and the hinted
    teacher. Per id v in S_i: weight w_v = softmax of old_lp over S_i, gap clip(teacher_lp - old_lp, -clip, clip)
    (``clip`` <= 0: no clip), advantage A_v = w_v * gap (detached), ratio rho_v = exp(current_lp - old_lp) (log
    clamped to +-20); the loss is the **sum** over S_i of max(-A_v rho_v, -A_v clip(rho_v, 1 - eps, 1 + eps_high)).

    Returns (loss (...), clipped (...)): the per-position loss and the share of its k ratios the clip holds.
    Worked case: old (log 0.5, log 0.25), teacher (log 0.25, log 0.5), current = old (ratios 1): w = (2/3, 1/3),
    gaps (-log 2, +log 2), loss = -(2/3 (-log 2) + 1/3 log 2) = (log 2) / 3 = 0.231 (tests/signals/test_opd.py)."""
    if not (current_lp.shape == old_lp.shape == teacher_lp.shape):
        raise ValueError(f"log-prob shapes differ: current {tuple(current_lp.shape)}, old {tuple(old_lp.shape)}, "
                         f"teacher {tuple(teacher_lp.shape)}")
    _check_clip_args(clip, eps, eps_high)
    old = old_lp.detach().float()
    w = torch.softmax(old, -1)
    gap = teacher_lp.detach().float() - old
    if clip > 0:
        gap = gap.clamp(-clip, clip)
    adv = w * gap
    ratio = torch.exp((current_lp.float() - old).clamp(-20.0, 20.0))
    loss = torch.maximum(-adv * ratio, -adv * ratio.clamp(1 - eps, 1 + eps_high)).sum(-1)
    clipped = ((ratio < 1 - eps) & (adv < 0)) | ((ratio > 1 + eps_high) & (adv > 0))
    return loss, clipped.float().mean(-1)


def overlap_choice(student_topk: torch.Tensor, teacher_topk: torch.Tensor, mask: Optional[torch.Tensor] = None):
    """The paper's second version's sequence-optimal hint choice (upstream ``hint_opd_select_loss``): for M candidate
    hints, O[h, i] = |S^q_i ∩ S^p_{i,h}|, the number of ids the old student's top-k at response position i shares
    with the teacher's top-k under candidate h; the choice is argmax_h of sum_i O[h, i] over the valid positions,
    ties to the lowest index (the shorter candidate: the list is shortest first).

    student_topk: (T, k) ids; teacher_topk: (M, T, k) ids; mask: (T,) bool (None: every position).
    Returns (index, per-candidate sums (M,) long)."""
    if student_topk.dim() != 2 or teacher_topk.dim() != 3 or teacher_topk.shape[1:] != student_topk.shape:
        raise ValueError(f"student top-k must be (T, k) and teacher top-k (M, T, k) with the same T, k; got "
                         f"{tuple(student_topk.shape)} and {tuple(teacher_topk.shape)}")
    for name, t in (("student_topk", student_topk), ("teacher_topk", teacher_topk)):
        if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:  # P06: ids, not scores
            raise ValueError(f"{name} must hold integer token ids, got {t.dtype}")
    if teacher_topk.shape[0] == 0:  # P04
        raise ValueError("teacher_topk holds no candidate hint (M = 0): there is nothing to choose from")
    shared = _shared_ids(student_topk.unsqueeze(0), teacher_topk)                                       # (M, T)
    if mask is not None:
        shared = shared * mask.to(shared.dtype)
    sums = shared.sum(-1)
    return int(torch.argmax(sums)), sums


def topk_overlap(student_logits: torch.Tensor, teacher_logits: torch.Tensor, k: int = 5) -> torch.Tensor:
    """Share of the teacher's K most likely ids that are also among the student's K most likely, per position: an
    OPD health check (the paper's second version selects hints by it). 1: the hint changes nothing the student would
    consider; low: the teacher wants tokens the student would not sample.

    student_logits, teacher_logits: (..., V). Returns (...) in [0, 1]."""
    _same_vocab(student_logits, teacher_logits)
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    k = min(k, student_logits.shape[-1])
    return _shared_ids(student_logits.topk(k, dim=-1).indices, teacher_logits.topk(k, dim=-1).indices).float() / k


def _shared_ids(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """How many of the ids in ``b`` (..., k) are also in ``a`` (..., k) (broadcast over the leading dimensions),
    per position: (...) long. Top-k ids are distinct, so this is the size of the intersection."""
    return (b.unsqueeze(-1) == a.unsqueeze(-2)).any(-1).sum(-1)


def generalized_jsd(student_logits: torch.Tensor, teacher_logits: torch.Tensor, beta: float = 0.5) -> torch.Tensor:
    """Generalised Jensen-Shannon divergence (TRL's definition), per position (...).

    beta = 0: forward KL(teacher || student); beta = 1: reverse KL(student || teacher);
    otherwise beta * KL(T || M) + (1 - beta) * KL(S || M) with M = beta T + (1 - beta) S.
    """
    if not (isinstance(beta, (int, float)) and 0.0 <= beta <= 1.0):
        raise ValueError(f"beta must be in [0, 1] (0: forward KL, 1: reverse KL), got {beta}")
    _same_vocab(student_logits, teacher_logits)
    s = F.log_softmax(student_logits.float(), -1)
    t = F.log_softmax(teacher_logits.float(), -1)
    if beta == 0:
        return (t.exp() * (t - s)).sum(-1)
    if beta == 1:
        return (s.exp() * (s - t)).sum(-1)
    m = torch.logsumexp(torch.stack([s + math.log(1 - beta), t + math.log(beta)]), 0)
    return beta * (t.exp() * (t - m)).sum(-1) + (1 - beta) * (s.exp() * (s - m)).sum(-1)


# --------------------------------------------------------------------------- one turn, explained
def explain_turn(model, tokenizer, question: str, response: str, next_state: str, cfg: Optional[OPDConfig] = None,
                 combined: bool = False, judge=None, role: str = "user") -> dict:
    """Everything ``claw opd`` shows for one turn: the judge's score and hint, and per response
    token its text and character span in ``response``, the student's and the teacher's log-prob
    and the advantage (OPD, or with ``combined`` the combined advantage).

    ``question`` may be the bare question or a whole prompt in one of the kit's forms
    ("问：法国的首都是哪里？答：", "Q: ...\nA:", ChatML ...): a recognised form is kept for both the
    student and the teacher (:func:`claw_lib.prompts.parse_prompt`); a bare question gets the kit's
    form. With a chat tokenizer the recognised form's text is kept inside the user turn (typed in the kit's
    form too), never dropped: ``"chat_template": true`` and ``"prompt"`` (the student prompt scored) say
    what the model saw. The response is tokenised once, as the continuation of the student prompt, and both
    prompts are scored on those ids. Raises ValueError for an empty response.
    """
    cfg = cfg or OPDConfig()
    parsed = parse_prompt(question)
    form, lang, q = parsed if parsed else ("kit", guess_lang(question, response), question)
    chat = has_chat_template(tokenizer)
    used = form
    if parsed and chat and form == "kit":  # typed in the kit's form: the user turn holds it as typed
        q, used = question.strip(), "bare"
    student = build_prompt(q, lang, tokenizer=tokenizer, form=used)
    cont = response_text(response, lang, tokenizer, prompt=student)
    ids = encode(tokenizer, cont)
    if not ids:
        raise ValueError("the response is empty: there is no token to score")
    sig = judge_turn(response, next_state, judge, cfg, role)
    prompts = [student]
    if sig.hint:
        prompts.append(teacher_prompt(q, sig.hint, lang, tokenizer=tokenizer, form=used))
    lps = token_logprobs(model, tokenizer, prompts, [ids] * len(prompts))
    old, teacher = lps[0], (lps[1] if sig.hint else None)
    if combined:
        adv, _ = combined_advantages(sig, teacher, old, cfg)
    else:
        adv = opd_advantages(teacher, old, cfg) if teacher is not None else np.zeros(len(ids))
    off = len(cont) - len(response)
    tokens = [{"text": s.text, "start": max(0, s.start - off), "end": max(0, s.end - off),
               "student_logprob": round(float(old[k]), 4),
               "teacher_logprob": None if teacher is None else round(float(teacher[k]), 4),
               "advantage": round(float(adv[k]), 4)} for k, s in enumerate(subtoken_spans(tokenizer, ids))]
    return {"hint": sig.hint, "accepted": sig.hint is not None, "score": sig.score, "form": form,
            "chat_template": chat, "prompt": student, "tokens": tokens}
