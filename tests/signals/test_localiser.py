"""The learned localiser (claw_lib.signals.localiser, issue 47): rewards against their formula, one finite reward per
output word whatever the input, a seeded training is deterministic, a missing checkpoint is one clear error, and
``RewardConfig.localiser`` routes batch_rewards (what claw rewards, the explorer and the loops call)."""
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from claw_lib.config import CHOICES, LOCALISERS, RewardConfig
from claw_lib.signals import localiser as L
from claw_lib.signals.reviser import batch_rewards
from claw_lib.text.tokens import tokenize
from claw_lib.toy.localiser_data import training_pairs


def _tiny(seed: int = 0, n: int = 60):
    rows = training_pairs(n, seed)
    feats = [L.pair_features(r["output"], r["correction"], r["question"]) for r in rows]
    return L.train([X for _, X in feats], [L.word_labels(r, t) for r, (t, _) in zip(rows, feats)], epochs=2,
                   hidden=8, seed=seed)


@pytest.fixture(scope="module")
def tiny():
    return _tiny()


def test_rewards_follow_the_formula():
    cfg = RewardConfig()
    tokens = tokenize("Paris is big.")  # Paris, is, big, .
    p = np.array([0.1, 0.6, 0.9, 0.0])
    b = L.rewards_from("Paris is big.", tokens, p, "binary", cfg, threshold=0.5)
    assert b.rewards.tolist() == [cfg.match, cfg.reject, cfg.reject, cfg.absent]
    assert b.rejected.tolist() == [False, True, True, False]
    c = L.rewards_from("Paris is big.", tokens, p, "continuous", cfg, threshold=0.5)
    want = [cfg.hi * (1 - 0.1 / 0.5), cfg.lo * (0.6 - 0.5) / 0.5, cfg.lo * (0.9 - 0.5) / 0.5, cfg.absent]
    np.testing.assert_allclose(c.rewards, want)
    s = L.rewards_from("Paris is big.", tokens, p, "sentence", cfg, threshold=0.95)
    assert s.rewards.tolist() == [cfg.match] * 4


TEXT = st.text(alphabet=st.sampled_from(list("法国的首都是伦敦巴黎。，不对 abcParisLondon.!?👍🏽12\t")), max_size=30) | st.text(max_size=12)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(TEXT, TEXT, st.one_of(st.none(), TEXT), st.sampled_from(["binary", "continuous", "sentence"]))
def test_one_finite_reward_per_output_word_whatever_the_input(tiny, output, correction, question, strategy):
    tr = L.learned_rewards([{"output": output, "correction": correction, "question": question}], strategy,
                           localiser=tiny)[0]
    assert len(tr.rewards) == len(tr.tokens) == len(tokenize(output))
    assert np.isfinite(tr.rewards).all()
    p = np.array(tr.info["p_wrong"])
    assert ((p >= 0) & (p <= 1)).all()
    if strategy == "binary":
        assert (tr.rejected == (tr.rewards < 0)).all()


def test_a_seeded_training_is_deterministic():
    rows = training_pairs(20, 9)
    a, b = _tiny(1, 40), _tiny(1, 40)
    pa = [p for _, p in L.localise(rows, localiser=a)]
    pb = [p for _, p in L.localise(rows, localiser=b)]
    for x, y in zip(pa, pb):
        np.testing.assert_array_equal(x, y)


def test_a_missing_checkpoint_is_one_clear_error(tmp_path):
    with pytest.raises(L.LocaliserNotAvailableError, match="train_localiser.py"):
        L.load_localiser(tmp_path / "none.pt")


def test_the_setting_routes_batch_rewards(tiny, tmp_path, monkeypatch):
    assert CHOICES["reward.localiser"] == LOCALISERS and RewardConfig().localiser == "rules"
    path = tmp_path / "loc.pt"
    tiny.save(path)
    monkeypatch.setattr(L, "CHECKPOINT", path)
    rows = [{"output": "法国的首都是伦敦。", "correction": "不对，是巴黎。"}]
    learned = batch_rewards(rows, "binary", replace(RewardConfig(), localiser="learned"))[0]
    assert learned.info["source"] == "learned" and len(learned.rewards) == len(tokenize(rows[0]["output"]))
    again = L.load_localiser(path)
    np.testing.assert_allclose(learned.info["p_wrong"], np.round(L.localise(rows, localiser=again)[0][1], 4))
    with pytest.raises(ValueError, match="localiser 'reviser' needs a reviser"):
        batch_rewards(rows, "binary", replace(RewardConfig(), localiser="reviser"))


def test_the_shipped_checkpoint_is_small_and_loads():
    if not L.CHECKPOINT.exists():
        pytest.skip("no shipped checkpoint")
    assert L.CHECKPOINT.stat().st_size < 2_000_000
    loc = L.load_localiser()
    assert loc.features in L.FEATURE_SETS and 0 < loc.threshold < 1 and loc.meta["pairs"] > 0


def test_claw_rewards_reads_the_setting(tmp_path, capsys):
    """`claw rewards --localiser learned`, one pair and a JSONL file, gives the shipped localiser's rewards."""
    import json

    from claw_lib.apps.cli import main

    out, cor = "法国的首都是伦敦。", "不对，法国的首都是巴黎。"
    want = L.learned_rewards([{"output": out, "correction": cor}], "binary")[0]
    assert main(["rewards", out, cor, "--localiser", "learned", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["source"] == "learned" and [t["reward"] for t in d["tokens"]] == want.rewards.tolist()
    assert min(d["tokens"], key=lambda t: t["reward"])["text"] == "伦敦"
    f = tmp_path / "in.jsonl"
    f.write_text(json.dumps({"output": out, "correction": cor}, ensure_ascii=False) + "\n", encoding="utf-8")
    assert main(["rewards", "--input", str(f), "--localiser", "learned"]) == 0
    line = json.loads(capsys.readouterr().out.splitlines()[0])
    assert [t["reward"] for t in line["tokens"]] == want.rewards.tolist()
