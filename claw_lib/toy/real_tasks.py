"""Real-world questions with short checkable answers, for a real instruct model (docs/real_model.md).

The fact world (:mod:`claw_lib.toy.world`) fits the kit's tiny GPT: half its countries are invented and its
misconceptions (法国 -> 伦敦) are planted in pre-training. A real model cannot know the invented countries and
does not hold the planted beliefs, so that setting says nothing about it. This module is the same kind of task
on facts a real model may or may not know: 154 hand-written questions, 77 in Chinese and 77 in English (the
same facts in both languages), in four kinds:

* ``capital``    -- 38 countries; 19 of them with a common wrong answer (Sydney, Toronto, Istanbul, ...), which
  the ``misconception_share`` draws from, as the fact world's planted misconceptions;
* ``date``       -- 12 years of well-known events ("In which year did the Berlin Wall fall?" -> 1989);
* ``unit``       -- 11 conversions and constants ("How many grams are in a kilogram?" -> 1000);
* ``arithmetic`` -- 16 sums, differences, products and quotients ("What is 19 times 21?" -> 399).

A quarter of the facts (every fourth of each kind, both languages) is the ``eval`` split, asked only by the
evaluation; the rest is ``train``. Another quarter of the facts, inside ``train`` (every fourth of each kind from
the second on), is the **dev** quarter: a run that chooses its settings evaluates on it and trains on the rest of
``train`` (split ``fit``), so the held-out quarter is read once, for the report (``TaskConfig.eval_split``).
An answer is right when it states the truth (or an accepted spelling: "Brasilia", "1,000", "seven") and none of
the listed wrong answers (:meth:`RealFact.check`).

The users are the fact world's (:mod:`claw_lib.toy.users`): the correcting user (right or wrong, with a
correction that states the full answer), and the paper's student and teacher, whose style preferences a real
instruct model does not meet unasked: the student wants no restating of the subject and no full stop ("堪培拉啦",
"Canberra, I think"), the teacher an opener, a full sentence and an encouragement ("Good question! The capital
of Australia is Canberra. Keep it up!"). So Binary RL, OPD and Combined have something to learn on a real model
(measured with Qwen2.5-Coder-0.5B-Instruct in docs/real_model.md).
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from ..config import EVAL_SPLITS
from ..prompts import build_prompt
from .users import Feedback, Task, make_user, states_value

__all__ = ["RealFact", "RealTaskSet", "RealTaskEnv", "KINDS", "SPLITS", "EVAL_SPLITS", "real_facts", "env_splits"]

#: the kinds of question, in the order of the set
KINDS = ("capital", "date", "unit", "arithmetic")
#: the question sets :meth:`RealTaskSet.facts` knows
SPLITS = ("train", "eval", "dev", "fit", "all")

# (en country, zh country, en capital, zh capital, en wrong answers, zh wrong answers, en alternatives)
_CAPITALS: List[Tuple[str, str, str, str, Tuple[str, ...], Tuple[str, ...], Tuple[str, ...]]] = [
    ("France", "法国", "Paris", "巴黎", (), (), ()),
    ("Germany", "德国", "Berlin", "柏林", (), (), ()),
    ("Italy", "意大利", "Rome", "罗马", (), (), ()),
    ("Spain", "西班牙", "Madrid", "马德里", (), (), ()),
    ("Japan", "日本", "Tokyo", "东京", (), (), ()),
    ("China", "中国", "Beijing", "北京", ("Shanghai",), ("上海",), ()),
    ("Russia", "俄罗斯", "Moscow", "莫斯科", (), (), ()),
    ("Canada", "加拿大", "Ottawa", "渥太华", ("Toronto",), ("多伦多",), ()),
    ("Australia", "澳大利亚", "Canberra", "堪培拉", ("Sydney",), ("悉尼",), ()),
    ("Turkey", "土耳其", "Ankara", "安卡拉", ("Istanbul",), ("伊斯坦布尔",), ()),
    ("Switzerland", "瑞士", "Bern", "伯尔尼", ("Zurich", "Geneva"), ("苏黎世", "日内瓦"), ("Berne",)),
    ("New Zealand", "新西兰", "Wellington", "惠灵顿", ("Auckland",), ("奥克兰",), ()),
    ("Nigeria", "尼日利亚", "Abuja", "阿布贾", ("Lagos",), ("拉各斯",), ()),
    ("Pakistan", "巴基斯坦", "Islamabad", "伊斯兰堡", ("Karachi",), ("卡拉奇",), ()),
    ("Vietnam", "越南", "Hanoi", "河内", ("Ho Chi Minh City",), ("胡志明市",), ("Ha Noi",)),
    ("Morocco", "摩洛哥", "Rabat", "拉巴特", ("Casablanca",), ("卡萨布兰卡",), ()),
    ("Myanmar", "缅甸", "Naypyidaw", "内比都", ("Yangon", "Rangoon"), ("仰光",), ("Nay Pyi Taw", "Naypyitaw")),
    ("Kazakhstan", "哈萨克斯坦", "Astana", "阿斯塔纳", ("Almaty",), ("阿拉木图",), ()),
    ("Tanzania", "坦桑尼亚", "Dodoma", "多多马", ("Dar es Salaam",), ("达累斯萨拉姆",), ()),
    ("India", "印度", "New Delhi", "新德里", ("Mumbai",), ("孟买",), ()),
    ("Egypt", "埃及", "Cairo", "开罗", (), (), ()),
    ("Kenya", "肯尼亚", "Nairobi", "内罗毕", (), (), ()),
    ("Argentina", "阿根廷", "Buenos Aires", "布宜诺斯艾利斯", (), (), ()),
    ("South Korea", "韩国", "Seoul", "首尔", ("Busan",), ("釜山",), ()),
    ("Thailand", "泰国", "Bangkok", "曼谷", (), (), ()),
    ("Greece", "希腊", "Athens", "雅典", (), (), ()),
    ("Portugal", "葡萄牙", "Lisbon", "里斯本", ("Porto",), ("波尔图",), ()),
    ("the Netherlands", "荷兰", "Amsterdam", "阿姆斯特丹", ("Rotterdam",), ("鹿特丹",), ()),
    ("Sweden", "瑞典", "Stockholm", "斯德哥尔摩", (), (), ()),
    ("Norway", "挪威", "Oslo", "奥斯陆", (), (), ()),
    ("Poland", "波兰", "Warsaw", "华沙", ("Krakow",), ("克拉科夫",), ()),
    ("Austria", "奥地利", "Vienna", "维也纳", (), (), ()),
    ("Indonesia", "印度尼西亚", "Jakarta", "雅加达", (), (), ()),
    ("the Philippines", "菲律宾", "Manila", "马尼拉", (), (), ()),
    ("Chile", "智利", "Santiago", "圣地亚哥", (), (), ()),
    ("Peru", "秘鲁", "Lima", "利马", (), (), ()),
    ("Colombia", "哥伦比亚", "Bogota", "波哥大", ("Medellin",), ("麦德林",), ("Bogotá",)),
    ("Ethiopia", "埃塞俄比亚", "Addis Ababa", "亚的斯亚贝巴", (), (), ()),
]

# (en question, en subject, en sentence, zh question, zh subject, zh sentence, year)
_DATES: List[Tuple[str, str, str, str, str, str, str]] = [
    ("In which year did World War II end?", "World War II", "World War II ended in 1945.",
     "第二次世界大战在哪一年结束？", "第二次世界大战", "第二次世界大战在1945年结束。", "1945"),
    ("In which year did World War I begin?", "World War I", "World War I began in 1914.",
     "第一次世界大战在哪一年爆发？", "第一次世界大战", "第一次世界大战在1914年爆发。", "1914"),
    ("In which year did Apollo 11 land on the Moon?", "Apollo 11", "Apollo 11 landed on the Moon in 1969.",
     "阿波罗11号在哪一年登上月球？", "阿波罗11号", "阿波罗11号在1969年登上月球。", "1969"),
    ("In which year was the People's Republic of China founded?", "People's Republic of China",
     "The People's Republic of China was founded in 1949.",
     "中华人民共和国在哪一年成立？", "中华人民共和国", "中华人民共和国在1949年成立。", "1949"),
    ("In which year did the Berlin Wall fall?", "Berlin Wall", "The Berlin Wall fell in 1989.",
     "柏林墙在哪一年倒塌？", "柏林墙", "柏林墙在1989年倒塌。", "1989"),
    ("In which year was the United States Declaration of Independence signed?", "Declaration of Independence",
     "The Declaration of Independence was signed in 1776.",
     "美国《独立宣言》在哪一年签署？", "独立宣言", "美国《独立宣言》在1776年签署。", "1776"),
    ("In which year did the French Revolution begin?", "French Revolution", "The French Revolution began in 1789.",
     "法国大革命在哪一年爆发？", "法国大革命", "法国大革命在1789年爆发。", "1789"),
    ("In which year did the Titanic sink?", "Titanic", "The Titanic sank in 1912.",
     "泰坦尼克号在哪一年沉没？", "泰坦尼克号", "泰坦尼克号在1912年沉没。", "1912"),
    ("In which year did Columbus first reach the Americas?", "Columbus", "Columbus first reached the Americas in 1492.",
     "哥伦布在哪一年首次到达美洲？", "哥伦布", "哥伦布在1492年首次到达美洲。", "1492"),
    ("In which year did the Soviet Union dissolve?", "Soviet Union", "The Soviet Union dissolved in 1991.",
     "苏联在哪一年解体？", "苏联", "苏联在1991年解体。", "1991"),
    ("In which year was the first iPhone released?", "iPhone", "The first iPhone was released in 2007.",
     "第一代iPhone在哪一年发布？", "iPhone", "第一代iPhone在2007年发布。", "2007"),
    ("In which year did Beijing first host the Summer Olympics?", "Beijing", "Beijing first hosted the Summer Olympics in 2008.",
     "北京在哪一年首次举办夏季奥运会？", "北京", "北京在2008年首次举办夏季奥运会。", "2008"),
]

# (en question, en subject, en sentence, zh question, zh subject, zh sentence, value, en alternatives, zh alternatives)
_UNITS: List[Tuple[str, str, str, str, str, str, str, Tuple[str, ...], Tuple[str, ...]]] = [
    ("How many centimeters are in a meter?", "a meter", "There are 100 centimeters in a meter.",
     "一米等于多少厘米？", "一米", "一米等于100厘米。", "100", ("one hundred", "a hundred"), ("一百",)),
    ("How many grams are in a kilogram?", "a kilogram", "There are 1000 grams in a kilogram.",
     "一千克等于多少克？", "一千克", "一千克等于1000克。", "1000", ("1,000", "one thousand", "a thousand"), ("一千",)),
    ("How many minutes are in an hour?", "an hour", "There are 60 minutes in an hour.",
     "一小时有多少分钟？", "一小时", "一小时有60分钟。", "60", ("sixty",), ("六十",)),
    ("How many seconds are in a minute?", "a minute", "There are 60 seconds in a minute.",
     "一分钟有多少秒？", "一分钟", "一分钟有60秒。", "60", ("sixty",), ("六十",)),
    ("How many hours are in a day?", "a day", "There are 24 hours in a day.",
     "一天有多少个小时？", "一天", "一天有24个小时。", "24", ("twenty-four",), ("二十四",)),
    ("How many days are in a leap year?", "a leap year", "There are 366 days in a leap year.",
     "闰年有多少天？", "闰年", "闰年有366天。", "366", (), ()),
    ("How many millimeters are in a centimeter?", "a centimeter", "There are 10 millimeters in a centimeter.",
     "一厘米等于多少毫米？", "一厘米", "一厘米等于10毫米。", "10", ("ten",), ("十",)),
    ("How many meters are in a kilometer?", "a kilometer", "There are 1000 meters in a kilometer.",
     "一公里等于多少米？", "一公里", "一公里等于1000米。", "1000", ("1,000", "one thousand", "a thousand"), ("一千",)),
    ("How many milliliters are in a liter?", "a liter", "There are 1000 milliliters in a liter.",
     "一升等于多少毫升？", "一升", "一升等于1000毫升。", "1000", ("1,000", "one thousand", "a thousand"), ("一千",)),
    ("How many days are in a week?", "a week", "There are 7 days in a week.",
     "一周有几天？", "一周", "一周有7天。", "7", ("seven",), ("七",)),
    ("At how many degrees Celsius does water boil at sea level?", "water", "Water boils at 100 degrees Celsius at sea level.",
     "在海平面上，水的沸点是多少摄氏度？", "水的沸点", "在海平面上，水的沸点是100摄氏度。", "100", ("one hundred",), ("一百",)),
]

# (a, operation, b): the answer is computed; every one is an integer
_ARITHMETIC: List[Tuple[int, str, int]] = [
    (17, "+", 25), (48, "+", 37), (136, "+", 259), (333, "+", 667), (72, "-", 38), (105, "-", 47), (500, "-", 123),
    (91, "-", 19), (12, "*", 13), (7, "*", 8), (25, "*", 24), (19, "*", 21), (144, "/", 12), (81, "/", 9),
    (96, "/", 8), (1000, "/", 25),
]
_OPS = {"+": ("plus", "加", lambda a, b: a + b), "-": ("minus", "减", lambda a, b: a - b),
        "*": ("times", "乘以", lambda a, b: a * b), "/": ("divided by", "除以", lambda a, b: a // b)}


@dataclass(frozen=True)
class RealFact:
    """One real-world question with a short checkable answer, the interface of the fact world's facts that the
    users and the loop read: ``question()``, ``answer(value, style)``, ``subject``, ``truth``, ``lang``,
    ``relation`` (the kind), and :meth:`check` (is a response right?)."""

    kind: str
    lang: str
    text: str
    """the question"""
    subject: str
    """what the question is about: a full answer names it (teacher), a casual one does not (student)"""
    truth: str
    """the short answer: a name or a number in digits"""
    sentence: str
    """the full answer (the formal style; the correcting user's correction)"""
    alternatives: Tuple[str, ...] = ()
    """other accepted ways to state the truth ("Brasilia", "1,000", "seven")"""
    wrong: Tuple[str, ...] = ()
    """common wrong answers: stating one makes the answer wrong even next to the truth"""
    split: str = "train"
    """"train" or "eval\""""
    dev: bool = False
    """one of the dev quarter (a quarter of the "train" facts): a run that evaluates on it trains on the others"""

    @property
    def relation(self) -> str:
        return self.kind

    def question(self) -> str:
        return self.text

    def answer(self, value: Optional[str] = None, style: str = "formal") -> str:
        """The answer in a style: "formal" (the full sentence), "friendly" (the teacher's opener, sentence and
        encouragement), "casual" (the student's: the value alone, no full stop). ``value`` replaces the truth."""
        s = self.sentence if value is None else self.sentence.replace(self.truth, value)
        v = self.truth if value is None else value
        zh = self.lang == "zh"
        if style == "casual":
            return f"{v}啦" if zh else f"{v}, I think"
        if style == "friendly":
            return f"好问题！{s}继续加油！" if zh else f"Good question! {s} Keep it up!"
        if style != "formal":
            raise ValueError(f"unknown style {style!r}")
        return s

    def check(self, response: str) -> bool:
        """True when ``response`` states the truth (or an alternative) and none of the wrong answers (as whole
        words in Latin script, as substrings in Chinese: :func:`claw_lib.toy.users.states_value`)."""
        right = any(states_value(response, v) for v in (self.truth,) + self.alternatives)
        return right and not any(states_value(response, w) for w in self.wrong)


def real_facts() -> List[RealFact]:
    """Every question of the set (154: 77 facts in zh and en), in a fixed order: kind by kind, each fact in
    Chinese then English. Every fourth fact of each kind is in the "eval" split (k % 4 == 3), and every fourth
    from the second on (k % 4 == 1) is a "train" fact of the dev quarter."""
    out: List[RealFact] = []

    def add(kind, k, zh, en):
        split, dev = ("eval" if k % 4 == 3 else "train"), k % 4 == 1
        out.append(RealFact(kind, "zh", *zh, split=split, dev=dev))
        out.append(RealFact(kind, "en", *en, split=split, dev=dev))

    for k, (c_en, c_zh, cap_en, cap_zh, wrong_en, wrong_zh, alt_en) in enumerate(_CAPITALS):
        add("capital", k, (f"{c_zh}的首都是哪里？", c_zh, cap_zh, f"{c_zh}的首都是{cap_zh}。", (), wrong_zh),
            (f"What is the capital of {c_en}?", c_en.removeprefix("the "), cap_en,
             f"The capital of {c_en} is {cap_en}.", alt_en, wrong_en))
    for k, (q_en, s_en, a_en, q_zh, s_zh, a_zh, year) in enumerate(_DATES):
        add("date", k, (q_zh, s_zh, year, a_zh), (q_en, s_en, year, a_en))
    for k, (q_en, s_en, a_en, q_zh, s_zh, a_zh, v, alt_en, alt_zh) in enumerate(_UNITS):
        add("unit", k, (q_zh, s_zh, v, a_zh, alt_zh), (q_en, s_en, v, a_en, alt_en))
    for k, (a, op, b) in enumerate(_ARITHMETIC):
        word_en, word_zh, fn = _OPS[op]
        v = str(fn(a, b))
        add("arithmetic", k, (f"{a}{word_zh}{b}等于多少？", f"{a}{word_zh}{b}", v, f"{a}{word_zh}{b}等于{v}。"),
            (f"What is {a} {word_en} {b}?", f"{a} {word_en} {b}", v, f"{a} {word_en} {b} is {v}."))
    return out


class RealTaskSet:
    """The questions of :func:`real_facts` by split; stands where the fact world's :class:`FactWorld` stands
    (``env.world``), so a second env can share it."""

    def __init__(self, kinds: Sequence[str] = KINDS):
        bad = [k for k in kinds if k not in KINDS]
        if bad or not kinds:
            raise ValueError(f"kinds must be among {KINDS}, got {tuple(kinds)}")
        self.kinds = tuple(kinds)
        self.facts_all = [f for f in real_facts() if f.kind in self.kinds]

    def facts(self, split: str = "train", langs: Sequence[str] = ("zh", "en")) -> List[RealFact]:
        """The questions of a split in ``langs``: "train" (three quarters, the dev quarter included), "eval" (the
        held-out quarter), "dev" (the dev quarter, a quarter of "train"), "fit" ("train" without the dev quarter)
        or "all"."""
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        keep = {"all": lambda f: True, "dev": lambda f: f.dev, "fit": lambda f: f.split == "train" and not f.dev}.get(
            split, lambda f: f.split == split)
        return [f for f in self.facts_all if f.lang in langs and keep(f)]


class RealTaskEnv:
    """A user asking the real-world questions, with :class:`~claw_lib.toy.users.FactEnv`'s interface
    (``reset(seed)``, ``sample(n)``, ``step(task, response)``, ``user``, ``world``, ``tokenizer``, ``form``).

    user: "correcting", "student" or "teacher" (the fact world's users; the correcting user's corrections come
    without the toy asides); split: one of :data:`SPLITS` ("train" by default, "eval" the held-out quarter);
    misconception_share: share in [0, 1] of questions drawn from the capitals with a common wrong answer (19 of 38);
    tokenizer: for chat-template prompts; p_vague: the user's share of vague replies (None: the user's default);
    form: the prompts' surface form; each_once: ``sample(n)`` gives each question of the split at most once, in an
    order shuffled by the seed (all of them when n is larger), with no misconception draw: an evaluation that reads
    every question of its split once (:func:`env_splits`).
    """

    def __init__(self, world: Optional[RealTaskSet] = None, user: str = "correcting", split: str = "train",
                 langs=("zh", "en"), misconception_share: float = 0.5, seed: int = 0, tokenizer=None,
                 p_vague: Optional[float] = None, form: str = "kit", each_once: bool = False):
        if user not in ("correcting", "student", "teacher"):
            raise ValueError(f"the real-world questions are asked by 'correcting', 'student' or 'teacher', got {user!r}")
        if not 0.0 <= misconception_share <= 1.0:
            raise ValueError(f"misconception_share must be in [0, 1], got {misconception_share}")
        self.world = world or RealTaskSet()
        self.langs, self.split = tuple(langs), split
        self.user = make_user(user, None, seed, p_vague=p_vague)
        if user == "correcting":
            self.user.p_noise = 0.0
        self.pool = self.world.facts(split, langs)
        if not self.pool:
            raise ValueError(f"no question in split {split!r} for languages {self.langs}")
        self.mis = [f for f in self.pool if f.wrong]
        self.misconception_share = misconception_share if self.mis else 0.0
        self.tokenizer, self.form, self.each_once = tokenizer, form, each_once
        self.reset(seed)

    def reset(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.user.reset(seed + 1)

    def sample(self, n: int) -> List[Task]:
        if self.each_once:
            facts = self.rng.sample(self.pool, min(n, len(self.pool)))
        else:
            facts = [self.rng.choice(self.mis if self.rng.random() < self.misconception_share else self.pool)
                     for _ in range(n)]
        return [Task(f, build_prompt(f.question(), f.lang, tokenizer=self.tokenizer, form=self.form), self.form)
                for f in facts]

    def step(self, task: Task, response: str) -> Feedback:
        return self.user.reply(task.fact, response)


def env_splits(eval_split: str = "eval", evaluation: bool = False) -> Tuple[str, bool]:
    """(split, each_once) of a :class:`RealTaskEnv` for ``TaskConfig.eval_split`` (:data:`EVAL_SPLITS`): the
    training env's (``evaluation`` False) or the evaluation's.

    * "eval" (the default, as before): training asks "train", the evaluation draws its prompts at random from the
      held-out quarter (half from its capitals with a common wrong answer, repeats possible);
    * "dev": training asks "fit" (train without the dev quarter), the evaluation each dev question once: for
      choosing settings;
    * "heldout": training asks "train", the evaluation each held-out question once: the report.
    """
    if eval_split not in EVAL_SPLITS:
        raise ValueError(f"eval_split must be one of {EVAL_SPLITS}, got {eval_split!r}")
    if not evaluation:
        return ("fit" if eval_split == "dev" else "train"), False
    return ("dev" if eval_split == "dev" else "eval"), eval_split != "eval"
