"""Simulated users: scores, replies, determinism, two-part answers, vague complaints."""
import numpy as np
import pytest

from claw_lib.toy.users import CorrectingUser, FactEnv, StudentUser, TeacherUser, make_user, states_value
from claw_lib.toy.world import Fact, FactWorld, PairFact


@pytest.fixture(scope="module")
def world():
    return FactWorld()


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
    # a number between Chinese characters is a whole word (Chinese characters are \w to Python's re)
    assert states_value("法国有5个省。", "5") and not states_value("法国有15个省。", "5")
    assert states_value("There are 5 provinces in France.", "5")


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
    from claw_lib.toy.world import Country

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
    from claw_lib.signals.opd import judge_turn

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


def test_tool_user_and_the_tool(world):
    """The tool's next states: a result for a right call (score 1, +1 for the judge, no hint), errors for a
    planted wrong name (with the right name suggested), a broken call and an unknown relation (score 0, -1,
    the error is the hint); a working call for the wrong fact scores 0 though the judge sees progress."""
    from claw_lib.signals.opd import judge_turn
    from claw_lib.toy.tools import ToolFact

    env = FactEnv(world, user="tool", seed=0, misconception_share=1.0)
    task = env.sample(1)[0]
    assert isinstance(task.fact, ToolFact) and task.fact.fact.country.zh in ("荷兰", "英国", "美国", "瑞士")
    nl = next(c for c in world.known if c.zh == "荷兰")
    t = ToolFact(Fact(nl, "capital", "en"))
    assert t.question() == "Use the tool to look up the capital of the Netherlands."
    cases = [("lookup(capital, the Netherlands)", 1.0, "capital(the Netherlands) = Amsterdam"),
             ("lookup(capital, Holland)", 0.0, "Error: unknown country 'Holland'; did you mean 'the Netherlands'?"),
             ("lookup capital, the Netherlands", 0.0, "Error: malformed call"),
             ("lookup(capitol, the Netherlands)", 0.0, "Error: unknown relation 'capitol'"),
             ("lookup(colour, the Netherlands)", 0.0, "colour(the Netherlands) = ")]
    for call, score, out in cases:
        fb = env.user.reply(t, call)
        assert fb.role == "tool" and fb.score == score and fb.next_state.startswith(out), call
        sig = judge_turn(call, fb.next_state, role=fb.role)
        if fb.kind == "tool_error":
            assert sig.score == -1 and sig.hint == fb.next_state
        else:
            assert sig.score == 1 and sig.hint is None
    zh = ToolFact(Fact(nl, "capital", "zh"))
    assert env.user.reply(zh, "lookup(capital, 尼德兰)").next_state == "错误：未知国家“尼德兰”；你是指“荷兰”吗？"
