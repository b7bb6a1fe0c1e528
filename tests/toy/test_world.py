"""The fact world: deterministic, sizes, misconceptions, two-part facts."""
import pytest

from claw_lib.toy.corpus import sample_corpus
from claw_lib.toy.world import Fact, FactWorld, PairFact, WorldConfig


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
