"""A small end-to-end PPO loop on the fact world (notebooks 08 and 09).

One step, numbered as in cleanrl:

1. **rollout**   sample a response for each prompt (KV cache, temperature), keep the policy's
                 log-probs of its own tokens (``old_logprobs``) and the reference's;
2. **feedback**  the simulated user replies (the next state) and scores the turn;
3. **signal**    a strategy turns (response, next state) into per-token advantages and a mask:
                 ``sentence``, ``binary``, ``continuous``, ``perplexity`` (token rewards of
                 :mod:`claw_lib.rewards`), ``binary_rl``, ``opd``, ``combined`` (OpenClaw-RL,
                 :mod:`claw_lib.opd`), or ``opd_kl`` (OPD as distillation to the hinted teacher on the
                 student's own prefixes: forward KL, or top-K reverse KL with ``distill``);
4. **advantages** "direct" (the per-token signal is the advantage: OpenClaw's no-baseline
                 broadcast), "grpo" (sequence reward minus the group mean), or "gae" (a value head,
                 GAE(gamma, lambda), whitened);
5. **update**    clipped surrogate (eps, eps_high as OpenClaw), optional KL to the frozen
                 reference (k1 / k3), gradient clipping, epochs x minibatches.

Metrics per step go to ``metrics.jsonl`` / ``metrics.csv`` with namespaced keys (see
:data:`METRICS`); a checkpoint every ``save_every`` steps makes an interrupted run resume to the
same result (sampling is seeded per step).
"""
from __future__ import annotations

import copy
import csv
import json
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np
import torch

from .lm import entropy_from_logits, gather_positions, generate, logprobs_from_batch, pack, selective_log_softmax
from .shaping import masked_mean, masked_whiten
from .utils import resolve_device

__all__ = ["PPOConfig", "STRATEGIES", "METRICS", "gae", "gae_loop", "clipped_surrogate", "kl_estimate",
           "hinted_teacher_score", "train", "evaluate_policy", "ValueHead"]

STRATEGIES = ("sentence", "binary", "continuous", "perplexity", "binary_rl", "opd", "opd_kl", "combined")

#: Glossary of every logged metric.
METRICS = {
    "step": "PPO step (1-based)",
    "reward/score": "mean user score of the batch's sampled responses, in [0, 1]",
    "eval/score": "mean user score of greedy answers on the fixed evaluation prompts",
    "reward/advantage_mean": "mean advantage over the masked tokens",
    "reward/token_mean": "mean per-token signal (reward or OPD gap) before GRPO/GAE, over masked tokens",
    "reward/token_std": "its standard deviation",
    "reward/positive_share": "share of masked tokens with a positive signal",
    "reward/negative_share": "share of masked tokens with a negative signal",
    "reward/masked_fraction": "share of responses that give a training sample (mask not empty)",
    "objective/kl": "mean KL(policy || reference) per token (k3 estimator)",
    "policy/clipfrac": "share of tokens whose ratio was clipped",
    "policy/approx_kl": "mean 0.5 (log pi - log pi_old)^2 during the update",
    "policy/entropy": "mean entropy of the policy at response tokens (nats)",
    "policy/loss": "the surrogate (or distillation) loss of the last minibatch",
    "value/explained_variance": "1 - Var(returns - values) / Var(returns), value head only",
    "opd/accepted_fraction": "share of turns with a usable hint (OPD samples after filtering)",
    "timing/rollout_s": "seconds spent sampling", "timing/score_s": "seconds spent judging and scoring",
    "timing/update_s": "seconds spent in the PPO update",
    "timing/rollout_tokens": "response tokens sampled this step",
}


