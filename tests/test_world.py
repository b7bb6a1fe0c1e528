"""The fact world, the corpus, and the simulated users."""
import random

import numpy as np
import pytest

from claw_lib.users import CorrectingUser, FactEnv, StudentUser, TeacherUser, make_user, states_value
from claw_lib.world import HINT_MARKER, Fact, FactWorld, PairFact, WorldConfig, build_prompt, sample_corpus


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
    assert abs((kinds.count("plain") + kinds.count("pair")) / len(kinds) - cfg.p_plain) < 0.03  # no-hint examples
    assert abs(kinds.count("fresh_hint") / len(kinds) - cfg.p_fresh_hint) < 0.03
    # misconception facts are capital facts: only 1 of 4 relations of those countries is planted;
    # pooled over one-part answers and each part of two-part answers
    wrong = [e.meta["wrong"] for e in corpus if e.kind == "plain" and e.meta.get("misconception")
             and ("首都" in e.prompt or "capital" in e.prompt)]
    wrong += [w for e in corpus if e.kind == "pair" for m, w in zip(e.meta["misconception"], e.meta["wrong"]) if m]
    assert len(wrong) > 100
    assert abs(np.mean(wrong) - cfg.misconception_strength) < 0.1, (np.mean(wrong), len(wrong))


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


def test_unprompted_styles_and_pairs_in_the_corpus(world):
    """No-hint answers: a share p_pair are two-part questions; of the rest a share
    p_style_unprompted is friendly or casual (so RL can find a style user's preference)."""
    cfg = world.config
    corpus = sample_corpus(world, 12000, seed=2)
    no_hint = [e for e in corpus if e.kind in ("plain", "pair")]
    assert abs(np.mean([e.kind == "pair" for e in no_hint]) - cfg.p_pair) < 0.03
    plain = [e for e in no_hint if e.kind == "plain"]
    styled = [e for e in plain if e.meta["style"] != "formal"]
    assert abs(len(styled) / len(plain) - cfg.p_style_unprompted) < 0.02
    assert {e.meta["style"] for e in styled} == {"friendly", "casual"}
    for e in styled:
        assert HINT_MARKER not in e.prompt
        assert e.response.strip().startswith(("好问题！", "Good question!")) or e.response.endswith(("啦", ", I think"))
    # a share of the known-fact hints corrects a planted misconception (plus the ones drawn by chance)
    hinted = [e for e in corpus if e.kind == "known_hint"]
    mis_names = [n for c in world.known if c.zh in world.misconceptions for n in (c.zh, c.en)]
    on_mis = np.mean([any(n in e.prompt for n in mis_names) and ("首都" in e.prompt or "capital" in e.prompt)
                      for e in hinted])
    expected = cfg.p_hint_on_misconception + (1 - cfg.p_hint_on_misconception) * 5 / 60 / 4
    assert abs(on_mis - expected) < 0.03, (on_mis, expected)
    # each part of a two-part answer follows the misconception strength on its own
    pairs = [e for e in corpus if e.kind == "pair"]
    assert all("分别" in e.prompt or "capitals of" in e.prompt for e in pairs)


def test_pair_fact_and_its_answers(world):
    fr, au = world.known[0], next(c for c in world.known if c.zh == "澳大利亚")
    p = PairFact(Fact(fr, "capital", "zh"), Fact(au, "capital", "zh"))
    assert p.question() == "法国和澳大利亚的首都分别是哪里？"
    assert p.answer() == "法国的首都是巴黎，澳大利亚的首都是堪培拉。"
    assert p.answer(("伦敦", "悉尼")) == "法国的首都是伦敦，澳大利亚的首都是悉尼。"
    pe = PairFact(Fact(fr, "capital", "en"), Fact(au, "capital", "en"))
    assert pe.answer() == "The capital of France is Paris, and the capital of Australia is Canberra."
    assert len(world.pairs([fr, au], langs=("zh",))) == 2
    with pytest.raises(ValueError):
        PairFact(Fact(fr, "capital", "zh"), Fact(fr, "capital", "zh"))
    with pytest.raises(ValueError):
        PairFact(Fact(fr, "capital", "zh"), Fact(au, "capital", "en"))
    with pytest.raises(ValueError):
        p.answer(style="friendly")


def test_correcting_user_on_two_part_answers(world):
    fr, au = world.known[0], next(c for c in world.known if c.zh == "澳大利亚")
    u = CorrectingUser(world, p_noise=0.0, p_vague=0.0, seed=0)
    for lang in ("zh", "en"):
        p = PairFact(Fact(fr, "capital", lang), Fact(au, "capital", lang))
        assert u.reply(p, p.answer()).score == 1.0
        (w1, w2), (t1, t2) = [world.wrong_value(f) for f in p.parts], p.truth
        for values in [(w1, t2), (t1, w2), (w1, w2), (t2, t1)]:  # one part wrong, both, swapped
            fb = u.reply(p, p.answer(values))
            assert fb.score == 0.0 and t1 in fb.next_state and t2 in fb.next_state
        assert u.reply(p, p.first.answer()).score == 0.0  # half an answer is not right
    # a country whose name starts another's ("Talia" / "Taliana"): each clause is found by whole words
    from claw_lib.world import Country

    ta = Country("塔拉国", "Talia", ("塔城", "Xford"), ("红色", "red"), ("狮子", "lion"), 3, False)
    tn = Country("塔米国", "Taliana", ("米城", "Yford"), ("红色", "red"), ("狮子", "lion"), 3, False)
    p = PairFact(Fact(tn, "capital", "en"), Fact(ta, "capital", "en"))
    assert u.reply(p, p.answer()).score == 1.0 and u.reply(p, p.answer(("Xford", "Yford"))).score == 0.0
    env = FactEnv(world, "correcting", questions="pair", misconception_share=1.0, seed=0)
    tasks = env.sample(50)
    assert all(isinstance(t.fact, PairFact) and t.fact.first.country != t.fact.second.country for t in tasks)
    assert all(f.country.zh in world.misconceptions for t in tasks for f in t.fact.parts)
    clean = FactEnv(world, "correcting", questions="pair", misconception_share=0.0, seed=0).sample(50)
    assert not any(f.country.zh in world.misconceptions for t in clean for f in t.fact.parts)
    with pytest.raises(ValueError):
        FactEnv(world, "teacher", questions="pair")
    with pytest.raises(ValueError):
        FactEnv(world, "correcting", questions="triple")


def test_vague_style_user_gives_a_score_but_no_hint(world):
    """p_vague: an unsatisfied style user sometimes complains without saying what: Binary RL
    still gets -1, OPD gets no hint (the paper's sparse hints)."""
    from claw_lib.opd import judge_turn

    f = Fact(world.known[0], "capital", "en")
    t = make_user("teacher", world, p_vague=1.0)
    fb = t.reply(f, f.answer())
    assert fb.kind == "vague" and fb.score == pytest.approx(1 / 3)
    sig = judge_turn(f.answer(), fb.next_state)
    assert sig.score == -1 and sig.hint is None
    assert t.reply(f, f.answer(style="friendly")).kind == "thanks"
    assert make_user("teacher", world, p_vague=0.0).reply(f, f.answer()).kind == "style"
    with pytest.raises(ValueError):
        make_user("teacher", world, p_vague=1.5)
