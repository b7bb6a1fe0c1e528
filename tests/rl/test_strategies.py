"""The plan of each strategy (claw_lib.rl.strategies) against the per-stage tests it replaced (issue 33).

The reference functions below are the strategy tests as they stood in rl/ppo.py and integrations/trl.py before the
plan (needs_old_logprobs, topk_loss, old_topk_width, v2_hybrid, needs_reference, the encoder / judge choice of
Scorer.for_run, the row kind of _openclaw_rows, the sample rows of compute_advantages, the teacher batch, the TRL
engine's signals); every combination of the settings they read must give the same answer from the plan.
"""
import itertools
import math
import sys
import subprocess

import pytest

from claw_lib.config import ADVANTAGES, DISTILL_LOSSES, PPO_STRATEGIES, LossConfig, PPOConfig, override
from claw_lib.rl.strategies import DRIVERS, LOSS_FAMILIES, STRATEGY_TABLE, check, driver_refusal, plan

HINTED = ("opd", "combined", "opd_kl")


# ----------------------------------------------------------------- the replaced tests, written out
def old_v2_hybrid(cfg):
    return cfg.strategy == "combined" and cfg.loss.distill == "topk_clipped"


def old_topk_loss(cfg):
    return cfg.loss.distill == "topk_clipped" and (cfg.strategy == "opd_kl" or old_v2_hybrid(cfg))


def old_needs_old_logprobs(cfg):
    return cfg.strategy in HINTED or cfg.epochs * cfg.minibatches > 1


def old_topk_width(cfg):
    k = cfg.loss.clipped_k if old_topk_loss(cfg) else 0
    if cfg.opd.hint_selection == "overlap" and cfg.strategy in HINTED:
        k = max(k, cfg.opd.selection_k)
    return k


def old_needs_reference(cfg):
    frozen = cfg.strategy in HINTED and cfg.opd.teacher == "frozen"
    return bool(cfg.loss.kl_coef) or frozen or cfg.strategy == "perplexity"


def old_loss_branch(cfg):
    """Which branch of the old ppo_update's loop body ran."""
    if cfg.strategy == "opd_kl":
        return "topk_clipped" if old_topk_loss(cfg) else "distill"
    return "hybrid" if old_topk_loss(cfg) else "surrogate"


def old_turn_row(strategy):
    return {"binary_rl": "vote", "opd": "gap", "opd_kl": "gap"}.get(strategy, "vote+gap")


def configs():
    for strategy, distill, adv, (epochs, mbs), kl, teacher, selection in itertools.product(
            PPO_STRATEGIES, DISTILL_LOSSES, ADVANTAGES, ((1, 1), (2, 1), (1, 2)), (0.0, 0.1), ("frozen", "live"),
            ("longest", "overlap")):
        yield override(PPOConfig(), {"strategy": strategy, "loss.distill": distill, "advantage": adv, "epochs": epochs,
                                     "minibatches": mbs, "loss.kl_coef": kl, "opd.teacher": teacher,
                                     "opd.hint_selection": selection, "opd.selection_k": 7, "loss.clipped_k": 3})


def test_the_plan_answers_as_every_replaced_strategy_test():
    n = 0
    for cfg in configs():
        p = plan(cfg)
        s = cfg.strategy
        assert p.old_logprobs == old_needs_old_logprobs(cfg), cfg
        assert p.old_topk == old_topk_width(cfg), cfg
        assert p.reference == old_needs_reference(cfg), cfg
        assert p.loss_family == old_loss_branch(cfg), cfg
        assert p.rl_only_advantage == old_v2_hybrid(cfg), cfg
        assert p.teacher_batch == (s == "opd_kl" or old_v2_hybrid(cfg)), cfg
        assert p.hint_overlap == (cfg.opd.hint_selection == "overlap" and s in HINTED), cfg
        assert p.every_row == (s == "binary_rl" or cfg.advantage == "grpo"), cfg
        assert p.strategy.encoder == (s in ("sentence", "binary", "continuous")), cfg
        assert p.strategy.judge_lm == (s == "perplexity"), cfg
        assert p.strategy.hint == (s in HINTED), cfg
        assert (p.strategy.signal == "token_reward") == (s in ("sentence", "binary", "continuous", "perplexity"))
        if p.strategy.signal == "openclaw":
            assert p.strategy.turn == old_turn_row(s)
        lc = cfg.loss.for_strategy(s)
        assert (p.loss.eps_high, p.loss.loss_agg) == (lc.eps_high, lc.loss_agg)
        assert p.loss_family in LOSS_FAMILIES
        n += 1
    assert n == 8 * 3 * 5 * 3 * 2 * 2 * 2


