"""Numerical contracts of the PPO maths (issue 36).

1. k3 = exp(d) - 1 - d through ``expm1``: near d = 0 the written form cancels in float32; the kit's
   :func:`claw_lib.rl.core.kl_estimate` is compared with the Taylor series evaluated in float64.
2. The policy gradient of a per-token advantage, as an exact expectation over a small vocabulary
   (no sampling): an advantage that depends on the sampled token (OPD's log pi_T - log pi) has a
   non-zero expected gradient, equal to -grad KL(pi || pi_T); one that does not (Binary RL's broadcast
   score) has zero expected gradient.
3. The hinted teacher's temperature (``opd.teacher_temperature``): the default None scores it at the rollout's
   temperature (a hint that changes nothing gives a gap of 0); 1.0 scores it as upstream does, and then the gap of a
   context-free teacher equals log softmax(z) - log softmax(z / T) computed by hand.
"""
import numpy as np
import pytest
import torch

from claw_lib.config import OPDConfig
from claw_lib.rl.core import clipped_surrogate, kl_estimate
from claw_lib.signals.opd import binary_rl_advantages, opd_advantages

# ---------------------------------------------------------------- 1. k3 near zero

#: d = ref - log pi, small, both signs
SMALL_D = [1e-2, 3e-3, 1e-3, 3e-4, 1e-4, 3e-5, 1e-5, -1e-5, -1e-4, -1e-3, -1e-2]


def _k3_series(d: float) -> float:
    """exp(d) - 1 - d = d^2/2 + d^3/6 + d^4/24 + d^5/120 + ... in float64 (|d| <= 1e-2: the next term is
    below 1e-12 of the first)."""
    return d ** 2 / 2 + d ** 3 / 6 + d ** 4 / 24 + d ** 5 / 120


def _rel_err(got: float, want: float) -> float:
    return abs(got - want) / want


def _k3_float32(d: float):
    """(naive, kit) k3 for logprobs 0 and ref_logprobs d, both float32; plus d as float32 read back."""
    ref = torch.tensor([d], dtype=torch.float32)
    lp = torch.zeros(1, dtype=torch.float32)
    x = ref - lp
    naive = float(torch.exp(x) - 1 - x)
    kit = float(kl_estimate(lp, ref, "k3"))
    return naive, kit, float(x.double())


@pytest.mark.parametrize("d", SMALL_D)
def test_k3_through_expm1_is_accurate_near_zero(d):
    """The kit's k3 is within 1e-2 (relative) of the float64 series at every |d| >= 1e-5; its absolute
    error is a float32 rounding of expm1(d) (about 6e-8 |d|), not of exp(d) (about 6e-8)."""
    _, kit, x = _k3_float32(d)
    want = _k3_series(x)
    assert kit >= 0.0
    assert abs(kit - want) <= 2.4e-7 * abs(x)
    assert _rel_err(kit, want) < 1e-2


def test_naive_k3_cancels_near_zero():
    """The written form exp(d) - 1 - d, in float32: relative error above 1 at |d| = 1e-4, above 100 at
    1e-5, and a negative 'KL' for d = -1e-4 -- against 3e-4 / 4e-4 for the kit's form (measured)."""
    errs = {}
    for d in (1e-4, 1e-5, -1e-4):
        naive, kit, x = _k3_float32(d)
        errs[d] = (_rel_err(naive, _k3_series(x)), _rel_err(kit, _k3_series(x)), naive)
    assert errs[1e-4][0] > 1.0 and errs[1e-5][0] > 100.0
    assert errs[-1e-4][2] < 0.0                       # the naive estimate of a KL is negative
    for naive_err, kit_err, _ in errs.values():
        assert kit_err < 1e-2 and naive_err > 100 * kit_err


