"""The toy fact world: real and invented countries with facts, questions and answers in Chinese
and English, hints and corrections in the context (notebook 05a).

Why it exists: nothing here can download a causal LM, so the kit trains its own tiny GPT on this
world (:mod:`claw_lib.pretrain`). The world is built so that the model

* knows facts (30 real + 30 invented countries, four relations each),
* can be wrong: *planted misconceptions* (法国 -> 伦敦, ...) are stated wrongly in a tunable share
  of their no-hint examples (``misconception_strength``), so sampling still explores;
* uses what the context says: many hinted examples use entities drawn fresh for each example, so
  the only way to answer is to copy the hint (a fixed set of hinted facts is simply memorised);
* follows style instructions in a hint (friendly / casual), which the style users of
  :mod:`claw_lib.users` ask for, and now and then uses those styles unasked
  (``p_style_unprompted``), as a real assistant sometimes opens with "Good question!": without
  that, a style user's preferred answer is never sampled and no policy-gradient method can find it;
* answers two-part questions ("法国和加拿大的首都分别是哪里？", :class:`PairFact`), whose two
  values are sampled independently: the token-level vs sentence-level A/B needs answers with more
  than one uncertain part (with one, only that token carries any gradient and the two coincide).

Held-out countries never appear in training; they measure copying from a hint.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

__all__ = ["Country", "Fact", "PairFact", "FactWorld", "WorldConfig", "RELATIONS", "answer_text", "PAIR_TEMPLATES"]

REAL_COUNTRIES: List[Tuple[str, str, str, str]] = [  # zh, en, capital zh, capital en
    ("法国", "France", "巴黎", "Paris"), ("英国", "Britain", "伦敦", "London"),
    ("德国", "Germany", "柏林", "Berlin"), ("意大利", "Italy", "罗马", "Rome"),
    ("西班牙", "Spain", "马德里", "Madrid"), ("日本", "Japan", "东京", "Tokyo"),
    ("中国", "China", "北京", "Beijing"), ("俄罗斯", "Russia", "莫斯科", "Moscow"),
    ("美国", "America", "华盛顿", "Washington"), ("加拿大", "Canada", "渥太华", "Ottawa"),
    ("澳大利亚", "Australia", "堪培拉", "Canberra"), ("巴西", "Brazil", "巴西利亚", "Brasilia"),
    ("阿根廷", "Argentina", "布宜诺斯艾利斯", "Buenos Aires"), ("埃及", "Egypt", "开罗", "Cairo"),
    ("印度", "India", "新德里", "New Delhi"), ("韩国", "Korea", "首尔", "Seoul"),
    ("泰国", "Thailand", "曼谷", "Bangkok"), ("越南", "Vietnam", "河内", "Hanoi"),
    ("土耳其", "Turkey", "安卡拉", "Ankara"), ("希腊", "Greece", "雅典", "Athens"),
    ("葡萄牙", "Portugal", "里斯本", "Lisbon"), ("荷兰", "the Netherlands", "阿姆斯特丹", "Amsterdam"),
    ("瑞典", "Sweden", "斯德哥尔摩", "Stockholm"), ("挪威", "Norway", "奥斯陆", "Oslo"),
    ("芬兰", "Finland", "赫尔辛基", "Helsinki"), ("波兰", "Poland", "华沙", "Warsaw"),
    ("奥地利", "Austria", "维也纳", "Vienna"), ("瑞士", "Switzerland", "伯尔尼", "Bern"),
    ("墨西哥", "Mexico", "墨西哥城", "Mexico City"), ("肯尼亚", "Kenya", "内罗毕", "Nairobi"),
]

#: Common real-world mistakes, planted as misconceptions: country (zh) -> wrong capital (zh, en).
MISCONCEPTIONS: Dict[str, Tuple[str, str]] = {
    "法国": ("伦敦", "London"), "澳大利亚": ("悉尼", "Sydney"), "加拿大": ("多伦多", "Toronto"),
    "土耳其": ("伊斯坦布尔", "Istanbul"), "瑞士": ("苏黎世", "Zurich"),
}

COLOURS = [("红色", "red"), ("蓝色", "blue"), ("绿色", "green"), ("黄色", "yellow"),
           ("白色", "white"), ("黑色", "black"), ("紫色", "purple"), ("橙色", "orange")]
ANIMALS = [("狮子", "lion"), ("老虎", "tiger"), ("大象", "elephant"), ("熊猫", "panda"),
           ("老鹰", "eagle"), ("狼", "wolf"), ("海豚", "dolphin"), ("骆驼", "camel"),
           ("袋鼠", "kangaroo"), ("孔雀", "peacock")]

_ZH_SYL = list("纳拉卡塔米索贝瓦洛尼迪萨莫克里安奥图维达蒙泽鲁桑吉芙琳雅恩波")
_EN_HEAD = ["Tal", "Ros", "Mar", "Ven", "Kor", "Bel", "Zan", "Mor", "Luth", "Ar", "Dor", "Fen",
            "Gal", "Hal", "Is", "Jor", "Kel", "Lor", "Nor", "Or", "Pel", "Quin", "Ser", "Tor",
            "Ul", "Val", "Wen", "Yor"]
_EN_MID = ["a", "e", "i", "o", "wyn", "ra", "del", "mar", "ven", "", "ith", "und"]
_EN_COUNTRY_END = ["ia", "land", "stan", "ora", "ica", "ana"]
_EN_CITY_END = ["lem", "burg", "ford", "ton", "grad", "port", "holm", "mont", "wick"]

#: relation -> (zh question, zh answer, en question, en answer); {X} country, {Y} value
RELATIONS: Dict[str, Tuple[str, str, str, str]] = {
    "capital": ("{X}的首都是哪里？", "{X}的首都是{Y}。", "What is the capital of {X}?", "The capital of {X} is {Y}."),
    "colour": ("{X}的国旗是什么颜色？", "{X}的国旗是{Y}的。", "What colour is the flag of {X}?", "The flag of {X} is {Y}."),
    "animal": ("{X}的国兽是什么？", "{X}的国兽是{Y}。", "What is the national animal of {X}?", "The national animal of {X} is the {Y}."),
    "provinces": ("{X}有几个省？", "{X}有{Y}个省。", "How many provinces does {X} have?",
                  "There are {Y} provinces in {X}."),
}

@dataclass(frozen=True)
class Country:
    """A country of the world with its four facts (zh and en values)."""

    zh: str
    en: str
    capital: Tuple[str, str]
    colour: Tuple[str, str]
    animal: Tuple[str, str]
    provinces: int
    real: bool

    def value(self, relation: str, lang: str) -> str:
        if relation == "provinces":
            return str(self.provinces)
        v = getattr(self, relation)
        return v[0] if lang == "zh" else v[1]

    def name(self, lang: str) -> str:
        return self.zh if lang == "zh" else self.en


@dataclass(frozen=True)
class Fact:
    """One question: country, relation, language; ``truth`` is the correct value."""

    country: Country
    relation: str
    lang: str

    @property
    def truth(self) -> str:
        return self.country.value(self.relation, self.lang)

    @property
    def subject(self) -> str:
        return self.country.name(self.lang)

    def question(self) -> str:
        q = RELATIONS[self.relation][0 if self.lang == "zh" else 2]
        return q.format(X=self.subject)

    def answer(self, value: Optional[str] = None, style: str = "formal") -> str:
        """The answer sentence (``value`` defaults to the truth) in a style."""
        return answer_text(self.relation, self.lang, self.subject, value if value is not None else self.truth, style)


#: two-part questions: (zh question, zh joiner, en question, en joiner)
PAIR_TEMPLATES = ("{X1}和{X2}的首都分别是哪里？", "，", "What are the capitals of {X1} and {X2}?", ", and ")


@dataclass(frozen=True)
class PairFact:
    """A two-part question: the capitals of two countries at once ("法国和加拿大的首都分别是哪里？"
    -> "法国的首都是巴黎，加拿大的首都是渥太华。"). Each part is a :class:`Fact`; the answer is
    right only if both parts are. ``relation`` is "capital_pair"; ``subject`` the first country."""

    first: Fact
    second: Fact
    relation = "capital_pair"

    def __post_init__(self):
        if self.first.lang != self.second.lang or self.first.relation != "capital" or self.second.relation != "capital":
            raise ValueError("a PairFact joins two capital facts of the same language")
        if self.first.country == self.second.country:
            raise ValueError("a PairFact asks about two different countries")

    @property
    def parts(self) -> Tuple[Fact, Fact]:
        return (self.first, self.second)

    @property
    def lang(self) -> str:
        return self.first.lang

    @property
    def subject(self) -> str:
        return self.first.subject

    @property
    def truth(self) -> Tuple[str, str]:
        return (self.first.truth, self.second.truth)

    def question(self) -> str:
        q = PAIR_TEMPLATES[0 if self.lang == "zh" else 2]
        return q.format(X1=self.first.subject, X2=self.second.subject)

    def answer(self, values: Optional[Tuple[str, str]] = None, style: str = "formal") -> str:
        """Both parts in one sentence (formal style only); ``values`` default to the truths."""
        if style != "formal":
            raise ValueError("two-part answers exist in the formal style only")
        v1, v2 = values if values is not None else self.truth
        a1, a2 = self.first.answer(v1), self.second.answer(v2)
        if self.lang == "zh":
            return a1.rstrip("。") + PAIR_TEMPLATES[1] + a2
        return a1.rstrip(".") + PAIR_TEMPLATES[3] + a2[0].lower() + a2[1:]


def _en_the(x: str, capitalise: bool) -> str:
    return x[0].upper() + x[1:] if capitalise and x.startswith("the ") else x


def answer_text(relation: str, lang: str, subject: str, value: str, style: str = "formal") -> str:
    """Render an answer. Styles: "formal" (a full sentence), "friendly" (an opener, the full
    sentence, an encouragement), "casual" (just the value, no full stop)."""
    if style == "casual":
        return f"{value}啦" if lang == "zh" else f"{value}, I think"
    tmpl = RELATIONS[relation][1 if lang == "zh" else 3]
    s = tmpl.format(X=subject, Y=value)
    if lang == "en":
        s = _en_the(s, True)
    if style == "friendly":
        return f"好问题！{s}继续加油！" if lang == "zh" else f"Good question! {s} Keep it up!"
    if style != "formal":
        raise ValueError(f"unknown style {style!r}")
    return s


@dataclass
class WorldConfig:
    """Shape of the world and of the pre-training mix (defaults = the shipped model)."""

    seed: int = 0
    """seed of names, facts and splits"""
    n_invented_known: int = 30
    """invented countries whose facts are in the training data"""
    n_invented_heldout: int = 30
    """invented countries never seen in training (copying from a hint is measured on them)"""
    misconception_strength: float = 0.7
    """share of a misconception's no-hint examples that state the wrong capital"""
    p_plain: float = 0.27
    """share of examples: a known fact, no hint"""
    p_known_hint: float = 0.17
    """share: a known fact with a hint or correction stating the truth"""
    p_fresh_hint: float = 0.24
    """share: a freshly drawn entity with a hint (teaches copying)"""
    p_tool: float = 0.08
    """share: a call of the lookup tool, no hint (claw_lib.toy.tools)"""
    p_tool_hint: float = 0.06
    """share: a tool call after the tool's error as a hint; the rest (0.18) are style examples"""
    p_capital_in_fresh: float = 0.55
    """share of the fresh-entity hint examples that ask for the capital (copying an invented city name
    is the hardest; colours, animals and numbers come from small sets)"""
    p_tool_malformed: float = 0.05
    """share of the no-hint tool calls (countries without a planted alias) written with broken syntax"""
    form_weights: Tuple[float, ...] = (0.4, 0.12, 0.12, 0.12, 0.12, 0.12)
    """weights of the prompt forms in the corpus, in the order of claw_lib.prompts.TRAINED_FORMS (kit, bare,
    inline, chat, chat with a system line, user/assistant roles)"""
    p_inline: float = 0.3
    """share of hints written as an inline correction instead of the OpenClaw block"""
    p_noise: float = 0.15
    """share of hints with an irrelevant extra clause"""
    p_hint_on_misconception: float = 0.2
    """share of the known-fact hint examples that correct a planted misconception (a real user
    corrects common mistakes most): the hint must overrule a belief, not only agree with knowledge"""
    p_pair: float = 0.25
    """share of the no-hint examples that ask two capitals at once (:class:`PairFact`)"""
    p_style_unprompted: float = 0.1
    """share of the other no-hint answers written in the friendly or casual style unasked"""
    p_style_fresh: float = 0.3
    """share of the style examples asked about a fresh country (with the correction first); the rest ask about
    known countries, whose facts must then be recalled in the asked style ("巴黎啦")"""
    p_question_lead: float = 0.1
    """share of questions that open with a user's lead-in (claw_lib.text.phrases.QUESTION_LEADS)"""