@pytest.mark.parametrize("strategy, eps_high, agg, family", [
    ("sentence", 0.28, "token_mean", "surrogate"), ("binary", 0.28, "token_mean", "surrogate"),
    ("continuous", 0.28, "token_mean", "surrogate"), ("perplexity", 0.28, "token_mean", "surrogate"),
    ("binary_rl", 0.28, "sample_mean", "surrogate"), ("opd", 0.2, "sample_mean", "surrogate"),
    ("opd_kl", 0.2, "sample_mean", "distill"), ("combined", 0.28, "sample_mean", "surrogate")])
def test_each_row_at_the_defaults(strategy, eps_high, agg, family):
    """The defaults written out: upstream's clip ranges and aggregations (opd_kl has no ratio: eps_high = eps)."""
    p = plan(PPOConfig(strategy=strategy))
    assert (p.loss.eps, p.loss.eps_high, p.loss.loss_agg, p.loss_family) == (0.2, eps_high, agg, family)


def test_topk_clipped_rows():
    hybrid = plan(override(PPOConfig(strategy="combined"), {"loss.distill": "topk_clipped"}))
    assert (hybrid.loss_family, hybrid.old_topk, hybrid.teacher_batch, hybrid.rl_only_advantage) == ("hybrid", 4, True, True)
    assert plan(override(PPOConfig(strategy="combined"), {"loss.distill": "topk_clipped"}), "trl") == hybrid  # TRL runs the kit's loss
    v2 = plan(override(PPOConfig(strategy="opd_kl"), {"loss.distill": "topk_clipped"}))
    assert (v2.loss_family, v2.old_topk, v2.rl_only_advantage) == ("topk_clipped", 4, False)
    other = plan(override(PPOConfig(strategy="binary"), {"loss.distill": "topk_clipped"}))
    assert (other.loss_family, other.old_topk) == ("surrogate", 0)  # the setting is opd_kl's and combined's only


def test_trl_rows():
    from_table = {n for n, s in STRATEGY_TABLE.items() if s.trl is None}
    assert from_table == set(PPO_STRATEGIES)  # opd_kl and the v2 hybrid with the kit's loss in TRL's step


@pytest.mark.parametrize("changes, loop, trl, serve", [
    ({}, True, True, True),
    ({"task.user": "joint"}, True, False, False), ({"task.user": "tool-chain"}, True, False, False),
    ({"opd.hint_candidates": 3, "opd.hint_selection": "overlap"}, True, False, False),
    ({"advantage": "grpo"}, True, True, False), ({"advantage": "gae"}, True, False, False),
    ({"advantage": "whiten"}, True, False, True), ({"advantage": "reward_to_go"}, True, False, True),
    ({"loss.kl_coef": 0.1}, True, True, False), ({"loss.distill": "topk_clipped"}, True, True, False),
])
def test_plan_refuses_what_a_driver_cannot_supply(changes, loop, trl, serve):
    """The driver table (issue 44) against the refusals it replaced: the TRL engine's _check_settings (no episodes,
    no overlap, advantage direct / grpo) and the server's list (no grpo / gae, no KL term, no top-k ids, no overlap,
    and no episodes: a served turn has no episode)."""
    cfg = override(PPOConfig(strategy="combined"), changes)
    for driver, runs in (("loop", loop), ("trl", trl), ("serve", serve)):
        assert (driver_refusal(cfg, driver) is None) == runs, (driver, changes)
        if not runs:
            with pytest.raises(ValueError, match=f"^{DRIVERS[driver].name} does not support"):
                plan(cfg, driver)


def test_unknown_names_are_refused():
    for bad, match in ((PPOConfig(strategy="ppo"), "strategy must be one of"),
                       (PPOConfig(loss=LossConfig(distill="jsd")), "distill must be one of"),
                       (PPOConfig(loss=LossConfig(loss_agg="sum")), "loss_agg must be one of")):
        with pytest.raises(ValueError, match=match):
            check(bad)
        with pytest.raises(ValueError, match=match):
            plan(bad)


def test_the_plan_is_torch_free():
    code = "import sys, claw_lib.rl.strategies; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


# ----------------------------------------------------------------- the update's clip shares, per loss family
def _brute_surrogate_share(lp, old, adv, mask, eps, eps_high):
    """Tokens whose ratio the clipped surrogate holds (A > 0 above 1 + eps_high, A < 0 below 1 - eps), counted."""
    held = n = 0
    for b in range(lp.shape[0]):
        for t in range(lp.shape[1]):
            if mask[b, t]:
                r, a = math.exp(float(lp[b, t] - old[b, t])), float(adv[b, t])
                held += (a > 0 and r > 1 + eps_high) or (a < 0 and r < 1 - eps)
                n += 1
    return held / n


