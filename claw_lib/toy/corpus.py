"""The pre-training corpus of the fact world: what the tiny GPT reads (notebook 05a).

Each :class:`Example` is a prompt (no loss) and a response (loss). :func:`make_example` draws one
according to the mix in :class:`~claw_lib.toy.world.WorldConfig`: known facts without a hint (some
stated wrongly: the planted misconceptions; some two-part; some in a style nobody asked for), known
or fresh facts with a hint or correction in the prompt (the model learns to copy it), calls of the
lookup tool (with a planted wrong name for some countries, and the tool's errors as hints), and
style instructions to follow. Each prompt comes in one of the trained surface forms
(:data:`claw_lib.prompts.TRAINED_FORMS`: the kit's "问：…答：", a bare question, inline, chat with and
without a system line), so the model does not depend on one wrapper. The phrases come from :mod:`claw_lib.text.phrases`, so the model learns
exactly what the simulated users say.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import List

import numpy as np

from ..prompts import TRAINED_FORMS, build_prompt, response_text
from ..text.phrases import ASIDES, CORRECTION_LEADS, QUESTION_LEADS, STYLE_HINTS, with_lead
from .tools import TOOL_ALIASES, ToolFact, malformed_call, planted_call, run_lookup
from .world import RELATIONS, Fact, FactWorld, PairFact

#: misspellings of the relation keys that a tool call can make (for the tool's errors)
MISSPELT_RELATIONS = {"capital": ("capitol", "capitals"), "colour": ("color", "colours"), "animal": ("animals", "beast"),
                      "provinces": ("province", "states")}

__all__ = ["Example", "make_example", "sample_corpus"]


@dataclass
class Example:
    """One pre-training sequence: ``prompt`` (no loss) + ``response`` (loss), and what it is."""

    prompt: str
    response: str
    kind: str
    lang: str
    meta: dict = field(default_factory=dict)


def _fact_hint(fact: Fact, rng: random.Random, noise: bool) -> str:
    """A hint stating the truth: a correction ("不对，..."/"No, ...", 40 %), "错了，..."/"Wrong, ..."
    (15 %) or the plain answer; ``noise`` adds an aside."""
    s = fact.answer()
    r = rng.random()
    if r < 0.55:
        s = with_lead(CORRECTION_LEADS[fact.lang][0 if r < 0.4 else 1], s, fact.lang)
    if noise:
        s += rng.choice(ASIDES[fact.lang]).format(subject=fact.subject)
    return s


def _example(world: FactWorld, question: str, lang: str, answer: str, kind: str, form: str, hint=None,
             inline: bool = False, meta=None) -> Example:
    prompt = build_prompt(question, lang, hint, inline=inline, form=form)
    return Example(prompt, response_text(answer, lang, prompt=prompt), kind, lang, {"form": form, **(meta or {})})


def _tool_example(world: FactWorld, rng: random.Random, lang: str, form: str, hinted: bool,
                  lead: str = "") -> Example:
    """A tool call. Without a hint: the right call (a known or fresh country: the name is copied from
    the question), the planted alias for an alias country, or now and then a broken call. With a hint:
    the error a wrong call got (broken syntax, a misspelt relation, a planted alias) and the right call."""
    cfg = world.config
    aliased = [c for c in world.known if c.zh in TOOL_ALIASES]
    if hinted and rng.random() < 0.3:
        fact = ToolFact(Fact(rng.choice(aliased), rng.choice(tuple(RELATIONS)), lang))
    else:
        country = world.fresh_country(rng) if rng.random() < 0.3 else rng.choice(world.known)
        fact = ToolFact(Fact(country, rng.choice(tuple(RELATIONS)), lang))
    if not hinted:
        call = planted_call(world, fact, rng)
        if call is None:
            call = malformed_call(fact, rng) if rng.random() < cfg.p_tool_malformed else fact.truth
        return _example(world, lead + fact.question(), lang, call, "tool", form, meta={"wrong": call != fact.truth})
    pair = TOOL_ALIASES.get(fact.fact.country.zh)
    if pair is not None:
        wrong = fact.answer(pair[0 if lang == "zh" else 1])
    elif rng.random() < 0.6:
        wrong = malformed_call(fact, rng)
    else:
        wrong = fact.answer().replace(fact.fact.relation, rng.choice(MISSPELT_RELATIONS[fact.fact.relation]), 1)
    hint = run_lookup(world, wrong, lang).output
    return _example(world, lead + fact.question(), lang, fact.truth, "tool_hint", form, hint)


def make_example(world: FactWorld, rng: random.Random) -> Example:
    """Draw one pre-training example according to the mix in ``world.config``, in a prompt form drawn
    from ``config.form_weights``."""
    cfg = world.config
    lang = rng.choice(("zh", "en"))
    form = rng.choices(TRAINED_FORMS, weights=cfg.form_weights)[0]
    # now and then the user's message opens with a lead-in ("请回答这个问题：" / "Please answer this:"),
    # so words such as 问题 / 回答 / question do not occur only in the friendly style's instruction
    lead = rng.choice(QUESTION_LEADS[lang]) if rng.random() < cfg.p_question_lead else ""
    u = rng.random()
    inline = rng.random() < cfg.p_inline
    noise = rng.random() < cfg.p_noise
    edges = np.cumsum([cfg.p_plain, cfg.p_known_hint, cfg.p_fresh_hint, cfg.p_tool, cfg.p_tool_hint])
    if u < edges[0]:
        if rng.random() < cfg.p_pair:  # two capitals at once, each part sampled on its own
            c1, c2 = rng.sample(world.known, 2)
            pair = PairFact(Fact(c1, "capital", lang), Fact(c2, "capital", lang))
            values = tuple(world.believed_value(f, rng) for f in pair.parts)
            return _example(world, lead + pair.question(), lang, pair.answer(values), "pair", form,
                            meta={"misconception": [world.wrong_value(f) is not None for f in pair.parts],
                                  "wrong": [v != t for v, t in zip(values, pair.truth)]})
        fact = Fact(rng.choice(world.known), rng.choice(tuple(RELATIONS)), lang)
        wrong = world.wrong_value(fact)
        value = world.believed_value(fact, rng)
        style = rng.choice(tuple(STYLE_HINTS)) if rng.random() < cfg.p_style_unprompted else "formal"
        return _example(world, lead + fact.question(), lang, fact.answer(value, style=style), "plain", form,
                        meta={"misconception": wrong is not None, "wrong": value != fact.truth, "style": style})
    if u < edges[2]:
        fresh = u >= edges[1]
        if not fresh and world.misconceptions and rng.random() < cfg.p_hint_on_misconception:
            fact = Fact(rng.choice(world.misconception_countries), "capital", lang)
        elif fresh:
            rel = "capital" if rng.random() < cfg.p_capital_in_fresh else rng.choice(tuple(RELATIONS))
            fact = Fact(world.fresh_country(rng), rel, lang)
        else:
            fact = Fact(rng.choice(world.known), rng.choice(tuple(RELATIONS)), lang)
        hint = _fact_hint(fact, rng, noise)
        return _example(world, lead + fact.question(), lang, fact.answer(), "fresh_hint" if fresh else "known_hint", form,
                        hint, inline)
    if u < edges[4]:
        return _tool_example(world, rng, lang, form, hinted=u >= edges[3], lead=lead)
    # style: the style instruction alone, or after a correction stating the truth (as the style users
    # write it when the answer was also wrong); known countries (misconceptions included) or fresh ones
    style = rng.choice(tuple(STYLE_HINTS))
    fresh = rng.random() < cfg.p_style_fresh
    if fresh:
        country = world.fresh_country(rng)
    elif world.misconceptions and rng.random() < cfg.p_hint_on_misconception:
        country = rng.choice(world.misconception_countries)
    else:
        country = rng.choice(world.known)
    fact = Fact(country, "capital" if country.zh in world.misconceptions else rng.choice(tuple(RELATIONS)), lang)
    shint = STYLE_HINTS[style][0 if lang == "zh" else 1]
    # a fresh country's fact is knowable only from a hint: the style instruction alone would teach the
    # model to invent a value, so fresh countries always come with the correction first
    with_fact = fresh or rng.random() < 0.5
    hint = (_fact_hint(fact, rng, False) + ("" if lang == "zh" else " ") + shint) if with_fact else shint
    return _example(world, lead + fact.question(), lang, fact.answer(style=style), f"style_{style}", form, hint)


def sample_corpus(world: FactWorld, n: int, seed: int = 0) -> List[Example]:
    """``n`` examples, deterministic from ``seed``."""
    rng = random.Random(seed)
    return [make_example(world, rng) for _ in range(n)]