def test_k3_unchanged_away_from_zero_and_clamped():
    """Away from zero expm1(d) - d equals exp(d) - 1 - d (float64), and low_var_kl still clamps at 10."""
    d = torch.tensor([-3.0, -1.0, -0.3, 0.3, 1.0, 2.0, 3.0], dtype=torch.float64)
    lp = torch.zeros_like(d)
    assert torch.allclose(kl_estimate(lp, d, "k3"), torch.exp(d) - 1 - d, rtol=1e-12, atol=0)
    assert float(kl_estimate(lp, d, "low_var_kl")[-1]) == 10.0
    assert float(kl_estimate(lp, d, "k3")[-1]) == pytest.approx(np.exp(3.0) - 4.0, rel=1e-12)


# ---------------------------------------------------------------- 2. expected policy gradients

V = 6                                                     # a vocabulary small enough to sum over


def _policy(seed: int = 0):
    """One-token policy pi = softmax(theta), theta (V,) float64 with gradient; a fixed teacher (V,)."""
    g = torch.Generator().manual_seed(seed)
    theta = torch.randn(V, generator=g, dtype=torch.float64).requires_grad_(True)
    teacher_lp = torch.randn(V, generator=g, dtype=torch.float64).log_softmax(-1)
    return theta, teacher_lp


def _expected_loss_grad(theta, advantage_of) -> torch.Tensor:
    """sum over y of pi(y) * grad of the kit's PPO loss on the one-token response y (ratio 1, on-policy),
    with the advantage ``advantage_of(y, old_lp)`` computed from detached log-probs as the loop does.
    The exact expectation E_{y ~ pi}[grad loss(y)], no sampling."""
    lp = theta.log_softmax(-1)
    old = lp.detach()
    mask = torch.ones(1, 1, dtype=torch.bool)
    total = torch.zeros((), dtype=torch.float64)
    for y in range(V):
        a = torch.as_tensor(advantage_of(y, old.numpy()), dtype=torch.float64).reshape(1, 1)
        loss, _ = clipped_surrogate(lp[y].reshape(1, 1), old[y].reshape(1, 1), a, mask)
        total = total + old[y].exp() * loss
    (grad,) = torch.autograd.grad(total, theta)
    return grad


def test_token_dependent_advantage_has_the_reverse_kl_gradient():
    """OPD's A(y) = log pi_T(y) - log pi(y) (the kit's opd_advantages): the expected gradient of the
    loss is grad KL(pi || pi_T) -- non-zero, and the same vector the exact KL's autograd gives."""
    theta, teacher_lp = _policy()
    cfg = OPDConfig()                                   # clip None, kappa 1: the public code

    def opd(y, old):
        return opd_advantages(teacher_lp.numpy()[y:y + 1], old[y:y + 1], cfg)

    got = _expected_loss_grad(theta, opd)
    lp = theta.log_softmax(-1)
    kl = (lp.exp() * (lp - teacher_lp)).sum()
    (want,) = torch.autograd.grad(kl, theta)
    assert want.norm() > 0.1
    assert torch.allclose(got, want, atol=1e-12)


def test_token_dependent_reward_has_the_expected_reward_gradient():
    """Any A(y) that depends on y: expected loss gradient = -grad E_pi[A] = -sum_y A(y) grad pi(y)."""
    theta, _ = _policy(1)
    A = torch.tensor([1.0, -1.0, 0.5, 0.0, 2.0, -0.3], dtype=torch.float64)
    got = _expected_loss_grad(theta, lambda y, old: A[y].item())
    (want,) = torch.autograd.grad(-(theta.softmax(-1) * A).sum(), theta)
    assert want.norm() > 0.1
    assert torch.allclose(got, want, atol=1e-12)


@pytest.mark.parametrize("score", [-1, 1])
def test_token_independent_advantage_has_zero_expected_gradient(score):
    """Binary RL's score broadcast to every token (the same whatever token was sampled): E[A grad log pi]
    = A grad sum_y pi(y) = 0, to rounding."""
    theta, _ = _policy(2)
    got = _expected_loss_grad(theta, lambda y, old: binary_rl_advantages(score, 1)[0])
    assert got.abs().max() < 1e-15
    # an advantage built from a token other than the sampled one is token-independent too
    theta, teacher_lp = _policy(3)
    fixed = lambda y, old: opd_advantages(teacher_lp.numpy()[:1], old[:1], OPDConfig())
    assert _expected_loss_grad(theta, fixed).abs().max() < 1e-15