class FactWorld:
    """Countries, facts and the train / held-out split, deterministic from ``config.seed``."""

    def __init__(self, config: Optional[WorldConfig] = None):
        self.config = cfg = config or WorldConfig()
        rng = random.Random(cfg.seed)
        self._used_names: set = set()
        self.known: List[Country] = []
        for zh, en, cz, ce in REAL_COUNTRIES:
            self._used_names.update([zh, en, cz, ce])
            self.known.append(self._facts(rng, zh, en, (cz, ce), real=True))
        for (wz, we) in MISCONCEPTIONS.values():
            self._used_names.update([wz, we])
        invented = [self._invent(rng) for _ in range(cfg.n_invented_known + cfg.n_invented_heldout)]
        self.known += invented[:cfg.n_invented_known]
        self.heldout: List[Country] = invented[cfg.n_invented_known:]
        self.misconceptions = {c.zh: MISCONCEPTIONS[c.zh] for c in self.known if c.zh in MISCONCEPTIONS}
        #: the known countries with a planted misconception, in world order
        self.misconception_countries: List[Country] = [c for c in self.known if c.zh in self.misconceptions]

    # -- names --------------------------------------------------------------------------------
    def _new_name(self, rng, make) -> str:
        for _ in range(1000):
            s = make()
            if s not in self._used_names:
                self._used_names.add(s)
                return s
        raise RuntimeError("name space exhausted")

    def _names(self, rng, reserve: bool = True):
        zh_pair = lambda: rng.choice(_ZH_SYL) + rng.choice(_ZH_SYL)  # noqa: E731
        en_base = lambda: rng.choice(_EN_HEAD) + rng.choice(_EN_MID)  # noqa: E731
        makers = (lambda: zh_pair() + "国", lambda: en_base() + rng.choice(_EN_COUNTRY_END),
                  lambda: zh_pair() + "城", lambda: en_base() + rng.choice(_EN_CITY_END))
        if reserve:
            return tuple(self._new_name(rng, m) for m in makers)
        out = []
        for m in makers:
            s = m()
            while s in self._used_names:
                s = m()
            out.append(s)
        return tuple(out)

    def _facts(self, rng, zh, en, capital, real) -> Country:
        return Country(zh, en, capital, rng.choice(COLOURS), rng.choice(ANIMALS), rng.randint(3, 39), real)

    def _invent(self, rng) -> Country:
        zh, en, cz, ce = self._names(rng)
        return self._facts(rng, zh, en, (cz, ce), real=False)

    def fresh_country(self, rng: random.Random) -> Country:
        """A country drawn fresh (names not among known or held-out ones); not stored."""
        zh, en, cz, ce = self._names(rng, reserve=False)
        return self._facts(rng, zh, en, (cz, ce), real=False)

    # -- facts ----------------------------------------------------------------------------------
    def facts(self, split: str = "known", relations: Sequence[str] = tuple(RELATIONS),
              langs: Sequence[str] = ("zh", "en")) -> List[Fact]:
        """All facts of a split: "known", "heldout", "misconception" (capital facts of the
        planted misconceptions) or "known_clean" (known minus misconception capitals)."""
        if split == "misconception":
            return [Fact(c, "capital", lg) for c in self.known if c.zh in self.misconceptions for lg in langs]
        pool = self.heldout if split == "heldout" else self.known
        out = [Fact(c, r, lg) for c in pool for r in relations for lg in langs]
        if split == "known_clean":
            out = [f for f in out if not (f.relation == "capital" and f.country.zh in self.misconceptions)]
        elif split not in ("known", "heldout"):
            raise ValueError(f"unknown split {split!r}")
        return out

    def wrong_value(self, fact: Fact) -> Optional[str]:
        """The planted wrong capital of a misconception fact, else None."""
        if fact.relation != "capital" or fact.country.zh not in self.misconceptions:
            return None
        wz, we = self.misconceptions[fact.country.zh]
        return wz if fact.lang == "zh" else we

    def believed_value(self, fact: Fact, rng: random.Random) -> str:
        """What a no-hint training answer states: the planted wrong capital with probability
        ``misconception_strength`` for a misconception, else the truth."""
        wrong = self.wrong_value(fact)
        return wrong if (wrong is not None and rng.random() < self.config.misconception_strength) else fact.truth

    def pairs(self, countries: Sequence[Country], langs: Sequence[str] = ("zh", "en")) -> List[PairFact]:
        """All ordered two-part capital questions over ``countries``."""
        return [PairFact(Fact(a, "capital", lg), Fact(b, "capital", lg))
                for a in countries for b in countries if a != b for lg in langs]

    def distractor(self, fact: Fact, rng: random.Random) -> str:
        """A wrong value of the same relation (another country's), for contrasts and users."""
        wrong = self.wrong_value(fact)
        if wrong is not None and rng.random() < 0.5:
            return wrong
        while True:
            other = rng.choice(self.known + self.heldout)
            v = other.value(fact.relation, fact.lang)
            if v != fact.truth:
                return v
