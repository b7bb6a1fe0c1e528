"""The exercise graders (claw_lib.exercises): each accepts a correct answer written independently here, rejects a
typical wrong one with its hint, and never raises on a learner's broken code."""
import numpy as np
import pytest

from claw_lib.exercises import EXERCISES, check


def dp(cost, insert_cost, delete_cost):
    n, m = np.shape(cost)
    D = np.zeros((n + 1, m + 1))
    D[:, 0] = np.arange(n + 1) * delete_cost
    D[0, :] = np.arange(m + 1) * insert_cost
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            D[i, j] = min(D[i - 1, j - 1] + cost[i - 1][j - 1], D[i - 1, j] + delete_cost, D[i, j - 1] + insert_cost)
    return D[n, m]


def whiten(r, mask):
    v = r[mask]
    return np.where(mask, (r - v.mean()) / v.std(ddof=1), 0.0)


def rtg(r, gamma):
    return [sum(gamma ** (k - t) * r[k] for k in range(t, len(r))) for t in range(len(r))]


RIGHT = {"dp_total_cost": dp, "continuous_reward": lambda c: min(0.5, max(-1.0, 0.5 - 2 * c)),
         "opd_advantage": lambda t, s: np.asarray(t) - np.asarray(s), "masked_whiten": whiten, "reward_to_go": rtg}
WRONG = {"dp_total_cost": lambda c, insert_cost, delete_cost: float(np.sum(np.min(c, axis=1))) if np.size(c) else 0.0,
         "continuous_reward": lambda c: 0.5 - 2 * c,                               # no clip
         "opd_advantage": lambda t, s: np.asarray(s) - np.asarray(t),               # the wrong sign
         "masked_whiten": lambda r, m: (r - r.mean()) / r.std(),                    # the mask ignored
         "reward_to_go": lambda r, gamma: r}                                       # the future ignored


def test_every_exercise_has_a_right_and_a_wrong_answer_here():
    assert set(RIGHT) == set(WRONG) == set(EXERCISES)


@pytest.mark.parametrize("name", sorted(EXERCISES))
def test_a_right_answer_passes_and_a_wrong_one_gets_the_hint(name, capsys):
    assert check(name, RIGHT[name]) is True
    assert capsys.readouterr().out.startswith(f"right: {name}")
    assert check(name, WRONG[name]) is False
    out = capsys.readouterr().out
    assert out.startswith("not yet:") and EXERCISES[name].hint in out and out.count("\n") == 1


def test_broken_code_and_unknown_names(capsys):
    assert check("reward_to_go", lambda r, gamma: 1 / 0) is False
    assert "ZeroDivisionError" in capsys.readouterr().out
    with pytest.raises(ValueError, match="choose from"):
        check("nonsense", print)
