"""The token-level reward model (claw_lib.signals.reward_model, notebook 13)."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from claw_lib.signals.reward_model import (LabelledRows, TokenRewardModel, baseline_metrics, evaluate, label_rows,
                                           value_auc, word_features)
from claw_lib.text.tokens import Token, tokenize
from claw_lib.toy.probe import world_rows
from claw_lib.toy.world import FactWorld


@pytest.fixture(scope="module")
def world():
    return FactWorld()


def test_features_one_row_per_word(e5):
    for text in ["法国的首都是伦敦。", "The capital of France is London.", "", "🎉👍🏽", "OK 好的 🙂"]:
        f = word_features(e5, text)
        assert f.shape == (len(tokenize(text)), e5.model.config.hidden_size)
        assert f.dtype == np.float32


def test_separable_toy_set_is_learnt_exactly():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 5))
    X = X[np.abs(X[:, 0] + 0.5 * X[:, 1] - 0.3) > 0.2]  # a margin: the set is separable
    y = X[:, 0] + 0.5 * X[:, 1] > 0.3
    m = TokenRewardModel(l2=1e-4).fit(X, y)
    assert ((m.predict_proba(X) > 0.5) == y).all()


def test_fit_is_deterministic():
    rng = np.random.default_rng(1)
    X, y = rng.normal(size=(300, 8)), rng.random(300) < 0.2
    a, b = TokenRewardModel().fit(X, y), TokenRewardModel().fit(X, y)
    assert np.array_equal(a.w, b.w) and a.b == b.b
    assert np.array_equal(a.predict_proba(X), b.predict_proba(X))


def test_expected_reward_mixes_match_and_reject():
    p = np.array([0.0, 1 / 3, 1.0, 0.5])
    r = TokenRewardModel.expected_reward(p)
    assert np.allclose(r, [0.5, 0.0, -1.0, -0.25])


def test_bad_inputs():
    with pytest.raises(ValueError):
        TokenRewardModel(l2=0)
    with pytest.raises(ValueError):
        TokenRewardModel().fit(np.zeros((3, 2)), np.zeros(2))
    with pytest.raises(RuntimeError):
        TokenRewardModel().predict_proba(np.zeros((1, 2)))


def test_world_rows_spans_and_labels_agree_with_the_user(world):
    facts = world.facts("known")[:12]
    rows = world_rows(world, facts, seed=3, per_fact=2)
    assert rows == world_rows(world, facts, seed=3, per_fact=2)  # deterministic
    assert len(rows) == 24 and {r["kind"] for r in rows} == {"right", "wrong"}
    for r in rows:
        s, e = r["value"]
        value = r["output"][s:e]
        fact = next(f for f in facts if f.country.zh == r["country"] and f.relation == r["relation"]
                    and f.lang == r["lang"])
        assert (value == fact.truth) == (r["kind"] == "right")
        assert r["rejected"] == ([] if r["kind"] == "right" else [[s, e]])
        if r["kind"] == "wrong":
            assert r["reply"] != "thanks"


def _toy_labelled():
    t = [Token("a", 0, 1), Token("b", 2, 3), Token("c", 4, 5)]
    rows = [{"id": "1", "output": "a b c", "rejected": [[2, 3]], "value": [2, 3]},
            {"id": "2", "output": "a b c", "rejected": [], "value": [2, 3]}]
    y = [np.array([False, True, False]), np.array([False, False, False])]
    X = [np.zeros((3, 2), np.float32)] * 2
    return LabelledRows(rows, [t, t], X, y)


def test_evaluate_against_hand_counts():
    d = _toy_labelled()
    pred = [np.array([-0.2, -0.5, 0.3]), np.array([0.5, -0.1, 0.5])]
    m = evaluate(pred, d)
    # negatives predicted: a, b (row 1), b (row 2); alignment negative: b (row 1)
    assert m["precision"] == pytest.approx(1 / 3) and m["recall"] == 1.0
    assert m["accuracy"] == pytest.approx(4 / 6)
    assert m["hit_rate"] == 1.0 and m["right_ok"] == 0.0
    assert m["n_words"] == 6 and m["neg_share"] == pytest.approx(1 / 6)
    # the right answer's value (b, -0.1) is above the wrong one's (b, -0.5): AUC 1
    assert value_auc(pred, d) == 1.0
    base = baseline_metrics(d)
    assert base["hit_rate"] == pytest.approx(1 / 3) and base["recall"] == 0.0
    assert base["accuracy"] == pytest.approx(5 / 6) and np.isnan(base["precision"])
    with pytest.raises(ValueError):
        evaluate([np.zeros(2), np.zeros(3)], d)


def test_label_rows_uses_the_alignment(e5, world):
    rows = [r for r in world_rows(world, world.facts("known")[:6], seed=0, per_fact=2) if r["reply"] != "vague"]
    d = label_rows(rows, e5)
    for r, tk, x, y in zip(d.rows, d.tokens, d.X, d.y):
        assert x.shape[0] == len(tk) == len(y)
        inside = np.array([t.start < r["value"][1] and t.end > r["value"][0] for t in tk])
        if r["kind"] == "right":
            assert not y.any()
        else:  # the correcting user restates the fact: only words of the wrong value are rejected
            assert not (y & ~inside).any()


@pytest.fixture(scope="module")
def fitted(e5, world):
    d = label_rows(world_rows(world, world.facts("known")[:8], seed=0, per_fact=2), e5)
    X, y = d.stacked()
    return TokenRewardModel().fit(X, y)


@settings(max_examples=25, deadline=None)
@given(st.text(max_size=30) | st.sampled_from(["", "   ", "🎉", "👩‍👩‍👧", "法国的首都是伦敦。"]))
def test_one_prediction_per_word_whatever_the_input(fitted, e5, text):
    tr = fitted.score(text, e5)
    assert len(tr.rewards) == len(tr.tokens) == len(tokenize(text))
    assert np.isfinite(tr.rewards).all() and ((tr.rewards >= -1) & (tr.rewards <= 0.5)).all()
    assert np.array_equal(tr.rejected, tr.rewards < 0)