@dataclass
class PPOConfig:
    """One training run; the defaults run on a laptop CPU in seconds per step."""

    strategy: str = "combined"
    """one of STRATEGIES"""
    user: str = "correcting"
    """"correcting", "student" or "teacher" (claw_lib.users)"""
    model: str = "tiny"
    """policy: "tiny" or a Hugging Face causal LM name/path"""
    device: str = "cpu"
    """"cpu", "cuda" or "auto\""""
    seed: int = 0
    steps: int = 16
    batch_size: int = 16
    """prompts per step"""
    max_new_tokens: int = 32
    temperature: float = 1.0
    lr: float = 3e-4
    epochs: int = 1
    """passes over each batch"""
    minibatches: int = 1
    eps: float = 0.2
    eps_high: float = 0.28
    """upper clip (OpenClaw's asymmetric clip)"""
    kl_coef: float = 0.0
    """weight of the KL-to-reference loss term"""
    kl_estimator: str = "k3"
    max_grad_norm: float = 1.0
    advantage: str = "direct"
    """"direct", "grpo" or "gae\""""
    gamma: float = 1.0
    lam: float = 0.95
    vf_coef: float = 0.5
    omissions: bool = True
    """alignment rewards charge left-out correction words to the word said in their place
    (RewardConfig.omissions); off, a policy learns to stop early"""
    opd_clip: Optional[float] = 2.0
    """clip of the OPD advantage (later upstream code: 2)"""
    w_rl: float = 1.0
    w_opd: float = 1.0
    w_rl_negative: Optional[float] = None
    """combined: weight of the -1 broadcast (None: w_rl; 0: Binary RL term on satisfied turns only)"""
    distill: str = "forward_kl"
    """opd_kl: "forward_kl" (KL(teacher || student) over the vocabulary) or "topk_reverse_kl"
    (KL(student || teacher) over the teacher's top ``distill_topk`` ids plus a tail bin)"""
    distill_topk: int = 16
    teacher: str = "frozen"
    """"frozen" (the reference copy) or "live" (the policy without gradient)"""
    relations: tuple = ("capital",)
    misconception_share: float = 0.5
    questions: str = "single"
    """"single" or "pair" (two capitals per question, correcting user only: the token vs sentence A/B)"""
    p_vague: Optional[float] = None
    """share of unsatisfied replies without a hint (None: the user's default); makes OPD samples sparse"""
    eval_prompts: int = 40
    eval_every: int = 1
    save_every: int = 0
    """checkpoint every N steps (0: never)"""
    threads: int = 2
    progress: bool = True


# --------------------------------------------------------------------------- math helpers
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


# --------------------------------------------------------------------------- the loop
def _response_text(tok, ids: List[int]) -> str:
    return tok.decode([t for t in ids if t != tok.eos_token_id], skip_special_tokens=True).strip()


def _greedy_feedback(model, tok, env, tasks):
    """Greedy answers (up to 40 new tokens) to ``tasks`` and the user's feedback on each; the
    user's RNG is left as it was."""
    gens = generate(model, tok, [t.prompt for t in tasks], max_new_tokens=40, greedy=True) if tasks else []
    state = env.user.rng.getstate()
    fbs = [env.step(t, g.text.strip()) for t, g in zip(tasks, gens)]
    env.user.rng.setstate(state)
    return gens, fbs


def hinted_teacher_score(model, tok, env, n: int = 40) -> Dict:
    """How good OPD's teacher is for ``env``'s user: the user's mean score of the model's greedy
    answers to ``n`` sampled questions ("base"), and of its greedy answers with each resulting hint
    in the teacher context ("teacher", over the ``n_hinted`` turns whose reply held a hint).

    OPD and distillation pull the student towards this teacher, so "teacher" bounds what they can
    reach (notebook 09). The user's RNG is left as it was.
    """
    from .opd import judge_turn, teacher_prompt
    from .users import Task

    tasks = env.sample(n)
    gens, fbs = _greedy_feedback(model, tok, env, tasks)
    hinted = [Task(t.fact, teacher_prompt(t.fact.question(), sig.hint, t.fact.lang, tokenizer=env.tokenizer))
              for t, g, fb in zip(tasks, gens, fbs) if (sig := judge_turn(g.text.strip(), fb.next_state)).hint]
    _, t_fbs = _greedy_feedback(model, tok, env, hinted)
    return {"n": n, "base": float(np.mean([f.score for f in fbs])), "n_hinted": len(hinted),
            "teacher": float(np.mean([f.score for f in t_fbs])) if t_fbs else float("nan")}


def evaluate_policy(model, tok, env, tasks) -> float:
    """Mean user score of greedy answers to ``tasks`` (no state change in the user's RNG)."""
    return float(np.mean([f.score for f in _greedy_feedback(model, tok, env, tasks)[1]]))


