"""Self-checks for the notebooks' exercises (notebooks 02, 04, 06, 07, 08): write the function, then
``check("<name>", your_function)`` runs it on cases you have not seen, compares it with the kit's own
implementation, and says right, or what is wrong with a hint. Nothing is graded or stored.

    >>> from claw_lib.exercises import check
    >>> check("reward_to_go", lambda r, gamma: r)        # forgets the future rewards
    not yet: reward_to_go([0.5, -1.0, 0.5], gamma=1.0) gave [0.5, -1.0, 0.5], expected [0.0, -0.5, 0.5]. Hint: ...
    False

Each exercise (:data:`EXERCISES`) names the signature your function takes, the notebook that teaches it, and the
hint shown when an answer differs.
"""
from __future__ import annotations

from typing import Callable, Dict, List, NamedTuple, Tuple

import numpy as np

__all__ = ["check", "EXERCISES", "Exercise"]


class Exercise(NamedTuple):
    """signature: what your function takes and returns; notebook: where it is taught; hint: shown on a wrong
    answer; cases: () -> list of (args, kwargs); reference: the kit's own answer for (args, kwargs)."""

    signature: str
    notebook: str
    hint: str
    cases: Callable[[], List[Tuple[tuple, dict]]]
    reference: Callable


def _rng():
    return np.random.default_rng(1234)


def _dp_cases():
    g = _rng()
    return [((g.uniform(0, 1, (n, m)),), {"insert_cost": ins, "delete_cost": dele})
            for n, m, ins, dele in [(1, 1, 1.0, 1.0), (3, 4, 0.5, 0.5), (5, 2, 1.0, 0.3), (0, 3, 0.5, 0.5), (4, 4, 0.2, 0.9)]]


def _dp_reference(cost, insert_cost, delete_cost):
    from .alignment.dp import align

    return align(cost, insert_cost, delete_cost).total_cost


def _continuous_cases():
    return [((c,), {}) for c in (0.0, 0.1, 0.25, 0.3, 0.5, 0.75, 0.9, 1.6)]


def _continuous_reference(cost):
    from .config import RewardConfig

    rc = RewardConfig()
    return float(np.clip(rc.a - rc.b * cost, rc.lo, rc.hi))


def _opd_cases():
    g = _rng()
    return [((g.normal(-2, 1.5, n), g.normal(-2, 1.5, n)), {}) for n in (1, 4, 9)]


def _opd_reference(teacher_logprobs, student_logprobs):
    from .signals.opd import opd_advantages

    return opd_advantages(teacher_logprobs, student_logprobs)


def _whiten_cases():
    g = _rng()
    out = []
    for b, t in ((2, 3), (4, 6), (3, 5)):
        x = g.normal(0, 1, (b, t))
        mask = g.uniform(size=(b, t)) < 0.7
        mask[0, 0] = mask[0, 1] = True  # at least two tokens
        out.append(((x, mask), {}))
    return out


def _whiten_reference(rewards, mask):
    import torch

    from .ops import masked_whiten

    r, m = torch.as_tensor(rewards, dtype=torch.float64), torch.as_tensor(mask)
    return (masked_whiten(r, m) * m).numpy()


def _rtg_cases():
    return [(([0.5, -1.0, 0.5],), {"gamma": 1.0}), (([0.5, 0.5, 0.5, 0.5, 0.5, 0.5, -1.0, -1.0, 0.5, 0.0],),
                                                    {"gamma": 0.5}), (([1.0],), {"gamma": 0.9}),
            (([0.0, 0.0, 1.0],), {"gamma": 0.0})]


def _rtg_reference(rewards, gamma):
    import torch

    from .rl.core import reward_to_go

    r = torch.as_tensor(np.asarray(rewards, dtype=np.float64)).reshape(1, -1)
    return reward_to_go(r, torch.ones_like(r, dtype=torch.bool), gamma)[0].numpy()


#: name -> the exercise
EXERCISES: Dict[str, Exercise] = {
    "dp_total_cost": Exercise(
        "f(cost (n, m) array, insert_cost, delete_cost) -> the minimal total cost of the alignment", "02",
        "D[i, j] = min(D[i-1, j-1] + C[i-1, j-1], D[i-1, j] + delete_cost, D[i, j-1] + insert_cost), with "
        "D[i, 0] = i * delete_cost and D[0, j] = j * insert_cost; the answer is D[n, m]",
        _dp_cases, _dp_reference),
    "continuous_reward": Exercise(
        "f(cost) -> the continuous reward of a substituted word", "04",
        "reward = clip(a - b * cost, lo, hi) with a = 0.5, b = 2, lo = -1, hi = 0.5: did you clip on both sides?",
        _continuous_cases, _continuous_reference),
    "opd_advantage": Exercise(
        "f(teacher_logprobs (T,), student_logprobs (T,)) -> A (T,)", "06",
        "A_t = log pi_T(y_t | x + hint) - log pi(y_t | x): teacher minus student, token by token, no clip",
        _opd_cases, _opd_reference),
    "masked_whiten": Exercise(
        "f(rewards (B, T), mask (B, T) bool) -> whitened rewards, 0 where the mask is False", "07",
        "use only the masked entries: subtract their mean, divide by their standard deviation with Bessel's "
        "correction (n - 1), and put 0 where the mask is False",
        _whiten_cases, _whiten_reference),
    "reward_to_go": Exercise(
        "f(rewards (T,), gamma) -> G (T,), G_t = sum over k >= t of gamma^(k - t) r_k", "08",
        "walk backwards: G_T-1 = r_T-1, then G_t = r_t + gamma * G_t+1",
        _rtg_cases, _rtg_reference),
}


def _show(x) -> str:
    a = np.asarray(x, dtype=float)
    return str(np.round(a, 3).tolist()) if a.ndim else f"{float(a):.3f}"


def _call_text(name: str, args: tuple, kwargs: dict) -> str:
    shown = [_show(a) for a in args] + [f"{k}={v}" for k, v in kwargs.items()]
    return f"{name}({', '.join(shown)})"


def check(name: str, fn: Callable, quiet: bool = False) -> bool:
    """Run ``fn`` on the exercise's cases and compare with the kit's answer (to 1e-6). Prints "right" or the first
    case that differs with the hint (unless ``quiet``); returns whether every case agreed. An unknown name is a
    ValueError listing the exercises."""
    if name not in EXERCISES:
        raise ValueError(f"no exercise {name!r}; choose from {sorted(EXERCISES)}")
    ex = EXERCISES[name]
    for args, kwargs in ex.cases():
        want = np.asarray(ex.reference(*args, **kwargs), dtype=float)
        try:
            got = np.asarray(fn(*args, **kwargs), dtype=float)
            ok = got.shape == want.shape and np.allclose(got, want, atol=1e-6)
        except Exception as e:  # the learner's code failed: say how, never a traceback
            got, ok = f"{type(e).__name__}: {e}", False
        if not ok:
            if not quiet:
                shown = got if isinstance(got, str) else _show(got)
                print(f"not yet: {_call_text(name, args, kwargs)} gave {shown}, expected {_show(want)}. "
                      f"Hint: {ex.hint} (notebook {ex.notebook})")
            return False
    if not quiet:
        print(f"right: {name} agrees with the kit on {len(ex.cases())} cases")
    return True
