"""Simulated users of the fact world, and a small environment API (notebook 05a).

* :class:`CorrectingUser` thanks a right answer and corrects a wrong one in natural Chinese or
  English, sometimes with an irrelevant clause ("另外法国红酒也不错。"), sometimes vaguely
  ("不太对吧。"), deterministic from a seed. Score: 1 if the answer states the truth, else 0.
* :class:`StudentUser` and :class:`TeacherUser` are scaled-down versions of the OpenClaw-RL
  paper's personal-agent users. Each states concrete, checkable style preferences, replies with
  feedback when they are violated, and scores a response in [0, 1] (the paper's LLM-judge
  rating, made rule-based): ``score = correct * share of style checks passed``.

  - student ("don't look machine-written"): do not restate the question's subject, no full stop
    at the end -> wants the *casual* style ("巴黎啦", "Paris, I think");
  - teacher ("specific, friendly comments"): open with "好问题！"/"Good question!", a full sentence
    naming subject and answer, close with "继续加油！"/"Keep it up!" -> the *friendly* style.

:class:`FactEnv` ties a world, a user and a split together: ``reset(seed)``, ``sample(n)`` tasks,
``step(task, response)`` -> :class:`Feedback` (next-state text + score).
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import List, Optional

import numpy as np

from ..config import QUESTION_KINDS
from ..prompts import build_prompt
from ..text.phrases import ASIDES, CORRECTION_LEADS, STYLE_HINTS, STYLE_THANKS, THANKS, VAGUE_REPLIES, with_lead
from .env import Feedback, Task
from .tools import TOOL_ALIASES, ToolFact, run_lookup
from .world import Fact, FactWorld, PairFact

__all__ = ["Feedback", "CorrectingUser", "StudentUser", "TeacherUser", "FactEnv", "Task", "make_user",
           "states_value", "make_env"]


def _norm(s: str) -> str:
    return re.sub(r"\s+", " ", s.casefold()).strip()


def _find_value(text: str, value: str) -> int:
    """Where ``value`` first occurs in ``text`` (both normalised): a Latin-script value as a whole word
    (no Latin letter or digit right before or after it: "5" is in "有5个省" and "5 provinces", not in
    "15"; Chinese characters do not count as word characters here), a Chinese one as a substring; -1
    if it does not occur (or ``value`` is empty)."""
    if not value:
        return -1
    if re.fullmatch(r"[a-z0-9\s\-'.]+", value):  # Latin script: whole words only
        m = re.search(rf"(?<![a-z0-9]){re.escape(value)}(?![a-z0-9])", text)
        return m.start() if m else -1
    return text.find(value)


def states_value(response: str, value: str) -> bool:
    """Does the response state ``value`` (as a whole word in English, as a substring in Chinese)?"""
    return _find_value(_norm(response), _norm(value)) >= 0


def _correct(fact, response: str, world: FactWorld) -> bool:
    """States the truth and no other value of the same relation (hedging "伦敦或巴黎" fails).
    A :class:`PairFact` is right when each part is, judged on its own clause: the text from its
    country's name up to the other country's name (both names must be there). A fact that checks itself
    (:class:`claw_lib.toy.real_tasks.RealFact`) does so."""
    if hasattr(fact, "check"):
        return fact.check(response)
    if isinstance(fact, PairFact):
        r = _norm(response)
        starts = [_find_value(r, _norm(f.subject)) for f in fact.parts]
        if min(starts) < 0 or starts[0] == starts[1]:
            return False
        cuts = sorted(starts) + [len(r)]
        clause = {s: r[s:cuts[cuts.index(s) + 1]] for s in starts}
        return all(_correct(f, clause[s], world) for f, s in zip(fact.parts, starts))
    if not states_value(response, fact.truth):
        return False
    others = {c.value(fact.relation, fact.lang) for c in world.known + world.heldout} - {fact.truth}
    wrong = world.wrong_value(fact)
    if wrong:
        others.add(wrong)
    return not any(states_value(response, o) for o in others if not states_value(fact.truth, o))


class CorrectingUser:
    """Thanks when right, corrects when wrong; ``p_noise`` adds an irrelevant clause,
    ``p_vague`` gives a correction without the answer ("不太对吧。")."""

    name = "correcting"

    def __init__(self, world: FactWorld, p_noise: float = 0.2, p_vague: float = 0.1, seed: int = 0):
        self.world, self.p_noise, self.p_vague = world, p_noise, p_vague
        self.rng = random.Random(seed)

    def reset(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def preferences(self, lang: str) -> str:
        return "答对就行。" if lang == "zh" else "Just get it right."

    def reply(self, fact: Fact, response: str) -> Feedback:
        rng, lang = self.rng, fact.lang
        if _correct(fact, response, self.world):
            return Feedback(rng.choice(THANKS[lang]), 1.0, "thanks")
        if rng.random() < self.p_vague:
            return Feedback(rng.choice(VAGUE_REPLIES[lang]), 0.0, "vague")
        text = with_lead(rng.choice(CORRECTION_LEADS[lang]), fact.answer(), lang)
        if rng.random() < self.p_noise:
            text += rng.choice(ASIDES[lang]).format(subject=fact.subject)
        return Feedback(text, 0.0, "correction")


class _StyleUser:
    """p_vague: share of unsatisfied replies that complain without saying what ("不太对吧。"): a
    Binary RL sample (-1) but no hint, so no OPD sample, as with the paper's real users."""

    style = ""
    name = ""

    def __init__(self, world: FactWorld, seed: int = 0, p_vague: float = 0.0):
        self.world, self.p_vague = world, p_vague
        self.rng = random.Random(seed)

    def reset(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def preferences(self, lang: str) -> str:
        """The user's stated preference: the same text the pre-training hints use."""
        return STYLE_HINTS[self.style][0 if lang == "zh" else 1]

    def checks(self, fact: Fact, response: str) -> dict:
        raise NotImplementedError

    def reply(self, fact: Fact, response: str) -> Feedback:
        correct = _correct(fact, response, self.world)
        checks = self.checks(fact, response)
        score = float(correct) * sum(checks.values()) / len(checks)
        lang = fact.lang
        if score == 1.0:
            return Feedback(STYLE_THANKS[lang], 1.0, "thanks", checks)
        if self.p_vague and self.rng.random() < self.p_vague:
            return Feedback(self.rng.choice(VAGUE_REPLIES[lang]), score, "vague", checks)
        parts = []
        if not correct:
            parts.append(with_lead(CORRECTION_LEADS[lang][0], fact.answer(), lang))
        if not all(checks.values()):
            parts.append(self.preferences(lang))
        return Feedback(("" if lang == "zh" else " ").join(parts), score, "style", checks)


class StudentUser(_StyleUser):
    """Wants answers that do not look machine-written: no restating, no full stop."""

    style, name = "casual", "student"

    def checks(self, fact: Fact, response: str) -> dict:
        r = response.strip()
        return {"no_restating": fact.subject.casefold() not in r.casefold(),
                "no_full_stop": not r.endswith(("。", ".", "！", "!"))}


class TeacherUser(_StyleUser):
    """Wants specific, friendly comments: an opener, a full sentence, an encouragement."""

    style, name = "friendly", "teacher"

    def checks(self, fact: Fact, response: str) -> dict:
        r = response.strip()
        zh = fact.lang == "zh"
        return {"opener": r.startswith("好问题！" if zh else "Good question!"),
                "full_sentence": states_value(r, fact.subject) and states_value(r, fact.truth),
                "encouragement": r.endswith("继续加油！" if zh else "Keep it up!")}


#: what the TA user asks for (not a pre-training style: the tiny GPT's default answer already is one)
TA_HINTS = ("请用一个完整的句子回答，说出问题里的国家，以句号结尾，不要客套话。",
            "Answer in one full sentence that names the country, end with a full stop, no small talk.")


class TAUser(_StyleUser):
    """The paper's second version's TA persona, scaled down: it wants detailed, specific answers (v2: grading comments
    of at least 100 tokens); here a full sentence that names the country and the value, ending with a full stop, with
    no small talk (no "Good question!" opener, no "Keep it up!"). The tiny GPT's default, formal answer is one, so this
    is the easiest persona, as v2's TA is (Hybrid 8.2 sessions, its lowest)."""

    style, name = "formal", "ta"

    def preferences(self, lang: str) -> str:
        return TA_HINTS[0 if lang == "zh" else 1]

    def checks(self, fact: Fact, response: str) -> dict:
        r = response.strip()
        zh = fact.lang == "zh"
        return {"full_sentence": states_value(r, fact.subject) and states_value(r, fact.truth),
                "no_small_talk": not r.startswith("好问题" if zh else "Good question")
                and not r.rstrip("。.!！").endswith("继续加油" if zh else "Keep it up"),
                "full_stop": r.endswith("。" if zh else ".")}


class ToolUser:
    """Asks the policy to use the lookup tool; the next state is the tool's output, not a reply
    (:mod:`claw_lib.toy.tools`). Score: 1 when the call returns the fact that was asked for, else 0
    (a call that works but looks up the wrong relation or country is progress for the judge and 0
    for the user: the judge only sees the tool's output)."""

    name = "tool"

    def __init__(self, world: FactWorld, seed: int = 0, p_vague: float = 0.0):
        self.world = world
        self.rng = random.Random(seed)

    def reset(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def preferences(self, lang: str) -> str:
        return "用工具查。" if lang == "zh" else "Use the tool."

    def reply(self, fact, response: str) -> Feedback:
        r = run_lookup(self.world, response, fact.lang)
        right = r.ok and r.relation == fact.fact.relation and r.country == fact.fact.country
        return Feedback(r.output, float(right), "tool_result" if r.ok else "tool_error", {"right_call": right}, "tool")


def make_user(name: str, world: FactWorld, seed: int = 0, p_vague: Optional[float] = None):
    """"correcting", "student", "teacher", "ta" or "tool"; ``p_vague`` overrides the user's share of vague replies."""
    users = {"correcting": CorrectingUser, "student": StudentUser, "teacher": TeacherUser, "ta": TAUser, "tool": ToolUser}
    if name not in users:
        raise ValueError(f"user must be one of {sorted(users)}, got {name!r}")
    if p_vague is not None and not 0.0 <= p_vague <= 1.0:
        raise ValueError(f"p_vague must be in [0, 1], got {p_vague}")
    return users[name](world, seed=seed, **({} if p_vague is None else {"p_vague": p_vague}))


class FactEnv:
    """A world, a user and a pool of facts.

    split: which facts are asked ("known", "known_clean", "misconception", "heldout");
    misconception_share: share of sampled tasks drawn from the planted misconceptions (so that
    the correcting user has something to correct); questions: "single" (one fact per question)
    or "pair" (two capitals at once, :class:`~claw_lib.toy.world.PairFact`; each country is a planted
    misconception with probability ``misconception_share``, else a known country with a clean
    capital); tokenizer: for chat-template prompts; p_vague: the user's share of vague replies
    (None: the user's default, 0.1 for the correcting user, 0 for the style users). The "tool" user
    asks for tool calls (:class:`~claw_lib.toy.tools.ToolFact`); its misconception share draws the
    countries with a planted wrong name. form: the prompts' surface form (:data:`claw_lib.prompts.PROMPT_FORMS`).
    """

    def __init__(self, world: Optional[FactWorld] = None, user: str = "correcting", split: str = "known",
                 relations=("capital",), langs=("zh", "en"), misconception_share: float = 0.5,
                 seed: int = 0, tokenizer=None, questions: str = "single", p_vague: Optional[float] = None,
                 form: str = "kit"):
        if questions not in QUESTION_KINDS:
            raise ValueError(f"questions must be {' or '.join(map(repr, QUESTION_KINDS))}, got {questions!r}")
        if questions == "pair" and user != "correcting":
            raise ValueError("two-part questions are asked by the correcting user only")
        self.world = world or FactWorld()
        self.questions, self.langs = questions, tuple(langs)
        self.user = make_user(user, self.world, seed, p_vague=p_vague)
        self.pool = self.world.facts(split, relations=relations, langs=langs)
        self.mis = [f for f in self.world.facts("misconception", langs=langs) if f.relation in relations]
        if user == "tool":  # tool questions; the "misconceptions" are the countries with a planted wrong name
            self.mis = [ToolFact(Fact(c, r, lg)) for c in self.world.known if c.zh in TOOL_ALIASES
                        for r in relations for lg in langs]
            self.pool = [ToolFact(f) for f in self.pool]
        self.misconception_share = misconception_share if self.mis else 0.0
        self.tokenizer, self.form = tokenizer, form
        self.reset(seed)

    def reset(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.user.reset(seed + 1)

    def sample(self, n: int) -> List[Task]:
        if self.questions == "pair":
            return [self._pair_task() for _ in range(n)]
        tasks = []
        for _ in range(n):
            src = self.mis if self.rng.random() < self.misconception_share else self.pool
            f = self.rng.choice(src)
            tasks.append(Task(f, build_prompt(f.question(), f.lang, tokenizer=self.tokenizer, form=self.form), self.form))
        return tasks

    def _pair_task(self) -> Task:
        mis = self.world.misconception_countries
        clean = [c for c in self.world.known if c.zh not in self.world.misconceptions]
        lang = self.rng.choice(self.langs)
        while True:
            a, b = (self.rng.choice(mis if self.rng.random() < self.misconception_share else clean) for _ in range(2))
            if a != b:
                break
        f = PairFact(Fact(a, "capital", lang), Fact(b, "capital", lang))
        return Task(f, build_prompt(f.question(), lang, tokenizer=self.tokenizer, form=self.form), self.form)

    def step(self, task: Task, response: str) -> Feedback:
        return self.user.reply(task.fact, response)


#: the personas of "joint" optimisation and the questions each brings (as the paper's second version's personas each
#: bring their own kind of task, the relation asked about tells the policy who is asking)
JOINT_PERSONAS = (("teacher", ("capital",)), ("student", ("colour",)))


@dataclass
class JointTask(Task):
    """A question of one persona of a :class:`JointEnv` (``user``: its name)."""

    user: str = ""

    @classmethod
    def evaluate(cls, tasks, scores):
        """{"all": the mean score, and each persona's own mean score}."""
        out = {"all": float(np.mean(scores))}
        for name in dict.fromkeys(t.user for t in tasks):
            out[name] = float(np.mean([s for t, s in zip(tasks, scores) if t.user == name]))
        return out


class JointEnv:
    """Several personas train one policy at the same time (the paper's second version's *joint* optimisation): each
    question comes from one of :data:`JOINT_PERSONAS`, drawn with equal chance, and that persona replies. The teacher
    user asks about capitals, the student user about flag colours, so the question says whose preference applies
    (the two want opposite styles: an opener and "Keep it up!" against a bare answer with no full stop). ``sample``
    returns :class:`JointTask` s; ``users`` holds every persona's user (the evaluation saves their random states)."""

    def __init__(self, world: Optional[FactWorld] = None, misconception_share: float = 0.5, seed: int = 0,
                 tokenizer=None, p_vague: Optional[float] = None, form: str = "kit", langs=("zh", "en")):
        self.world = world or FactWorld()
        self.envs = {name: FactEnv(self.world, user=name, relations=rels, langs=langs,
                                   misconception_share=misconception_share, seed=seed, tokenizer=tokenizer,
                                   p_vague=p_vague, form=form) for name, rels in JOINT_PERSONAS}
        self.users = [e.user for e in self.envs.values()]
        self.tokenizer, self.form = tokenizer, form
        self.reset(seed)

    def reset(self, seed: int) -> None:
        self.rng = random.Random(seed)
        for i, env in enumerate(self.envs.values()):
            env.reset(seed + 7919 * (i + 1))

    def sample(self, n: int) -> List[JointTask]:
        names = list(self.envs)
        out = []
        for _ in range(n):
            name = self.rng.choice(names)
            t = self.envs[name].sample(1)[0]
            out.append(JointTask(t.fact, t.prompt, t.form, name))
        return out

    def step(self, task: JointTask, response: str) -> Feedback:
        return self.envs[task.user].step(task, response)