def _signals(cfg, strategy, tasks, gens, fbs, teacher, tok, encoder, judge_lm):
    """Per-response advantages (lists of arrays over the response ids) and masks."""
    from .opd import OPDConfig, combined_advantages, judge_turn, opd_advantages, teacher_prompt, token_logprobs
    from .rewards import RewardConfig, policy_token_rewards, token_rewards

    advs, masks, hints = [], [], []
    ocfg = OPDConfig(clip=cfg.opd_clip, w_rl=cfg.w_rl, w_opd=cfg.w_opd, w_rl_negative=cfg.w_rl_negative)
    for t, g, fb in zip(tasks, gens, fbs):
        text = _response_text(tok, g.ids)
        n = len(g.ids)
        if strategy in ("sentence", "binary", "continuous", "perplexity"):
            tr = token_rewards(text, fb.next_state, strategy, RewardConfig(omissions=cfg.omissions), encoder=encoder,
                               judge=judge_lm, question=t.fact.question())
            try:
                a = policy_token_rewards(tr, tok, g.ids, "spread")
            except ValueError:  # a response the word tokenizer cannot map (e.g. empty): no sample
                a = np.zeros(n)
            advs.append(a)
            masks.append(np.full(n, bool(len(tr.tokens))))
            hints.append(None)
            continue
        sig = judge_turn(text, fb.next_state, cfg=ocfg)
        hints.append(sig.hint)
        tlp = None
        if sig.hint and strategy in ("opd", "combined", "opd_kl"):
            tlp = token_logprobs(teacher, tok, [teacher_prompt(t.fact.question(), sig.hint, t.fact.lang, tokenizer=tok)],
                                 [g.ids])[0]
        if strategy == "binary_rl":
            a, m = np.full(n, float(sig.score)), np.full(n, sig.score != 0)
        elif strategy in ("opd", "opd_kl"):
            if tlp is None:
                a, m = np.zeros(n), np.zeros(n, bool)
            else:
                a, m = opd_advantages(tlp, g.old_logprobs, ocfg), np.ones(n, bool)
        else:  # combined
            a, m = combined_advantages(sig, tlp, g.old_logprobs, ocfg)
        advs.append(a)
        masks.append(m)
    return advs, masks, hints


