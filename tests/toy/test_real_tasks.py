"""The real-world question set: counts and splits, every answer checkable, the users' scores on each style,
and the environment's sampling."""
import re
from collections import Counter

import pytest

from claw_lib.toy.real_tasks import KINDS, RealTaskEnv, RealTaskSet, env_splits, real_facts
from claw_lib.toy.envs import make_env
from claw_lib.toy.users import states_value


def test_counts_languages_and_splits():
    facts = real_facts()
    assert len(facts) == 154
    assert Counter(f.lang for f in facts) == {"zh": 77, "en": 77}
    assert Counter(f.kind for f in facts) == {"capital": 76, "date": 24, "unit": 22, "arithmetic": 32}
    assert [k for k in KINDS] == list(dict.fromkeys(f.kind for f in facts))
    # each fact in zh then en, same split; every fourth fact of a kind is held out for evaluation
    for zh, en in zip(facts[::2], facts[1::2]):
        assert (zh.lang, en.lang) == ("zh", "en") and zh.kind == en.kind and zh.split == en.split
        assert zh.truth == en.truth or zh.kind == "capital"
    for kind in KINDS:
        pairs = [f for f in facts if f.kind == kind and f.lang == "zh"]
        assert [f.split for f in pairs] == ["eval" if k % 4 == 3 else "train" for k in range(len(pairs))]
    assert len({f.text for f in facts}) == 154                                  # no question twice


def test_every_answer_is_checkable():
    for f in real_facts():
        assert states_value(f.sentence, f.truth), f
        assert f.check(f.sentence) and f.check(f.answer(style="friendly")) and f.check(f.answer(style="casual"))
        assert not f.check("I don't know" if f.lang == "en" else "我不知道")
        for w in f.wrong:                                                       # a common wrong answer fails,
            assert not f.check(f.answer(w)) and not f.check(f"{f.truth} or {w}")  # even next to the truth
        assert states_value(f.question(), f.subject), f                         # the question names its subject
        assert not states_value(f.truth, f.subject), f   # the bare answer does not restate it (the student's check)


def test_arithmetic_answers_are_right():
    ops = {"plus": "+", "minus": "-", "times": "*", "divided by": "//"}
    for f in real_facts():
        if f.kind == "arithmetic" and f.lang == "en":
            a, op, b = re.fullmatch(r"What is (\d+) (plus|minus|times|divided by) (\d+)\?", f.text).groups()
            assert int(f.truth) == eval(f"{a} {ops[op]} {b}")
            if op == "divided by":
                assert int(a) % int(b) == 0


def test_users_score_the_styles():
    f = next(x for x in real_facts() if x.text == "What is the capital of Australia?")
    teacher, student, correcting = (RealTaskEnv(user=u) for u in ("teacher", "student", "correcting"))
    from claw_lib.toy.users import Task

    t = Task(f, f.text)
    assert teacher.step(t, "Good question! The capital of Australia is Canberra. Keep it up!").score == 1.0
    # what an instruct model says unasked meets one of the teacher's three checks and none of the student's
    assert teacher.step(t, "The capital of Australia is Canberra.").score == pytest.approx(1 / 3)
    assert student.step(t, "The capital of Australia is Canberra.").score == 0.0
    assert student.step(t, "Canberra, I think").score == 1.0
    assert teacher.step(t, "Good question! The capital of Australia is Sydney. Keep it up!").score == 0.0
    fb = correcting.step(t, "The capital of Australia is Sydney.")
    assert fb.score == 0.0 and fb.kind == "correction" and "Canberra" in fb.next_state
    assert correcting.step(t, "Canberra.").score == 1.0
    fb = teacher.step(t, "The capital of Australia is Canberra.")
    assert "Good question!" in fb.next_state                                    # the hint says what it wants


