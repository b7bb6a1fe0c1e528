"""Joint optimisation: several personas, one policy; per-persona evaluation."""
import numpy as np

from claw_lib.toy.evaluation import evaluate_by_user, evaluate_policy, greedy_feedback
from claw_lib.toy.users import JOINT_PERSONAS, JointEnv, JointTask


def test_joint_env_draws_personas_and_lets_each_reply():
    env = JointEnv(seed=4)
    tasks = env.sample(200)
    assert all(isinstance(t, JointTask) for t in tasks)
    rels = dict(JOINT_PERSONAS)
    assert {t.user for t in tasks} == set(rels) and 60 < sum(t.user == "teacher" for t in tasks) < 140
    assert all(t.fact.relation in rels[t.user] for t in tasks)          # the question says who asks
    t = next(t for t in tasks if t.user == "student")
    fb = env.step(t, t.fact.truth)                                        # the bare answer: what the student wants
    assert fb.score == 1.0
    t = next(t for t in tasks if t.user == "teacher")
    assert env.step(t, t.fact.truth).score < 1.0                          # the teacher wants more
    env.reset(4)
    assert [x.prompt for x in env.sample(200)] == [x.prompt for x in tasks]


def test_evaluate_by_user_is_each_personas_mean():
    """One greedy pass: "all" is evaluate_policy's mean, each persona's the mean over its own prompts; the users'
    random states are left as they were."""
    from claw_lib.models.lm import load_causal_lm

    model, tok = load_causal_lm("tiny")
    env = JointEnv(seed=1)
    tasks = env.sample(24)
    states = [u.rng.getstate() for u in env.users]
    by = evaluate_by_user(model, tok, env, tasks)
    assert [u.rng.getstate() for u in env.users] == states
    scores = [f.score for f in greedy_feedback(model, tok, env, tasks)[1]]
    assert by["all"] == evaluate_policy(model, tok, env, tasks) == float(np.mean(scores))
    for name in ("teacher", "student"):
        assert by[name] == float(np.mean([s for t, s in zip(tasks, scores) if t.user == name]))


def test_ta_user_wants_one_full_plain_sentence():
    """The TA persona: a full sentence naming the country and the value, ending with a full stop, no small talk;
    a wrong value scores 0, and its reply holds the correction and the TA's preference."""
    from claw_lib.toy.users import TA_HINTS, TAUser
    from claw_lib.toy.world import FactWorld

    w = FactWorld()
    ta = TAUser(w)
    f = next(x for x in w.facts("known") if x.lang == "zh")
    assert ta.reply(f, f.answer()).score == 1.0                               # the formal answer
    assert ta.reply(f, f.answer(style="friendly")).score < 1.0                # small talk
    fb = ta.reply(f, f.truth)                                                 # the value alone: not a sentence
    assert fb.score < 1.0 and TA_HINTS[0] in fb.next_state
    wrong = ta.reply(f, f.answer(value="伦敦"))
    assert wrong.score == 0.0 and f.truth in wrong.next_state and TA_HINTS[0] in wrong.next_state
