"""Fourth reliability review (issue 43, ids as in ``../shared/notes/review-reliability-4.md``; see tests/README.md):
the library's numeric entry points refuse NaN, out-of-range and mistyped arguments with the argument's name,
instead of returning NaN, ignoring the argument or failing deep inside numpy."""
import math

import numpy as np
import pytest

from claw_lib.apps.viz import reward_html
from claw_lib.rl.ablation import paired
from claw_lib.serve.simulate import counted_sessions, sessions_until_stable
from claw_lib.signals import shaping
from claw_lib.signals.rewards import fuse_rewards, token_rewards

PAIR = ("法国的首都是伦敦。", "不对，法国的首都是巴黎。")


def test_R4_17_fuse_rewards_refuses_nan_weights_and_rewards():
    """L14: a NaN weight gave [nan]; L16: a NaN reward gave [nan, 1.]."""
    with pytest.raises(ValueError, match=r"weights\['binary'\] must be a finite number"):
        fuse_rewards({"binary": np.array([1.0])}, {"binary": float("nan")})
    with pytest.raises(ValueError, match=r"rewards\['binary'\] must hold finite numbers, got nan at index 0"):
        fuse_rewards({"binary": np.array([np.nan, 1.0])})
    # the formula still holds for good input: maxabs-normalised weighted sum
    out = fuse_rewards({"a": np.array([2.0, -1.0]), "b": np.array([0.5, 0.5])}, {"a": 1.0, "b": 0.5})
    np.testing.assert_allclose(out, [1.0 + 0.5, -0.5 + 0.5])


def test_R4_18_decayed_credit_refuses_bad_k_and_gamma():
    """L18: k=-1 was ignored; L19: gamma=NaN was ignored (both returned the input)."""
    r, e = np.array([1.0, -1.0]), np.array([False, True])
    with pytest.raises(ValueError, match=r"^k must be a finite number in \[0, inf\], got -1"):
        shaping.decayed_credit(r, e, k=-1)
    with pytest.raises(ValueError, match=r"^gamma must be a finite number in \[0.0, 1.0\], got nan"):
        shaping.decayed_credit(r, e, gamma=float("nan"))
    with pytest.raises(ValueError, match="rewards and errors must have one value per token"):
        shaping.decayed_credit(r, np.array([True]))
    # the formula: token i+d gets share * gamma**d * min(r_i, 0)
    out = shaping.decayed_credit(np.array([-1.0, 0.5, 0.5, 0.5]), np.array([True, False, False, False]), k=2,
                                 gamma=0.5)
    np.testing.assert_allclose(out, [-1.0, 0.5 - 0.5, 0.5 - 0.25, 0.5])


def test_R4_19_confidence_weights_refuse_nan_costs():
    """L20: [nan, 0.1] gave [nan, 1.]."""
    with pytest.raises(ValueError, match=r"^costs must hold finite numbers, got nan at index 0"):
        shaping.confidence_weights(np.array([np.nan, 0.1]))
    with pytest.raises(ValueError, match="margin must be a finite number in \\(0.0, inf\\]"):
        shaping.confidence_weights(np.array([0.1]), margin=0.0)
    np.testing.assert_allclose(shaping.confidence_weights(np.array([0.3, 0.6, 0.35])), [0.2, 1.0, 0.05 / 0.15])


def test_R4_20_reward_html_refuses_a_vmax_that_is_not_positive():
    """L33: vmax=0 coloured everything white; L34: vmax=NaN coloured everything full green."""
    tr = token_rewards(*PAIR, "binary")
    for bad in (0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match=r"^vmax must be a finite number in \(0.0, inf\]"):
            reward_html(tr, vmax=bad)
    assert "伦敦" in reward_html(tr, vmax=1.0)


def test_R4_21_sessions_until_stable_wants_booleans():
    """L49, L50: ["no", "no", "no"] and per-session scores [0.3, 0.5, 0.7, 0.2] gave 0 ("held from the start")."""
    for bad in (["no", "no", "no"], [0.3, 0.5, 0.7, 0.2], [float("nan")] * 3, [1, 1, 1]):
        with pytest.raises(TypeError, match="holds must be booleans"):
            sessions_until_stable(bad)
    assert sessions_until_stable([False, True, True, True]) == 1
    assert sessions_until_stable(np.array([True, True, False, True, True, True])) == 3
    assert sessions_until_stable([True, True]) is None


def test_R4_22_counted_sessions_refuses_a_negative_count():
    """L51: counted_sessions(None, -1) gave -1."""
    with pytest.raises(ValueError, match=r"^n_sessions must be a finite number in \[1, inf\], got -1"):
        counted_sessions(None, -1)
    assert counted_sessions(None, 40) == 40 and counted_sessions(7, 40) == 7


ROWS = [{"user": "u", "strategy": s, "seed": k, "final_score": v}
        for s, vals in (("a", [0.5, 0.7]), ("b", [0.4, 0.7])) for k, v in enumerate(vals)]


def test_R4_23_paired_refuses_a_nan_score():
    """P1: one NaN final_score gave mean nan with wins + ties + losses != n."""
    rows = [dict(r) for r in ROWS]
    rows[0]["final_score"] = float("nan")
    with pytest.raises(ValueError, match="final_score of run u/a seed 0 is nan"):
        paired(rows, "u", "a", "b")
    p = paired(ROWS, "u", "a", "b")
    d = np.array([0.1, 0.0])
    assert p["n"] == 2 and p["wins"] + p["ties"] + p["losses"] == 2
    assert math.isclose(p["mean"], d.mean()) and math.isclose(p["se"], d.std(ddof=1) / math.sqrt(2))


def test_R4_30_positive_shaping_names_the_three_lengths():
    """L17: lengths 2, 1, 3 gave numpy's IndexError."""
    with pytest.raises(ValueError, match="got lengths 2, 1 and 3"):
        shaping.positive_shaping(np.array([1.0, -1.0]), np.array([0.1]), np.array([True, False, True]))
    out = shaping.positive_shaping(np.array([0.5, -1.0]), np.array([0.25, 0.9]), np.array([True, False]), bonus=0.2)
    np.testing.assert_allclose(out, [0.5 + 0.2 * 0.75, -1.0])


def test_R4_31_paired_names_an_unknown_key():
    """P3: key='nope' gave KeyError: 'nope'."""
    with pytest.raises(ValueError, match="key 'nope' is not a column of the rows"):
        paired(ROWS, "u", "a", "b", key="nope")
