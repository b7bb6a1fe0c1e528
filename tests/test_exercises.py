"""The exercise graders (claw_lib.exercises): each accepts a correct answer written independently here, rejects a
typical wrong one (the hint only from the second wrong try on), prints its task and signature, and never raises on a
learner's broken code."""
import numpy as np
import pytest

from claw_lib.exercises import EXERCISES, check, exercise, reset


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


def paired_diff(a, b):
    d = np.array([a[k] - b[k] for k in sorted(set(a) & set(b))])
    return d.mean(), d.std(ddof=1) / np.sqrt(len(d))


RIGHT = {"evidence_reward": lambda ops, bad: [0.5 if o == "match" else (-1.0 if x else 0.0) for o, x in zip(ops, bad)],
         "sum_to_words": lambda lp, w: np.bincount(w, weights=lp), "paired_difference": paired_diff,
         "dp_total_cost": dp, "continuous_reward": lambda c: min(0.5, max(-1.0, 0.5 - 2 * c)),
         "opd_advantage": lambda t, s: np.asarray(t) - np.asarray(s), "masked_whiten": whiten, "reward_to_go": rtg}
WRONG = {"dp_total_cost": lambda c, insert_cost, delete_cost: float(np.sum(np.min(c, axis=1))) if np.size(c) else 0.0,
         "continuous_reward": lambda c: 0.5 - 2 * c,                               # no clip
         "opd_advantage": lambda t, s: np.asarray(s) - np.asarray(t),               # the wrong sign
         "masked_whiten": lambda r, m: (r - r.mean()) / r.std(),                    # the mask ignored
         "reward_to_go": lambda r, gamma: r,                                       # the future ignored
         "evidence_reward": lambda ops, bad: [0.5 if o == "match" else -1.0 for o in ops],   # the article's rule
         "sum_to_words": lambda lp, w: np.bincount(w, weights=lp) / np.bincount(w),          # the mean, not the sum
         "paired_difference": lambda a, b: (np.mean(list(a.values())) - np.mean(list(b.values())),  # unpaired
                                            np.std(list(a.values()), ddof=1) / np.sqrt(len(a)))}


def test_every_exercise_has_a_right_and_a_wrong_answer_here():
    assert set(RIGHT) == set(WRONG) == set(EXERCISES)


@pytest.mark.parametrize("name", sorted(EXERCISES))
def test_a_right_answer_passes_and_a_wrong_one_gets_the_hint(name, capsys):
    reset()
    assert check(name, RIGHT[name]) is True
    assert capsys.readouterr().out.startswith(f"right: {name}")
    assert check(name, WRONG[name]) is False
    out = capsys.readouterr().out
    assert out.startswith("not yet:") and EXERCISES[name].hint not in out and out.count("\n") == 1  # first try: no hint
    assert check(name, WRONG[name]) is False
    out = capsys.readouterr().out
    assert out.startswith("not yet:") and EXERCISES[name].hint in out and out.count("\n") == 1     # second: the hint
    assert check(name, RIGHT[name]) is True
    capsys.readouterr()
    check(name, WRONG[name])
    assert EXERCISES[name].hint not in capsys.readouterr().out  # a right answer forgets the wrong tries
    assert check(name, WRONG[name], quiet=True) is False and capsys.readouterr().out == ""


@pytest.mark.parametrize("name", sorted(EXERCISES))
def test_each_exercise_prints_its_task_and_signature(name, capsys):
    exercise(name)
    out = capsys.readouterr().out
    ex = EXERCISES[name]
    assert ex.task and ex.task in out and ex.signature in out and f"check({name!r}" in out


def test_hints_are_nudges_not_the_answer():
    """No hint spells out the formula the kit checks (review-teaching-3: every hint printed the whole answer)."""
    for text in ("D[i, j] = min(", "teacher minus student", "G_t = r_t + gamma", "clip(a - b * cost, lo, hi)"):
        assert not any(text in ex.hint for ex in EXERCISES.values()), text


def test_graders_cover_the_notebooks_the_review_named():
    assert {ex.notebook for ex in EXERCISES.values()} >= {"02", "03", "04", "05b", "06", "07", "08", "09"}


def test_broken_code_and_unknown_names(capsys):
    assert check("reward_to_go", lambda r, gamma: 1 / 0) is False
    assert "ZeroDivisionError" in capsys.readouterr().out
    with pytest.raises(ValueError, match="choose from"):
        check("nonsense", print)
