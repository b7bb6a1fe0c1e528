"""The fact world, the corpus, and the simulated users."""
import random

import numpy as np
import pytest

from claw_lib.users import CorrectingUser, FactEnv, StudentUser, TeacherUser, make_user, states_value
from claw_lib.world import HINT_MARKER, Fact, FactWorld, WorldConfig, build_prompt, sample_corpus


@pytest.fixture(scope="module")
def world():
    return FactWorld()


def test_world_is_deterministic(world):
    again = FactWorld()
    assert world.known == again.known and world.heldout == again.heldout
    assert FactWorld(WorldConfig(seed=1)).known[40] != world.known[40]
    a = sample_corpus(world, 200, seed=5)
    b = sample_corpus(FactWorld(), 200, seed=5)
    assert [(e.prompt, e.response) for e in a] == [(e.prompt, e.response) for e in b]
    assert [(e.prompt, e.response) for e in sample_corpus(world, 200, seed=6)] != [(e.prompt, e.response) for e in a]


def test_sizes_and_misconceptions(world):
    assert len(world.known) == 60 and len(world.heldout) == 30
    assert world.misconceptions["法国"] == ("伦敦", "London")
    names = [c.zh for c in world.known + world.heldout] + [c.en for c in world.known + world.heldout]
    assert len(set(names)) == len(names)


def test_heldout_never_in_the_corpus(world):
    corpus = sample_corpus(world, 6000, seed=0)
    text = "\n".join(e.prompt + e.response for e in corpus)
    for c in world.heldout:
        for s in (c.zh, c.en, c.capital[0], c.capital[1]):
            assert s not in text, s


def test_mix_and_misconception_strength(world):
    corpus = sample_corpus(world, 8000, seed=1)
    kinds = [e.kind for e in corpus]
    cfg = world.config
    assert abs(kinds.count("plain") / len(kinds) - cfg.p_plain) < 0.03
    assert abs(kinds.count("fresh_hint") / len(kinds) - cfg.p_fresh_hint) < 0.03
    mis = [e for e in corpus if e.kind == "plain" and e.meta.get("misconception")]
    share = np.mean([e.meta["wrong"] for e in mis])
    # misconception facts are capital facts: only 1 of 4 relations of those countries is planted
    cap = [e for e in mis if "首都" in e.prompt or "capital" in e.prompt]
    share = np.mean([e.meta["wrong"] for e in cap])
    assert abs(share - cfg.misconception_strength) < 0.12, share


def test_prompt_formats():
    p = build_prompt("法国的首都是哪里？", "zh", "不对，法国的首都是巴黎。")
    assert p == "问：法国的首都是哪里？" + HINT_MARKER + "不对，法国的首都是巴黎。\n答："
    assert build_prompt("What is the capital of France?", "en") == "Q: What is the capital of France?\nA:"
    assert "（用户纠正：" in build_prompt("q", "zh", "h", inline=True)


def test_correcting_user(world):
    u = CorrectingUser(world, p_noise=0.0, p_vague=0.0, seed=0)
    f = Fact(world.known[0], "capital", "zh")  # 法国
    assert u.reply(f, "法国的首都是巴黎。").score == 1.0
    fb = u.reply(f, "法国的首都是伦敦。")
    assert fb.score == 0.0 and "巴黎" in fb.next_state and fb.kind == "correction"
    assert u.reply(f, "伦敦或巴黎").score == 0.0  # hedging is not right
    fe = Fact(world.known[0], "capital", "en")
    assert "Paris" in u.reply(fe, "The capital of France is London.").next_state
    noisy = CorrectingUser(world, p_noise=1.0, p_vague=0.0, seed=0).reply(f, "伦敦")
    assert "另外" in noisy.next_state
    vague = CorrectingUser(world, p_vague=1.0, seed=0).reply(f, "伦敦")
    assert vague.kind == "vague" and "巴黎" not in vague.next_state


def test_style_users_score_the_styles(world):
    f = Fact(world.known[0], "capital", "zh")
    s, t = StudentUser(world), TeacherUser(world)
    scores = {st: (s.reply(f, f.answer(style=st)).score, t.reply(f, f.answer(style=st)).score)
              for st in ("formal", "friendly", "casual")}
    assert scores["casual"] == (1.0, 0.0)
    assert scores["friendly"] == (0.0, 1.0)
    assert scores["formal"] == (0.0, pytest.approx(1 / 3))
    wrong = t.reply(f, "好问题！法国的首都是伦敦。继续加油！")
    assert wrong.score == 0.0 and "巴黎" in wrong.next_state
    assert t.preferences("zh") in t.reply(f, f.answer()).next_state
    with pytest.raises(ValueError):
        make_user("boss", world)


def test_env_is_deterministic(world):
    e1, e2 = FactEnv(world, "correcting", seed=4), FactEnv(world, "correcting", seed=4)
    t1, t2 = e1.sample(20), e2.sample(20)
    assert [t.prompt for t in t1] == [t.prompt for t in t2]
    assert [e1.step(t, "伦敦").next_state for t in t1] == [e2.step(t, "伦敦").next_state for t in t2]
    share = np.mean([t.fact.country.zh in world.misconceptions for t in FactEnv(world, seed=0).sample(400)])
    assert 0.4 < share < 0.65


def test_states_value():
    assert states_value("The capital is Paris.", "Paris")
    assert not states_value("Parisian food", "Paris")
    assert states_value("巴黎啦", "巴黎")
    assert states_value("It has 12 provinces", "12") and not states_value("It has 120 provinces", "12")