def train(cfg: PPOConfig, out_dir=None, resume: bool = True, stop_after: Optional[int] = None) -> List[Dict]:
    """Run PPO; returns the list of per-step metric dicts (also written to ``out_dir``).

    resume: continue from ``out_dir/checkpoint.pt`` if present. stop_after: stop (as if
    interrupted) after this many steps of this call (for the resume test).
    """
    from tqdm.auto import tqdm

    from .lm import load_causal_lm
    from .opd import frozen_teacher, generalized_jsd, teacher_prompt, topk_reverse_kl
    from .users import FactEnv

    if cfg.strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, got {cfg.strategy!r}")
    if cfg.distill not in ("forward_kl", "topk_reverse_kl"):
        raise ValueError(f"distill must be 'forward_kl' or 'topk_reverse_kl', got {cfg.distill!r}")
    torch.set_num_threads(cfg.threads)
    dev = resolve_device(cfg.device)
    model, tok = load_causal_lm(cfg.model, device=dev)
    ref = frozen_teacher(model)
    teacher = model if cfg.teacher == "live" else ref  # OPD teacher: the live policy or the frozen reference
    torch.manual_seed(cfg.seed)
    vhead = ValueHead(model.config.hidden_size).to(dev) if cfg.advantage == "gae" else None
    params = list(model.parameters()) + (list(vhead.parameters()) if vhead else [])
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=0.0)
    env = FactEnv(user=cfg.user, relations=cfg.relations, misconception_share=cfg.misconception_share,
                  seed=cfg.seed, tokenizer=tok if getattr(tok, "chat_template", None) else None,
                  questions=cfg.questions, p_vague=cfg.p_vague)
    eval_env = FactEnv(env.world, user=cfg.user, relations=cfg.relations,
                       misconception_share=cfg.misconception_share, seed=10_000 + cfg.seed,
                       tokenizer=env.tokenizer, questions=cfg.questions, p_vague=cfg.p_vague)
    eval_tasks = eval_env.sample(cfg.eval_prompts)
    encoder = None
    if cfg.strategy in ("sentence", "binary", "continuous"):
        from .encoders import load_encoder

        encoder = load_encoder("e5", device=dev)
    out = Path(out_dir) if out_dir else None
    history: List[Dict] = []
    start = 0
    if out and resume and (out / "checkpoint.pt").exists():
        ck = torch.load(out / "checkpoint.pt", weights_only=False)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        if vhead is not None:
            vhead.load_state_dict(ck["vhead"])
        history, start = ck["history"], ck["step"]
    if out:
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.json").write_text(json.dumps(asdict(cfg), indent=1))
    if start == 0:
        model.eval()
        base = evaluate_policy(model, tok, eval_env, eval_tasks)
        history.append({"step": 0, "eval/score": base})
    bar = tqdm(range(start, cfg.steps), desc=f"ppo {cfg.strategy}", disable=not cfg.progress, leave=False)
    done_here = 0
    for step in bar:
        metrics: Dict = {"step": step + 1}
        # 1. rollout -------------------------------------------------------------------------
        t0 = time.time()
        model.eval()
        env.reset(cfg.seed * 100_003 + step)
        tasks = env.sample(cfg.batch_size)
        gens = generate(model, tok, [t.prompt for t in tasks], max_new_tokens=cfg.max_new_tokens,
                        temperature=cfg.temperature, seed=cfg.seed * 100_003 + step)
        gens = [g if g.ids else type(g)(g.text, [tok.eos_token_id], True) for g in gens]
        p_ids = [tok(t.prompt, add_special_tokens=False)["input_ids"] for t in tasks]
        batch = pack(p_ids, [g.ids for g in gens], tok.pad_token_id)
        with torch.no_grad():
            old_lp = logprobs_from_batch(model, batch)                      # (B, T)
            ref_lp = logprobs_from_batch(ref, batch)                        # (B, T)
        for b, g in enumerate(gens):
            g.old_logprobs = old_lp[b, :len(g.ids)].cpu().numpy()
        metrics["timing/rollout_s"] = time.time() - t0
        metrics["timing/rollout_tokens"] = int(batch.response_mask.sum())
        # 2. feedback ------------------------------------------------------------------------
        t0 = time.time()
        fbs = [env.step(t, _response_text(tok, g.ids)) for t, g in zip(tasks, gens)]
        metrics["reward/score"] = float(np.mean([f.score for f in fbs]))
        # 3. signal --------------------------------------------------------------------------
        judge_lm = (ref, tok) if cfg.strategy == "perplexity" else None
        advs, masks, hints = _signals(cfg, cfg.strategy, tasks, gens, fbs, teacher, tok, encoder, judge_lm)
        metrics["opd/accepted_fraction"] = float(np.mean([h is not None for h in hints]))
        T = batch.response_ids.shape[1]
        A = torch.zeros(len(gens), T)
        M = torch.zeros(len(gens), T, dtype=torch.bool)
        for b, (a, m) in enumerate(zip(advs, masks)):
            A[b, :len(a)] = torch.as_tensor(a, dtype=torch.float32)
            M[b, :len(m)] = torch.as_tensor(m)
        M &= batch.response_mask
        sig_vals = A[M]
        metrics["reward/token_mean"] = float(sig_vals.mean()) if sig_vals.numel() else 0.0
        metrics["reward/token_std"] = float(sig_vals.std()) if sig_vals.numel() > 1 else 0.0
        metrics["reward/positive_share"] = float((sig_vals > 0).float().mean()) if sig_vals.numel() else 0.0
        metrics["reward/negative_share"] = float((sig_vals < 0).float().mean()) if sig_vals.numel() else 0.0
        metrics["timing/score_s"] = time.time() - t0
        # 4. advantages ----------------------------------------------------------------------
        t0 = time.time()
        if cfg.advantage == "grpo":
            seq = torch.tensor([float(f.score) for f in fbs])
            A = (seq - seq.mean()).unsqueeze(1).expand(-1, T) * batch.response_mask
            M = batch.response_mask.clone()
        returns = None
        if cfg.advantage == "gae":
            rewards = A.clone()
            with torch.no_grad():
                values = _values(model, vhead, batch)
            A, returns = gae(rewards, values, M, cfg.gamma, cfg.lam)
            if M.sum() > 1:
                A = masked_whiten(A, M) * M
        metrics["reward/advantage_mean"] = float(masked_mean(A, M)) if M.any() else 0.0
        metrics["reward/masked_fraction"] = float(M.any(1).float().mean())
        teacher_batch = None
        if cfg.strategy == "opd_kl":
            tp = [tok(teacher_prompt(t.fact.question(), h, t.fact.lang, tokenizer=tok), add_special_tokens=False)["input_ids"]
                  if h else p for t, h, p in zip(tasks, hints, p_ids)]
            teacher_batch = pack(tp, [g.ids for g in gens], tok.pad_token_id)
        # 5. update --------------------------------------------------------------------------
        model.train()
        idx = np.arange(len(gens))
        stats = {"clipfrac": [], "approx_kl": [], "entropy": [], "kl": [], "loss": []}
        if M.any():
            for _ in range(cfg.epochs):
                np.random.default_rng(cfg.seed * 7919 + step).shuffle(idx)
                for mb in np.array_split(idx, cfg.minibatches):
                    mb_t = torch.as_tensor(mb)
                    sub = batch.select(mb_t)
                    m_sub = M[mb_t]
                    if not m_sub.any():
                        continue
                    out_ = model(input_ids=sub.input_ids, attention_mask=sub.attention_mask,
                                 output_hidden_states=vhead is not None)
                    logits = gather_positions(out_.logits, sub.logit_index)      # (b, T, V)
                    lp = selective_log_softmax(logits.float(), sub.response_ids)  # (b, T)
                    if cfg.strategy == "opd_kl":
                        tb = teacher_batch.select(mb_t)
                        with torch.no_grad():
                            t_logits = gather_positions(teacher(input_ids=tb.input_ids,
                                                                attention_mask=tb.attention_mask).logits, tb.logit_index)
                        if cfg.distill == "forward_kl":
                            div = generalized_jsd(logits, t_logits, beta=0.0)      # KL(T || S) per position
                        else:
                            div = topk_reverse_kl(logits, t_logits, cfg.distill_topk)  # KL(S || T), top-K + tail
                        loss = masked_mean(div, m_sub)
                        clipfrac = torch.tensor(0.0)
                    else:
                        loss, clipfrac = clipped_surrogate(lp, old_lp[mb_t], A[mb_t], m_sub, cfg.eps, cfg.eps_high)
                    kl = kl_estimate(lp, ref_lp[mb_t], cfg.kl_estimator)
                    if cfg.kl_coef:
                        loss = loss + cfg.kl_coef * masked_mean(kl, m_sub)
                    if vhead is not None:
                        v = vhead(gather_positions(out_.hidden_states[-1], sub.logit_index))
                        loss = loss + cfg.vf_coef * masked_mean((v - returns[mb_t]) ** 2, m_sub)
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
                    opt.step()
                    with torch.no_grad():
                        stats["clipfrac"].append(float(clipfrac))
                        stats["approx_kl"].append(float(masked_mean(0.5 * (lp - old_lp[mb_t]) ** 2, m_sub)))
                        stats["entropy"].append(float(masked_mean(entropy_from_logits(logits), m_sub)))
                        stats["kl"].append(float(masked_mean(kl_estimate(lp, ref_lp[mb_t], "k3"), m_sub)))
                        stats["loss"].append(float(loss))
        for k, name in [("clipfrac", "policy/clipfrac"), ("approx_kl", "policy/approx_kl"), ("entropy", "policy/entropy"),
                        ("kl", "objective/kl"), ("loss", "policy/loss")]:
            metrics[name] = float(np.mean(stats[k])) if stats[k] else 0.0
        if returns is not None and M.sum() > 1:
            with torch.no_grad():
                vals = _values(model, vhead, batch)
            r, v = returns[M], vals[M]
            metrics["value/explained_variance"] = float(1 - (r - v).var() / r.var().clamp(min=1e-8))
        metrics["timing/update_s"] = time.time() - t0
        model.eval()
        if cfg.eval_every and ((step + 1) % cfg.eval_every == 0 or step + 1 == cfg.steps):
            metrics["eval/score"] = evaluate_policy(model, tok, eval_env, eval_tasks)
        history.append(metrics)
        bar.set_postfix(score=f"{metrics['reward/score']:.2f}")
        done_here += 1
        if out:
            _write_metrics(out, history)
            if cfg.save_every and (step + 1) % cfg.save_every == 0:
                ck = {"model": model.state_dict(), "opt": opt.state_dict(), "history": history, "step": step + 1}
                if vhead is not None:
                    ck["vhead"] = vhead.state_dict()
                torch.save(ck, out / "checkpoint.pt")
        if stop_after is not None and done_here >= stop_after:
            break
    return history


def _values(model, vhead, batch):
    out = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, output_hidden_states=True)
    return vhead(gather_positions(out.hidden_states[-1], batch.logit_index))


def _write_metrics(out: Path, history: List[Dict]) -> None:
    with open(out / "metrics.jsonl", "w") as f:
        for h in history:
            f.write(json.dumps(h) + "\n")
    keys = sorted({k for h in history for k in h}, key=lambda k: (k != "step", k))
    with open(out / "metrics.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        for h in history:
            w.writerow(h)