def test_env_samples_reproducibly_and_keeps_splits_apart():
    env = RealTaskEnv(user="teacher", seed=3)
    a = [t.prompt for t in env.sample(20)]
    env.reset(3)
    assert [t.prompt for t in env.sample(20)] == a
    ev = RealTaskEnv(env.world, user="teacher", split="eval", seed=4)
    assert {t.fact.split for t in ev.sample(50)} == {"eval"} and {t.fact.split for t in env.sample(50)} == {"train"}
    mis = RealTaskEnv(user="correcting", misconception_share=1.0)
    assert all(t.fact.wrong for t in mis.sample(30))
    assert RealTaskEnv(user="correcting", misconception_share=0.0).misconception_share == 0.0


def test_make_env_chooses_the_world():
    from claw_lib.config import TaskConfig

    env = make_env(TaskConfig(world="real", user="student"), seed=0)
    assert isinstance(env, RealTaskEnv) and env.user.name == "student"
    ev = make_env(TaskConfig(world="real", user="student"), 1, world=env.world, evaluation=True)
    assert ev.world is env.world and ev.split == "eval"
    assert type(make_env(TaskConfig(), 0)).__name__ == "FactEnv"


def test_bad_choices_are_refused():
    with pytest.raises(ValueError, match="tool"):
        RealTaskEnv(user="tool")
    with pytest.raises(ValueError, match="kinds"):
        RealTaskSet(kinds=("weather",))
    with pytest.raises(ValueError, match="split"):
        RealTaskSet().facts("validation")
    from claw_lib.config import PPOConfig, TaskConfig, validate

    with pytest.raises(ValueError, match="task.world"):
        validate(PPOConfig(task=TaskConfig(world="real", user="tool")))
    with pytest.raises(ValueError, match="task.world must be one of"):
        validate(PPOConfig(task=TaskConfig(world="moon")))
    with pytest.raises(ValueError, match="task.eval_split 'dev' chooses among the real-world questions"):
        validate(PPOConfig(task=TaskConfig(eval_split="dev")))
    with pytest.raises(ValueError, match="task.eval_split must be one of"):
        validate(PPOConfig(task=TaskConfig(world="real", eval_split="test")))
    with pytest.raises(ValueError, match="eval_split"):
        env_splits("test")


def test_dev_quarter_is_a_quarter_of_train_and_left_out_when_chosen():
    ts = RealTaskSet()
    train, dev, fit, held = (ts.facts(s) for s in ("train", "dev", "fit", "eval"))
    assert (len(train), len(dev), len(fit), len(held)) == (118, 40, 78, 36)
    assert {f.text for f in dev} | {f.text for f in fit} == {f.text for f in train}
    assert not {f.text for f in dev} & {f.text for f in fit} and all(f.split == "train" for f in dev)
    for kind in KINDS:  # every fourth fact of a kind from the second on, both languages
        zh = [f for f in real_facts() if f.kind == kind and f.lang == "zh"]
        assert [f.dev for f in zh] == [k % 4 == 1 for k in range(len(zh))]
    assert env_splits() == ("train", False) and env_splits("eval", True) == ("eval", False)
    assert env_splits("dev") == ("fit", False) and env_splits("dev", True) == ("dev", True)
    assert env_splits("heldout") == ("train", False) and env_splits("heldout", True) == ("eval", True)


def test_each_once_evaluation_asks_every_question_of_its_split_once():
    from claw_lib.config import TaskConfig

    task = TaskConfig(world="real", user="teacher", eval_split="dev")
    env = make_env(task, 0)
    assert {f.text for f in env.pool} == {f.text for f in env.world.facts("fit")}
    ev = make_env(task, 10_000, world=env.world, evaluation=True)
    every = [t.fact.text for t in ev.sample(100)]                      # more than the split holds: each once
    assert sorted(every) == sorted(f.text for f in env.world.facts("dev"))
    ev.reset(10_000)
    some = [t.fact.text for t in ev.sample(12)]
    ev.reset(10_000)
    assert len(set(some)) == 12 and [t.fact.text for t in ev.sample(12)] == some   # seeded, no repeat
    held = make_env(TaskConfig(world="real", eval_split="heldout"), 1, evaluation=True).sample(36)
    assert sorted(t.fact.text for t in held) == sorted(f.text for f in env.world.facts("eval"))
    legacy = make_env(TaskConfig(world="real"), 1, evaluation=True)   # the default draws as before
    assert not legacy.each_once and legacy.split == "eval"