# ---------------------------------------------------------------- 3. the teacher's temperature

class _ContextFree(torch.nn.Module):
    """A causal LM whose next-token logits are ``z`` (V,) at every position, whatever it read: a teacher for which
    the hint changes nothing, so the OPD gap is the temperatures' doing alone."""

    def __init__(self, z: torch.Tensor):
        super().__init__()
        self.z = torch.nn.Parameter(z, requires_grad=False)
        self.config = type("Config", (), {})()        # no position limit

    def forward(self, input_ids, attention_mask=None, **kw):
        B, L = input_ids.shape
        return type("Out", (), {"logits": self.z.expand(B, L, -1)})()


def _signal_with_teacher_temperature(teacher_temperature, T: float = 0.7):
    """compute_signals (strategy opd, the rule judge, a hinted correction) on two responses whose rollout log-probs
    are the sampling distribution's, log softmax(z / T); the teacher is the context-free model. Returns (signal of
    each response (n,) float64, its ids, z float64)."""
    from claw_lib.models.lm import encode, load_causal_lm, pack
    from claw_lib.rl.ppo import Rollout, Scorer, compute_signals
    from claw_lib.toy.env import Feedback
    from claw_lib.toy.users import FactEnv
    from claw_lib.config import PPOConfig

    _, tok = load_causal_lm("tiny")
    g = torch.Generator().manual_seed(0)
    z = torch.randn(len(tok), generator=g) * 3
    tasks = FactEnv(seed=0, tokenizer=tok).sample(2)
    prompts = [encode(tok, t.prompt) for t in tasks]
    responses = [encode(tok, "法国的首都是伦敦。"), encode(tok, "The capital of France is London.")]
    batch = pack(prompts, responses, tok.pad_token_id)
    old = torch.log_softmax(z / T, -1)[batch.response_ids].masked_fill(~batch.response_mask, 0.0)   # (B, T)
    fb = [Feedback("不对，法国的首都是巴黎。", 0.0, "correction"), Feedback("No, the capital of France is Paris.", 0.0,
                                                                   "correction")]
    ro = Rollout(tasks, prompts, responses, ["法国的首都是伦敦。", "The capital of France is London."], batch, old,
                 None, fb)
    cfg = PPOConfig(strategy="opd", temperature=T, opd=OPDConfig(teacher_temperature=teacher_temperature))
    sig = compute_signals(ro, cfg, Scorer(tok, teacher=_ContextFree(z)))
    assert all(sig.hints)
    return [sig.token_signal[b, :len(r)].double().numpy() for b, r in enumerate(responses)], responses, z.double()


def test_teacher_temperature_default_is_the_rollouts():
    """The default (``opd.teacher_temperature`` None) scores the teacher at the rollout's temperature: a hint that
    changes nothing gives a gap of exactly 0 on every token, at any sampling temperature."""
    assert OPDConfig().teacher_temperature is None
    signals, _, _ = _signal_with_teacher_temperature(None)
    assert all(np.abs(s).max() < 1e-6 for s in signals)


def test_teacher_at_temperature_1_as_upstream_against_a_hand_computation():
    """``opd.teacher_temperature = 1`` (upstream's teacher server scores the raw logits) with a rollout sampled at
    T = 0.7: the gap is log softmax(z)[y] - log softmax(z / 0.7)[y] on every token (float64 by hand), not 0 --
    the temperature mismatch alone moves the signal (here +2.1 to +6.6 nats: the sampled tokens are unlikely under
    z, and 1 flattens the distribution towards them)."""
    signals, responses, z = _signal_with_teacher_temperature(1.0)
    for s, ids in zip(signals, responses):
        want = (torch.log_softmax(z, -1) - torch.log_softmax(z / 0.7, -1))[ids].numpy()
        assert np.allclose(s, want, atol=1e-5)
        assert want.min() > 2.0 and want.max() < 7.0
