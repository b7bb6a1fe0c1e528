"""PPO maths against formulas: GAE (vectorised vs float64 loop), clipped surrogate, KL estimators."""
import pytest
import torch

from claw_lib.rl.core import clipped_surrogate, gae, gae_loop, kl_estimate, reward_to_go


def test_gae_vectorised_equals_loop_float64():
    torch.manual_seed(0)
    B, T = 5, 9
    r = torch.randn(B, T, dtype=torch.float64)
    v = torch.randn(B, T, dtype=torch.float64)
    lengths = [9, 4, 1, 7, 0]
    mask = torch.zeros(B, T, dtype=torch.bool)
    for b, n in enumerate(lengths):
        mask[b, :n] = True
    for gamma, lam in [(1.0, 0.95), (0.9, 0.8), (0.99, 1.0), (1.0, 0.0)]:
        a1, ret1 = gae(r, v, mask, gamma, lam)
        a2, ret2 = gae_loop(r, v, mask, gamma, lam)
        assert torch.allclose(a1, a2, atol=1e-12) and torch.allclose(ret1 * mask, ret2 * mask, atol=1e-12)
    # lambda = 1, gamma = 1: advantage = reward-to-go minus value
    a, _ = gae(r, v, mask, 1.0, 1.0)
    n = 9
    rtg = torch.flip(torch.cumsum(torch.flip(r[0, :n], [0]), 0), [0])
    assert torch.allclose(a[0, :n], rtg - v[0, :n], atol=1e-12)


def test_clipped_surrogate_on_hand_built_ratios():
    old = torch.zeros(1, 4)
    lp = torch.log(torch.tensor([[1.5, 0.5, 1.1, 1.5]]))  # ratios 1.5, 0.5, 1.1, 1.5
    adv = torch.tensor([[1.0, 1.0, -1.0, -1.0]])
    mask = torch.ones(1, 4, dtype=torch.bool)
    loss, clipfrac = clipped_surrogate(lp, old, adv, mask, eps=0.2, eps_high=0.28)
    # A>0, r=1.5: min(1.5, 1.28) = 1.28; A>0, r=0.5: min(0.5, 0.8) = 0.5;
    # A<0, r=1.1: -max(1.1, 1.1) = -1.1; A<0, r=1.5: -max(1.5, 1.28) = -1.5
    expected = -(1.28 + 0.5 - 1.1 - 1.5) / 4
    assert loss.item() == pytest.approx(expected, abs=1e-6)
    assert clipfrac.item() == pytest.approx(0.25)  # only the first token is clipped
    mask2 = torch.tensor([[True, False, False, False]])
    assert clipped_surrogate(lp, old, adv, mask2)[0].item() == pytest.approx(-1.28, abs=1e-6)


def test_kl_estimators_against_exact_kl():
    torch.manual_seed(1)
    logits_p, logits_q = torch.randn(7), torch.randn(7)
    lp, lq = logits_p.log_softmax(-1), logits_q.log_softmax(-1)
    exact = (lp.exp() * (lp - lq)).sum()
    # expectations under pi of each estimator, computed exactly over the support
    k1 = (lp.exp() * kl_estimate(lp, lq, "k1")).sum()
    k3 = (lp.exp() * kl_estimate(lp, lq, "k3")).sum()
    assert k1.item() == pytest.approx(exact.item(), abs=1e-6)
    assert k3.item() == pytest.approx(exact.item(), abs=1e-6)
    assert (kl_estimate(lp, lq, "k3") >= 0).all()
    with pytest.raises(ValueError):
        kl_estimate(lp, lq, "k2")


@pytest.mark.parametrize("gamma", [0.0, 0.5, 1.0])
def test_reward_to_go_against_the_sum(gamma):
    """G_t = sum over k >= t (within the response) of gamma^(k - t) r_k, written as the sum; padding stays 0."""
    g = torch.Generator().manual_seed(3)
    r = torch.randn(4, 7, generator=g, dtype=torch.float64)
    lengths = [7, 3, 1, 5]
    mask = torch.tensor([[t < n for t in range(7)] for n in lengths])
    G = reward_to_go(r * mask, mask, gamma)
    for b, n in enumerate(lengths):
        for t in range(7):
            want = sum(gamma ** (k - t) * float(r[b, k]) for k in range(t, n)) if t < n else 0.0
            assert float(G[b, t]) == pytest.approx(want, abs=1e-12)
    if gamma == 0.0:
        assert torch.equal(G, r * mask)
