"""The multi-step tool task: episodes, outcomes, the process reward, and the loop's per-step rewards."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from claw_lib.config import PPOConfig, TaskConfig
from claw_lib.toy.chains import (CHAIN_LENGTHS, ChainEnv, ChainStep, ToolChain, chain_rewards, episode_outcomes,
                                 episode_success)
from claw_lib.toy.tools import ToolFact
from claw_lib.toy.world import RELATIONS, Fact


def test_episodes_are_several_lookups_about_one_country():
    env = ChainEnv(seed=3)
    tasks = env.sample(40)
    episodes = {}
    for t in tasks:
        episodes.setdefault(t.episode, []).append(t)
    assert sorted(episodes) == list(range(40))
    for steps in episodes.values():
        assert len(steps) in CHAIN_LENGTHS and [s.index for s in steps] == list(range(len(steps)))
        assert len({s.fact.subject for s in steps}) == 1 and len({s.fact.fact.relation for s in steps}) == len(steps)
        assert all(s.fact.fact.relation in RELATIONS and s.prompt.endswith(("答：", "A:")) for s in steps)
    env.reset(3)
    assert [t.prompt for t in env.sample(40)] == [t.prompt for t in tasks]   # reproducible from the seed


def test_a_chain_is_about_one_country():
    env = ChainEnv(seed=0)
    a, b = env.world.known[:2]
    with pytest.raises(ValueError, match="one country"):
        ToolChain((ToolFact(Fact(a, "capital", "zh")), ToolFact(Fact(b, "colour", "zh"))))


def _steps(episodes):
    """ChainStep stand-ins: episode e has episodes[e] steps."""
    env = ChainEnv(seed=0)
    f = ToolFact(Fact(env.world.known[0], "capital", "zh"))
    return [ChainStep(f, "", "kit", e, j) for e, n in enumerate(episodes) for j in range(n)]


def test_outcomes_rewards_and_success_by_hand():
    """Episode 0 (3 steps, all right): o = +1; episode 1 (2 steps, second wrong): o = -1 on both steps. With the
    process votes (+1, +1, +1, +1, -1): outcome + prm gives 2, 2, 2 and 0, -2; one episode in two succeeded."""
    tasks = _steps([3, 2])
    scores = [1.0, 1.0, 1.0, 1.0, 0.0]
    o = episode_outcomes(tasks, scores)
    assert o.tolist() == [1, 1, 1, -1, -1]
    votes = [1, 1, 1, 1, -1]
    assert chain_rewards(o, votes, "outcome").tolist() == [1, 1, 1, -1, -1]
    assert chain_rewards(o, votes, "outcome+prm").tolist() == [2, 2, 2, 0, -2]
    assert episode_success(tasks, scores) == 0.5
    with pytest.raises(ValueError, match="chain_reward must be one of"):
        chain_rewards(o, votes, "prm")
    with pytest.raises(ValueError, match="5 steps but 4 scores"):
        episode_outcomes(tasks, scores[:4])


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=6).flatmap(
    lambda lens: st.tuples(st.just(lens), st.lists(st.sampled_from([0.0, 1.0]), min_size=sum(lens), max_size=sum(lens)),
                           st.lists(st.sampled_from([-1, 0, 1]), min_size=sum(lens), max_size=sum(lens)))))
def test_reward_invariants(case):
    """Whatever the episodes: one reward per step; every step of an episode shares its outcome; outcome+prm minus
    outcome is the vote; the episode succeeds exactly when every step scored 1."""
    lens, scores, votes = case
    tasks = _steps(lens)
    o = episode_outcomes(tasks, scores)
    r = chain_rewards(o, votes, "outcome+prm")
    assert len(r) == len(tasks) and np.array_equal(r - chain_rewards(o, votes, "outcome"), np.array(votes, float))
    start = 0
    wins = 0
    for n in lens:
        seg, sc = o[start:start + n], scores[start:start + n]
        assert len(set(seg)) == 1 and (seg[0] == 1) == all(s == 1.0 for s in sc)
        wins += seg[0] == 1
        start += n
    assert episode_success(tasks, scores) == pytest.approx(wins / len(lens))


def test_the_loop_rewards_each_step_with_outcome_and_vote():
    """One batch through the public stages: every step's tokens carry R_j = o + p_j (outcome + prm) or o (outcome),
    with o from the episode's feedback and p_j the judge's vote on the step's tool output; the evaluation score is
    the share of episodes with every call right."""
    from claw_lib.models.lm import load_causal_lm
    from claw_lib.rl.ppo import Scorer, compute_signals, rollout
    from claw_lib.signals.opd import judge_turn
    from claw_lib.toy.evaluation import evaluate_policy
    from claw_lib.toy.envs import make_env

    policy, tok = load_causal_lm("tiny")
    for how in ("outcome", "outcome+prm"):
        cfg = PPOConfig(strategy="binary_rl", task=TaskConfig(user="tool-chain", chain_reward=how), batch_size=6,
                        progress=False)
        env = make_env(cfg.task, 0, tok)
        ro = rollout(policy, tok, env, cfg, step=0)
        assert len(ro.tasks) > cfg.batch_size and {t.episode for t in ro.tasks} == set(range(6))
        sig = compute_signals(ro, cfg, Scorer.for_run(cfg, policy, None, tok))
        o = episode_outcomes(ro.tasks, ro.scores)
        assert (o == -1).any() or (o == 1).all()
        for b, (t, text, fb) in enumerate(zip(ro.tasks, ro.texts, ro.feedback)):
            p = judge_turn(text, fb.next_state, role=fb.role).score
            want = o[b] + (p if how == "outcome+prm" else 0)
            n = len(ro.response_ids[b])
            assert np.allclose(sig.token_signal[b, :n].numpy(), want) and bool(sig.mask[b, :n].all())
    tasks = make_env(cfg.task, 10_000, tok, evaluation=True).sample(8)
    score = evaluate_policy(policy, tok, env, tasks)
    assert score in {k / 8 for k in range(9)}


def test_tool_chain_trains_with_binary_rl_only():
    from claw_lib.rl.run import train

    with pytest.raises(ValueError, match="tool-chain' trains with strategy 'binary_rl'"):
        train(PPOConfig(strategy="opd", task=TaskConfig(user="tool-chain"), steps=1, progress=False))
    with pytest.raises(ValueError, match="chain_reward must be one of"):
        train(PPOConfig(strategy="binary_rl", task=TaskConfig(user="tool-chain", chain_reward="prm"), steps=1,
                        progress=False))
    h = train(PPOConfig(strategy="binary_rl", task=TaskConfig(user="tool-chain"), steps=1, batch_size=4,
                        eval_prompts=4, progress=False))
    assert np.isfinite(h[-1]["policy/loss"]) and 0 <= h[-1]["eval/score"] <= 1
