"""OpenClaw-RL signals: dispatch, OPD and combined advantages, distillation losses, the gap on the tiny GPT."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from claw_lib.config import OPDConfig
from claw_lib.prompts import teacher_prompt
from claw_lib.signals.opd import (
    TurnSignal,
    binary_rl_advantages,
    clipped_topk_opd,
    overlap_choice,
    combined_advantages,
    dispatch,
    generalized_jsd,
    judge_turn,
    opd_advantages,
    token_logprobs,
    topk_reverse_kl,
)


def test_dispatch_table():
    assert dispatch(1, "hint text!!") == "both" and dispatch(-1, "hint text!!") == "both"
    assert dispatch(0, "hint text!!") == "opd" and dispatch(-1, None) == "rl" and dispatch(0, None) == "none"
    lp_old, lp_t = np.array([-0.1, -0.2, -3.0]), np.array([-0.1, -0.1, -9.0])
    a, m = combined_advantages(TurnSignal(-1, "a hint longer"), lp_t, lp_old)
    assert np.allclose(a, -1 + (lp_t - lp_old)) and m.all()
    a, m = combined_advantages(TurnSignal(0, "a hint longer"), lp_t, lp_old)
    assert np.allclose(a, lp_t - lp_old)
    a, m = combined_advantages(TurnSignal(1, None), None, lp_old, OPDConfig(w_rl=0.5))
    assert np.allclose(a, 0.5)
    a, m = combined_advantages(TurnSignal(0, None), None, lp_old)
    assert not m.any()


def test_combined_weight_of_the_negative_broadcast():
    lp_old, lp_t = np.array([-0.1, -0.2, -3.0]), np.array([-0.1, -0.1, -9.0])
    half = OPDConfig(w_rl=2.0, w_rl_negative=0.5)
    a, m = combined_advantages(TurnSignal(-1, "a hint longer"), lp_t, lp_old, half)
    assert np.allclose(a, -0.5 + (lp_t - lp_old)) and m.all()
    a, _ = combined_advantages(TurnSignal(1, "a hint longer"), lp_t, lp_old, half)   # +1 keeps w_rl
    assert np.allclose(a, 2.0 + (lp_t - lp_old))
    pos_only = OPDConfig(w_rl_negative=0.0)
    a, m = combined_advantages(TurnSignal(-1, "a hint longer"), lp_t, lp_old, pos_only)  # = OPD alone
    assert np.allclose(a, opd_advantages(lp_t, lp_old)) and m.all()
    a, m = combined_advantages(TurnSignal(-1, None), None, lp_old, pos_only)  # nothing left: no sample
    assert not m.any()
    a, m = combined_advantages(TurnSignal(1, None), None, lp_old, pos_only)
    assert np.allclose(a, 1.0) and m.all()


def test_opd_advantage_options():
    t, o = np.array([-1.0, -10.0, 0.0]), np.array([-1.0, -0.5, -4.0])
    assert np.allclose(opd_advantages(t, o), [0, -9.5, 4])
    assert np.allclose(opd_advantages(t, o, OPDConfig(clip=2.0)), [0, -2, 2])
    assert np.allclose(opd_advantages(t, o, OPDConfig(clip=2.0, kappa=0.02)), [0, -0.04, 0.04])
    with pytest.raises(ValueError, match="same response token ids"):
        opd_advantages(t, o[:2])
    a, m = binary_rl_advantages(-1, 4)
    assert a.tolist() == [-1] * 4 and m.all()
    assert not binary_rl_advantages(0, 3)[1].any()


def test_topk_reverse_kl_and_jsd_against_formulas():
    torch.manual_seed(0)
    s, t = torch.randn(5, 11), torch.randn(5, 11) * 2
    full_rev = F.kl_div(F.log_softmax(t, -1), F.log_softmax(s, -1), reduction="none", log_target=True).sum(-1)
    assert torch.allclose(topk_reverse_kl(s, t, k=11), full_rev, atol=1e-5)
    assert torch.allclose(generalized_jsd(s, t, beta=1.0), full_rev, atol=1e-5)
    fwd = F.kl_div(F.log_softmax(s, -1), F.log_softmax(t, -1), reduction="none", log_target=True).sum(-1)
    assert torch.allclose(generalized_jsd(s, t, beta=0.0), fwd, atol=1e-5)
    # beta = 0.5: the symmetric JSD, by hand
    ps, pt = s.softmax(-1), t.softmax(-1)
    m = 0.5 * (ps + pt)
    jsd = 0.5 * (pt * (pt / m).log()).sum(-1) + 0.5 * (ps * (ps / m).log()).sum(-1)
    assert torch.allclose(generalized_jsd(s, t, 0.5), jsd, atol=1e-5)
    # top-K with a tail bin: K bins + tail, by hand
    k = 3
    idx = pt.topk(k, -1).indices
    qs = torch.cat([ps.gather(-1, idx), 1 - ps.gather(-1, idx).sum(-1, keepdim=True)], -1)
    qt = torch.cat([pt.gather(-1, idx), 1 - pt.gather(-1, idx).sum(-1, keepdim=True)], -1)
    assert torch.allclose(topk_reverse_kl(s, t, k), (qs * (qs / qt).log()).sum(-1), atol=1e-5)
    assert (topk_reverse_kl(s, t, k) >= -1e-6).all() and (generalized_jsd(s, t, 0.3) >= -1e-6).all()


def test_advantage_length_equals_response_length(tiny):
    model, tok = tiny
    from claw_lib.prompts import build_prompt

    ids = tok("法国的首都是伦敦。", add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    old = token_logprobs(model, tok, [build_prompt("法国的首都是哪里？", "zh")], [ids])[0]
    sig = judge_turn("法国的首都是伦敦。", "不对，法国的首都是巴黎。")
    assert sig.kind == "both" and sig.score == -1
    t = token_logprobs(model, tok, [teacher_prompt("法国的首都是哪里？", sig.hint, "zh")], [ids])[0]
    a, mask = combined_advantages(sig, t, old)
    assert len(a) == len(ids) == len(mask)
    city = [k for k in range(len(ids)) if tok.decode(ids[k:k + 1]) in ("伦", "敦")]
    assert (a[city] + 1).sum() < -5     # OPD term strongly negative on 伦敦
    rest = [k for k in range(len(ids) - 1) if k not in city]
    assert np.abs(a[rest] - (-1)).max() < 1.5  # near zero elsewhere (only the RL score)


def test_gap_sign_separates_right_from_wrong_on_heldout(tiny):
    """AUC of the summed OPD advantage, right vs wrong answers of held-out facts (>= 0.95)."""
    from claw_lib.prompts import build_prompt, response_text
    from claw_lib.toy.pretrain import auc
    from claw_lib.toy.users import CorrectingUser
    from claw_lib.toy.world import FactWorld

    model, tok = tiny
    world = FactWorld()
    user = CorrectingUser(world, p_noise=0.0, p_vague=0.0)
    rng = np.random.default_rng(0)
    good, bad = [], []
    facts = [f for f in world.facts("heldout", relations=("capital",))]
    for f in facts:
        for value, bucket in ((f.truth, good), (world.distractor(f, __import__("random").Random(int(rng.integers(1e9)))), bad)):
            resp = response_text(f.answer(value), f.lang)
            ids = tok(resp, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
            fb = user.reply(f, resp)
            sig = judge_turn(resp, fb.next_state)
            hint = sig.hint or (("不对，" if f.lang == "zh" else "No, ") + f.answer())  # thanks carry no hint
            old = token_logprobs(model, tok, [build_prompt(f.question(), f.lang)], [ids])[0]
            t = token_logprobs(model, tok, [teacher_prompt(f.question(), hint, f.lang)], [ids])[0]
            bucket.append(float(opd_advantages(t, old).sum()))
    assert auc(np.array(good), np.array(bad)) >= 0.95


def test_too_long_prompt_is_a_clear_error(tiny):
    from claw_lib.models.lm import generate

    model, tok = tiny
    with pytest.raises(ValueError, match="positions"):
        generate(model, tok, ["很长的提示" * 100], max_new_tokens=4)
    with pytest.raises(ValueError, match="positions"):
        token_logprobs(model, tok, ["很长的提示" * 100], [[1, 2]])


def test_topk_overlap_against_sets():
    """topk_overlap is |top_k(student) & top_k(teacher)| / k per position, checked against Python sets on random
    logits; identical logits give 1; a shape mismatch is one clear error."""
    import torch

    from claw_lib.signals.opd import topk_overlap

    g = torch.Generator().manual_seed(0)
    s, t = torch.randn(3, 4, 11, generator=g), torch.randn(3, 4, 11, generator=g)
    got = topk_overlap(s, t, k=4)
    assert got.shape == (3, 4)
    for i in range(3):
        for j in range(4):
            a, b = set(s[i, j].topk(4).indices.tolist()), set(t[i, j].topk(4).indices.tolist())
            assert got[i, j].item() == pytest.approx(len(a & b) / 4)
    assert torch.all(topk_overlap(s, s, k=4) == 1)
    with pytest.raises(ValueError, match="vocabularies differ"):
        topk_overlap(s, t[..., :10])


# --------------------------------------------------------------------------- the v2 clipped top-k loss
def _clipped_topk_by_hand(cur, old, teacher, clip, eps, eps_high):
    """The v2 loss one position and one id at a time, in Python floats (upstream _opd_one_sample, written out)."""
    out = np.zeros(cur.shape[:-1])
    for pos in np.ndindex(*cur.shape[:-1]):
        o = [float(x) for x in old[pos]]
        z = sum(math.exp(x) for x in o)
        total = 0.0
        for v in range(cur.shape[-1]):
            w = math.exp(o[v]) / z
            gap = float(teacher[pos][v]) - o[v]
            if clip > 0:
                gap = max(-clip, min(clip, gap))
            a = w * gap
            rho = math.exp(max(-20.0, min(20.0, float(cur[pos][v]) - o[v])))
            total += max(-a * rho, -a * max(1 - eps, min(1 + eps_high, rho)))
        out[pos] = total
    return out


def test_clipped_topk_opd_worked_case():
    """old (0.5, 0.25), teacher (0.25, 0.5), ratios 1: weights (2/3, 1/3), gaps (-log 2, +log 2); the loss is
    -(2/3 (-log 2) + 1/3 log 2) = (log 2) / 3, nothing clipped."""
    old = torch.log(torch.tensor([0.5, 0.25]))
    loss, clipped = clipped_topk_opd(old.clone(), old, torch.log(torch.tensor([0.25, 0.5])))
    assert float(loss) == pytest.approx(math.log(2) / 3, abs=1e-6) and float(clipped) == 0.0


@pytest.mark.parametrize("clip", [0.0, 1.0, 2.0])
def test_clipped_topk_opd_against_the_loop(clip):
    """Random log-probs with ratios away from 1 (some clipped) and gaps beyond +-1: the vectorised loss equals the
    loop over positions and ids, for the launcher's clip (1), the loss file's fallback (2) and no clip (0)."""
    g = torch.Generator().manual_seed(7)
    logits = torch.randn(3, 5, 40, generator=g, dtype=torch.float64) * 2
    old_full = torch.log_softmax(logits, -1)
    lp, ids = old_full.topk(4, -1)
    cur = torch.log_softmax(logits + 0.4 * torch.randn(3, 5, 40, generator=g, dtype=torch.float64), -1).gather(-1, ids)
    teacher = torch.log_softmax(3 * torch.randn(3, 5, 40, generator=g, dtype=torch.float64), -1).gather(-1, ids)
    loss, clipped = clipped_topk_opd(cur, lp, teacher, clip, 0.2, 0.28)
    want = _clipped_topk_by_hand(cur.numpy(), lp.numpy(), teacher.numpy(), clip, 0.2, 0.28)
    assert np.allclose(loss.numpy(), want, atol=1e-5) and 0 < float(clipped.mean()) < 1


def test_clipped_topk_opd_gradient_at_ratio_one():
    """At the first update (current = old) the gradient of the loss with respect to the current log-probs is minus
    the advantage w_v * clip(gap): probability moves towards the ids among the student's top k the teacher prefers,
    not only the sampled one; the gap is clipped to +-C before the weighting."""
    old = torch.log(torch.tensor([0.6, 0.3, 0.1]))
    teacher = torch.log(torch.tensor([0.05, 0.15, 0.8]))
    cur = old.clone().requires_grad_(True)
    loss, _ = clipped_topk_opd(cur, old, teacher, clip=1.0)
    loss.backward()
    w = torch.softmax(old, -1)
    adv = w * (teacher - old).clamp(-1, 1)
    assert torch.allclose(cur.grad, -adv, atol=1e-6)
    assert float(cur.grad[2]) < 0 < float(cur.grad[0])      # the teacher's favourite goes up, the student's down
    with pytest.raises(ValueError, match="log-prob shapes differ"):
        clipped_topk_opd(cur, old[:2], teacher)


def test_overlap_choice_against_sets():
    """O[h, i] = |student top-k ∩ teacher top-k under h| at each position, summed over the masked positions; the
    choice is the first candidate with the largest sum (ties to the shorter, lower index); written with sets."""
    g = torch.Generator().manual_seed(11)
    for trial in range(20):
        T, k, M = 6, 3, 3
        s_top = torch.stack([torch.randperm(8, generator=g)[:k] for _ in range(T)])
        t_top = torch.stack([torch.stack([torch.randperm(8, generator=g)[:k] for _ in range(T)]) for _ in range(M)])
        mask = torch.rand(T, generator=g) > 0.3
        sums = [sum(len(set(s_top[i].tolist()) & set(t_top[h, i].tolist())) for i in range(T) if mask[i]) for h in range(M)]
        choice, got = overlap_choice(s_top, t_top, mask)
        assert got.tolist() == sums and choice == sums.index(max(sums))
    same = torch.tensor([[1, 2], [3, 4]])
    assert overlap_choice(same, torch.stack([same, same]))[0] == 0            # a tie goes to candidate 0
    with pytest.raises(ValueError, match="student top-k must be"):
        overlap_choice(same, same)
