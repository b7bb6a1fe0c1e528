"""The anchor term (claw_lib/rl/anchor.py): KL(initial || policy) per answer token of the initial model's answers,
against a brute-force loop over prefixes; zero with zero gradient at the initial model; the same gradient scored
in parts; and ppo_update adds it (the anchor's KL after an update is smaller with the term than without)."""
import copy

import pytest
import torch

from claw_lib.models.lm import load_causal_lm
from claw_lib.rl.anchor import anchor_kl, build_anchor

PROMPTS = [[5, 17, 42, 9], [7, 3], [11, 12, 13, 14, 15, 16]]
ANSWERS = [[20, 21, 22], [30], [40, 41, 42, 43, 44]]


def _models(seed=0, scale=0.05):
    ref, tok = load_causal_lm("tiny", device="cpu")
    ref.eval()
    pol = copy.deepcopy(ref)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in pol.parameters():
            p.add_(torch.randn(p.shape, generator=g) * scale)
    for p in ref.parameters():
        p.requires_grad_(False)
    return ref, pol, tok


def _brute(ref, pol, prompts, answers) -> float:
    """Mean over every answer token of sum_v p_ref (log p_ref - log p_pol), each prefix run on its own."""
    kls = []
    with torch.no_grad():
        for p, a in zip(prompts, answers):
            for t in range(len(a)):
                ids = torch.tensor([p + a[:t]])
                lr = torch.log_softmax(ref(input_ids=ids).logits[0, -1].double(), -1)
                lp = torch.log_softmax(pol(input_ids=ids).logits[0, -1].double(), -1)
                kls.append(float((lr.exp() * (lr - lp)).sum()))
    return sum(kls) / len(kls)


def test_the_anchor_kl_is_the_per_token_kl_of_a_brute_force_loop():
    ref, pol, tok = _models()
    pol.eval()
    for rows in (None, 1, 2):
        for cache_mb in (1024, 0):  # the reference's distributions kept, and recomputed at each use
            a = build_anchor(ref, PROMPTS, ANSWERS, tok.pad_token_id, coef=1.0, rows=rows, cache_mb=cache_mb)
            assert a.tokens == 9 and (a.cache is None) == (cache_mb == 0)
            assert anchor_kl(pol, a) == pytest.approx(_brute(ref, pol, PROMPTS, ANSWERS), rel=1e-4, abs=1e-7)


def test_a_kept_reference_is_not_run_again_and_gives_the_same_gradient():
    """With the cache the reference model is never called after the build (a reference that raises is not
    noticed), and the term's gradient is the recomputing one's, to rounding."""
    ref, pol, tok = _models()
    pol.eval()
    grads = []
    for cache_mb in (1024, 0):
        a = build_anchor(ref, PROMPTS, ANSWERS, tok.pad_token_id, coef=2.0, rows=2, cache_mb=cache_mb)
        if cache_mb:
            a.reference = None  # calling it would raise
        pol.zero_grad()
        anchor_kl(pol, a, backward=True)
        grads.append(torch.cat([p.grad.flatten() for p in pol.parameters()]))
    assert torch.allclose(grads[0], grads[1], rtol=1e-4, atol=1e-8)


def test_an_empty_answer_is_dropped_and_bad_sets_are_refused():
    ref, pol, tok = _models()
    a = build_anchor(ref, PROMPTS + [[3, 4]], ANSWERS + [[]], tok.pad_token_id, coef=0.5)
    assert len(a.batch.input_ids) == 3 and a.tokens == 9 and a.coef == 0.5
    with pytest.raises(ValueError, match="no answer with a token"):
        build_anchor(ref, [[1, 2]], [[]], tok.pad_token_id, coef=1.0)
    with pytest.raises(ValueError, match="coefficient must be >= 0"):
        build_anchor(ref, PROMPTS, ANSWERS, tok.pad_token_id, coef=-1.0)


def test_at_the_initial_model_the_kl_and_its_gradient_are_zero():
    ref, _, tok = _models()
    pol = copy.deepcopy(ref)
    for p in pol.parameters():
        p.requires_grad_(True)
    a = build_anchor(ref, PROMPTS, ANSWERS, tok.pad_token_id, coef=3.0)
    kl = anchor_kl(pol, a, backward=True)
    assert abs(kl) < 1e-6
    assert max(float(p.grad.abs().max()) for p in pol.parameters() if p.grad is not None) < 1e-5


def test_the_gradient_scored_in_parts_is_the_gradient_of_one_pass():
    ref, pol, tok = _models(seed=1)
    grads = {}
    for rows in (None, 1):
        pol.zero_grad(set_to_none=True)
        kl = anchor_kl(pol, build_anchor(ref, PROMPTS, ANSWERS, tok.pad_token_id, coef=2.0, rows=rows), backward=True)
        grads[rows] = (kl, [p.grad.clone() for p in pol.parameters()])
    assert grads[1][0] == pytest.approx(grads[None][0], rel=1e-5)
    for g1, g0 in zip(grads[1][1], grads[None][1]):
        torch.testing.assert_close(g1, g0, rtol=1e-4, atol=1e-6)
    # and it is coef times the gradient of the KL (autograd of the brute-force value's graph, built once here)
    pol.zero_grad(set_to_none=True)
    anchor_kl(pol, build_anchor(ref, PROMPTS, ANSWERS, tok.pad_token_id, coef=1.0), backward=True)
    for p, (g2) in zip(pol.parameters(), grads[None][1]):
        torch.testing.assert_close(g2, 2.0 * p.grad, rtol=1e-4, atol=1e-6)


def test_the_anchor_step_never_raises_the_kl_and_takes_no_step_it_cannot_search():
    from claw_lib.rl.anchor import anchor_step

    ref, pol, tok = _models(seed=2)
    params = [p for p in pol.parameters()]
    a = build_anchor(ref, PROMPTS, ANSWERS, tok.pad_token_id, coef=100.0)
    for lr in (1e-4, 1e-2, 10.0):
        before, after = anchor_step(pol, params, a, lr)
        assert after <= before and after == pytest.approx(anchor_kl(pol, a), rel=1e-6)
        assert all(p.grad is None for p in params)
    w = [p.detach().clone() for p in params]
    before, after = anchor_step(pol, params, a, 1e6, halvings=0)  # far too large, and no halving allowed
    assert after == before and all(torch.equal(p, q) for p, q in zip(params, w))


def test_more_anchor_steps_bring_the_policy_nearer():
    from claw_lib.rl.anchor import anchor_steps

    kls = {}
    for steps in (1, 4):
        ref, pol, tok = _models(seed=3)
        a = build_anchor(ref, PROMPTS, ANSWERS, tok.pad_token_id, coef=100.0, steps=steps)
        pol.train()
        kls[steps] = anchor_steps(pol, list(pol.parameters()), a, 1e-3)
        assert pol.training  # searched in eval mode, the mode given back
    assert kls[1][0] == pytest.approx(kls[4][0])  # the same start
    assert kls[4][1] < kls[1][1] < kls[1][0], kls
    with pytest.raises(ValueError, match="steps must be an integer >= 1"):
        build_anchor(ref, PROMPTS, ANSWERS, tok.pad_token_id, coef=1.0, steps=0)
