"""The pre-training corpus: its mix, held-out countries never in it, styles and two-part questions."""
import numpy as np
import pytest

from claw_lib.prompts import HINT_MARKER
from claw_lib.toy.corpus import sample_corpus
from claw_lib.toy.world import FactWorld


@pytest.fixture(scope="module")
def world():
    return FactWorld()


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


def test_prompt_forms_and_tool_calls_in_the_corpus(world):
    """Every trained form appears with about its weight, no held-out form ever does, and tool calls
    are in the tool's syntax (planted wrong names for the alias countries, the tool's errors as hints)."""
    from claw_lib.prompts import HELD_OUT_FORMS, PROMPT_FORMS, TRAINED_FORMS
    from claw_lib.toy.tools import TOOL_ALIASES, run_lookup

    ex = sample_corpus(world, 4000, seed=3)
    share = {f: np.mean([e.meta["form"] == f for e in ex]) for f in TRAINED_FORMS}
    for f, w in zip(TRAINED_FORMS, world.config.form_weights):
        assert abs(share[f] - w / sum(world.config.form_weights)) < 0.03, f
    for f in HELD_OUT_FORMS:
        head = PROMPT_FORMS[f][1].split("{q}")[0]
        assert not any(e.prompt.startswith(head) for e in ex)
    tools = [e for e in ex if e.kind == "tool"]
    assert 0.05 < len(tools) / len(ex) < 0.11
    aliases = {a for pair in TOOL_ALIASES.values() for a in pair}
    wrong = [e for e in tools if e.meta["wrong"]]
    assert wrong and all(any(a in e.response for a in aliases) or
                         "malformed" in run_lookup(world, e.response, "en").output for e in wrong)
    for e in [e for e in ex if e.kind == "tool_hint"][:50]:
        assert "Error:" in e.prompt or "错误：" in e.prompt
        assert run_lookup(world, e.response.strip(), e.lang).ok or "lookup(" in e.response  # fresh countries are unknown