def _brute_topk_share(cur, old, teacher, mask, gap_clip, eps, eps_high):
    """(token, top-k id) pairs the clipped top-k loss holds: w = softmax(old) over the k ids, A = w x the clipped
    teacher-minus-old gap; held when A > 0 and the ratio is above 1 + eps_high, or A < 0 and below 1 - eps."""
    held = n = 0
    for b in range(cur.shape[0]):
        for t in range(cur.shape[1]):
            if not mask[b, t]:
                continue
            o = [float(x) for x in old[b, t]]
            z = sum(math.exp(x) for x in o)
            for j in range(len(o)):
                a = math.exp(o[j]) / z * max(-gap_clip, min(gap_clip, float(teacher[b, t, j]) - o[j]))
                r = math.exp(float(cur[b, t, j]) - o[j])
                held += (a > 0 and r > 1 + eps_high) or (a < 0 and r < 1 - eps)
                n += 1
    return held / n


def test_the_hybrid_logs_each_terms_clip_share():
    """The v2 hybrid's update returns the surrogate's clip share as ``clipfrac`` and the clipped top-k loss's as
    ``topk_clipfrac`` (logged as policy/topk_clipfrac), each equal to a count written out with loops."""
    import torch

    from claw_lib.rl.ppo import LOSSES, METRICS, UPDATE_STATS, _Minibatch

    cfg = override(PPOConfig(strategy="combined"), {"loss.distill": "topk_clipped"})
    p = plan(cfg)
    g = torch.Generator().manual_seed(0)
    B, T, V, k = 3, 5, 11, p.loss.clipped_k
    logits, t_logits = torch.randn(B, T, V, generator=g) * 2, torch.randn(B, T, V, generator=g) * 2
    old_logits = logits + torch.randn(B, T, V, generator=g)  # pi_old differs from pi: some ratios leave the range
    ids = torch.randint(0, V, (B, T, 1), generator=g)
    old_all = torch.log_softmax(old_logits, -1)
    old_lp = old_all.gather(-1, ids).squeeze(-1)
    lp = torch.log_softmax(logits, -1).gather(-1, ids).squeeze(-1)
    top_old, top_ids = old_all.topk(k, -1)
    mask = torch.rand(B, T, generator=g) > 0.2
    adv = torch.randn(B, T, generator=g) * mask
    mb = _Minibatch(lp, logits, t_logits, old_lp, adv, mask, torch.ones(B, dtype=torch.bool), (top_ids, top_old))
    loss, stats = LOSSES["hybrid"](mb, p.loss, cfg)
    assert set(stats) == {"clipfrac", "topk_clipfrac"} and set(stats) <= set(UPDATE_STATS)
    want_s = _brute_surrogate_share(lp, old_lp, adv, mask, p.loss.eps, p.loss.eps_high)
    cur_k = torch.log_softmax(logits, -1).gather(-1, top_ids)
    t_k = torch.log_softmax(t_logits, -1).gather(-1, top_ids)
    want_k = _brute_topk_share(cur_k, top_old, t_k, mask, p.loss.clipped_gap, p.loss.eps, p.loss.eps_high)
    assert 0 < want_s < 1 and 0 < want_k < 1 and want_s != pytest.approx(want_k)  # a case where the two differ
    assert float(stats["clipfrac"]) == pytest.approx(want_s, abs=1e-6)
    assert float(stats["topk_clipfrac"]) == pytest.approx(want_k, abs=1e-6)
    # the top-k loss alone (opd_kl) reports the same top-k share as its clipfrac, and nothing else
    _, alone = LOSSES["topk_clipped"](mb, p.loss, cfg)
    assert set(alone) == {"clipfrac"} and float(alone["clipfrac"]) == pytest.approx(want_k, abs=1e-6)
    assert "policy/topk_clipfrac" in METRICS and set(UPDATE_STATS.values()) <= set(METRICS)


def test_only_the_hybrid_logs_the_topk_clip_share():
    """Smoke of one step each: policy/topk_clipfrac is in the hybrid's metrics (a share in [0, 1]), in no other's."""
    from claw_lib.rl.run import train

    small = {"steps": 1, "batch_size": 4, "eval_prompts": 4, "eval_every": 0, "task.user": "teacher"}
    hybrid = train(override(PPOConfig(strategy="combined", progress=False),
                            {**small, "loss.distill": "topk_clipped"}))[-1]
    assert 0.0 <= hybrid["policy/topk_clipfrac"] <= 1.0 and "policy/clipfrac" in hybrid
    for strategy, distill in (("combined", "forward_kl"), ("opd_kl", "topk_clipped")):
        row = train(override(PPOConfig(strategy=strategy, progress=False), {**small, "loss.distill": distill}))[-1]
        assert "policy/topk_clipfrac" not in row and "policy/clipfrac" in row, (strategy, distill)
