"""The pre-training corpus of the fact world: what the tiny GPT reads (notebook 05a).

Each :class:`Example` is a prompt (no loss) and a response (loss). :func:`make_example` draws one
according to the mix in :class:`~claw_lib.toy.world.WorldConfig`: known facts without a hint (some
stated wrongly: the planted misconceptions; some two-part; some in a style nobody asked for), known
or fresh facts with a hint or correction in the prompt (the model learns to copy it), and style
instructions to follow. The phrases come from :mod:`claw_lib.text.phrases`, so the model learns
exactly what the simulated users say.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import List

from ..prompts import build_prompt, response_text
from ..text.phrases import ASIDES, CORRECTION_LEADS, STYLE_HINTS, with_lead
from .world import RELATIONS, Fact, FactWorld, PairFact

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


def make_example(world: FactWorld, rng: random.Random) -> Example:
    """Draw one pre-training example according to the mix in ``world.config``."""
    cfg = world.config
    lang = rng.choice(("zh", "en"))
    u = rng.random()
    inline = rng.random() < cfg.p_inline
    noise = rng.random() < cfg.p_noise
    if u < cfg.p_plain:
        if rng.random() < cfg.p_pair:  # two capitals at once, each part sampled on its own
            c1, c2 = rng.sample(world.known, 2)
            pair = PairFact(Fact(c1, "capital", lang), Fact(c2, "capital", lang))
            values = tuple(world.believed_value(f, rng) for f in pair.parts)
            return Example(build_prompt(pair.question(), lang), response_text(pair.answer(values), lang),
                           "pair", lang, {"misconception": [world.wrong_value(f) is not None for f in pair.parts],
                                          "wrong": [v != t for v, t in zip(values, pair.truth)]})
        fact = Fact(rng.choice(world.known), rng.choice(tuple(RELATIONS)), lang)
        wrong = world.wrong_value(fact)
        value = world.believed_value(fact, rng)
        style = rng.choice(tuple(STYLE_HINTS)) if rng.random() < cfg.p_style_unprompted else "formal"
        return Example(build_prompt(fact.question(), lang), response_text(fact.answer(value, style=style), lang),
                       "plain", lang, {"misconception": wrong is not None, "wrong": value != fact.truth, "style": style})
    if u < cfg.p_plain + cfg.p_known_hint + cfg.p_fresh_hint:
        fresh = u >= cfg.p_plain + cfg.p_known_hint
        if not fresh and world.misconceptions and rng.random() < cfg.p_hint_on_misconception:
            fact = Fact(rng.choice(world.misconception_countries), "capital", lang)
        else:
            country = world.fresh_country(rng) if fresh else rng.choice(world.known)
            fact = Fact(country, rng.choice(tuple(RELATIONS)), lang)
        hint = _fact_hint(fact, rng, noise)
        return Example(build_prompt(fact.question(), lang, hint, inline=inline),
                       response_text(fact.answer(), lang), "fresh_hint" if fresh else "known_hint", lang)
    # style: a known fact (no fact hint) or a fresh one (fact hint + style hint)
    style = rng.choice(tuple(STYLE_HINTS))
    fresh = rng.random() < 0.5
    country = world.fresh_country(rng) if fresh else rng.choice(world.known)
    fact = Fact(country, rng.choice(tuple(RELATIONS)), lang)
    shint = STYLE_HINTS[style][0 if lang == "zh" else 1]
    hint = (_fact_hint(fact, rng, False) + ("" if lang == "zh" else " ") + shint) if fresh else shint
    return Example(build_prompt(fact.question(), lang, hint), response_text(fact.answer(style=style), lang),
                   f"style_{style}", lang)


def sample_corpus(world: FactWorld, n: int, seed: int = 0) -> List[Example]:
    """``n`` examples, deterministic from ``seed``."""
    rng = random.Random(seed)
    return [make_example(world, rng) for _ in range(n)]
