"""The phrase table: every reply a simulated user can produce is read the way it is meant by the
rule judge (score and hint) and by the correction cleaner."""
import itertools

import pytest

from claw_lib.signals.judges import RuleJudge
from claw_lib.text.corrections import clean_correction
from claw_lib.text.phrases import ASIDES, CORRECTION_LEADS, STYLE_HINTS, STYLE_THANKS, THANKS, VAGUE_REPLIES, with_lead
from claw_lib.toy.users import FactEnv
from claw_lib.toy.world import Fact, FactWorld


@pytest.fixture(scope="module")
def world():
    return FactWorld()


def every_reply(world):
    """(kind, lang, reply) for every phrase combination the users of the toy world can say."""
    for lang in ("zh", "en"):
        fact = Fact(world.known[0], "capital", lang)
        for t in THANKS[lang]:
            yield "thanks", lang, t
        yield "thanks", lang, STYLE_THANKS[lang]
        for v in VAGUE_REPLIES[lang]:
            yield "vague", lang, v
        for lead, aside in itertools.product(CORRECTION_LEADS[lang], ("",) + ASIDES[lang]):
            yield "correction", lang, with_lead(lead, fact.answer(), lang) + aside.format(subject=fact.subject)
        for style in STYLE_HINTS:
            pref = STYLE_HINTS[style][0 if lang == "zh" else 1]
            yield "style", lang, pref
            yield "style", lang, ("" if lang == "zh" else " ").join([with_lead(CORRECTION_LEADS[lang][0], fact.answer(),
                                                                               lang), pref])


def test_every_phrase_is_read_as_meant(world):
    judge = RuleJudge()
    n = 0
    for kind, lang, reply in every_reply(world):
        vote, hint = judge.vote("x", reply).score, judge.hint("x", reply).hint
        cc = clean_correction(reply)
        if kind == "thanks":
            assert (vote, hint, cc.affirmation) == (1, None, True), reply
        elif kind == "vague":
            assert (vote, hint, cc.text) == (-1, None, ""), reply
        else:  # a correction or a preference: -1 with a hint that keeps what the user asked for
            assert vote == -1 and hint, reply
            assert not cc.affirmation and cc.text, reply
            for aside in ASIDES[lang]:
                assert aside.format(subject=world.known[0].name(lang)).strip() not in hint, (reply, hint)
        n += 1
    assert n == 2 * (3 + 1 + 2 + 3 * 3 + 2 * 2)


def test_the_users_only_say_phrases_of_the_table(world):
    """Replies sampled from each user are built from the table: a thanks, a vague reply, or a text that
    contains a correction lead or a style preference."""
    leads = [w.strip(" ，,") for lang in ("zh", "en") for w in CORRECTION_LEADS[lang]]
    prefs = [p for pair in STYLE_HINTS.values() for p in pair]
    known = set(THANKS["zh"] + THANKS["en"]) | set(STYLE_THANKS.values()) | set(VAGUE_REPLIES["zh"] + VAGUE_REPLIES["en"])
    for user in ("correcting", "student", "teacher"):
        env = FactEnv(world, user=user, seed=1, p_vague=0.3)
        for t in env.sample(40):
            for answer in (t.fact.answer(), "伦敦", "Paris, I think", t.fact.answer(style="friendly")):
                r = env.step(t, answer).next_state
                assert r in known or any(x in r for x in leads + prefs), (user, r)


def every_homework_reply():
    """(kind, lang, reply) for every message the homework users (claw_lib.toy.homework) can send after a reply."""
    from claw_lib.config import HOMEWORK_PERSONAS
    from claw_lib.text.phrases import AI_STYLE_WORDS, HOMEWORK_THANKS
    from claw_lib.toy.homework import HOMEWORK_LANGS, HomeworkUser

    for lang in HOMEWORK_LANGS:
        for t in HOMEWORK_THANKS[lang]:
            yield "thanks", lang, t
        for persona in HOMEWORK_PERSONAS:
            for seed in range(4):  # the phrasings a seed picks among
                u = HomeworkUser(persona, lang, seed)
                own = {k: False for k in ("no_ai_style", "friendly_opener", "answer_first", "no_latex", "in_chinese")}
                for work in (True, False):
                    for markers in ([[m] for m in AI_STYLE_WORDS] + [list(AI_STYLE_WORDS)] if persona == "student"
                                    else [None]):
                        yield "complaint", lang, u.complaint({**own, "shows_work": work}, markers)
                yield "complaint", lang, u.complaint({"shows_work": False}, [])


def test_every_homework_reply_is_read_as_meant():
    """A homework user's complaint is a -1 with a hint that keeps what it asks for; its thanks a +1 with no hint."""
    judge = RuleJudge()
    n = 0
    for kind, lang, reply in every_homework_reply():
        vote, hint = judge.vote("x", reply).score, judge.hint("x", reply).hint
        cc = clean_correction(reply)
        if kind == "thanks":
            assert (vote, hint, cc.affirmation) == (1, None, True), reply
        else:
            assert vote == -1 and hint and len(hint) > 10, (reply, vote, hint)
            assert not cc.affirmation and cc.text, reply
        n += 1
    assert n > 100
