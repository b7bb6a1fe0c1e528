"""The personal-agent experiment's users: GSM8K homework, a scripted persona, a deterministic acceptance check.

Upstream's evaluation (OpenClaw-RL ``openclaw-test/student_chat.py``) has an LLM play a **lazy student** who wants
homework that does not look AI-written: it asks for the solution, complains about what looks AI-like (bold text,
numbered lists, "**Final answer**:") and asks for a rewrite *that keeps all the steps*, never writing the maths
itself; once satisfied it ends the session. The **first reply** of each session is what is judged. Reef made that
judgement deterministic; this module is the kit's version, with no LLM:

* :func:`checks` -- a persona's acceptance, one named check each (all must pass):

  - ``student`` (upstream's): none of Reef's AI-style markers (:data:`AI_STYLE_MARKERS`: bold, markdown headers,
    bullet or numbered lists, ``\\boxed``, "final answer:", horizontal rules or tables) and the working shown;
  - ``teacher``: a friendly opener in the reply's opening and an encouragement at its end;
  - ``answer_first``: the reply's opening states the number it ends with (its own final answer, right or wrong);
  - ``no_latex``: no LaTeX (a backslash command, ``\\(``, ``\\[``, ``$$``, ``^{``/``_{``);
  - ``chinese``: the reply is written in Chinese (Han characters at least 70% of the letters, 10 at least);

  and for every persona ``shows_work``: at least two calculation steps (a number, an operator sign or word, a
  number; units and short asides allowed between them: Reef's rule, with "x" and Chinese operator words added).
  Correctness is apart (:func:`claw_lib.toy.gsm8k.is_correct`): a style check never reads the gold answer.
* :class:`HomeworkUser` -- the scripted user of one persona, in English or Chinese: :meth:`~HomeworkUser.ask` opens
  the session with the problem, :meth:`~HomeworkUser.react` answers each reply: a complaint in natural words about
  what it does not like (never a digit, a number word or a Chinese numeral) with the request for a rewrite that
  keeps all the steps, or thanks, which ends the session (``done``). Its phrases live in
  :mod:`claw_lib.text.phrases`.
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from ..config import HOMEWORK_PERSONAS
from ..text.phrases import (AI_STYLE_WORDS, ENCOURAGEMENTS, FRIENDLY_OPENERS, HOMEWORK_ASKS, HOMEWORK_THANKS,
                            NO_WORK_COMPLAINTS, PERSONA_PREFERENCES, STEP_WORDS, STUDENT_COMPLAINTS)
from .gsm8k import Problem, final_number

__all__ = ["AI_STYLE_MARKERS", "LATEX_PATTERN", "HOMEWORK_LANGS", "ai_style_markers", "work_steps", "opening",
           "checks", "accepts", "preference", "Reaction", "HomeworkUser", "request_messages", "first_request"]

#: the languages a homework user speaks
HOMEWORK_LANGS = ("en", "zh")
#: what looks AI-written to the student (Reef's markers, by name): a match anywhere rejects the reply
AI_STYLE_MARKERS: Dict[str, "re.Pattern"] = {
    "bold": re.compile(r"\*\*[^*\n]+\*\*"),
    "header": re.compile(r"^\s{0,3}#{1,6}\s", re.MULTILINE),
    "bullets": re.compile(r"^\s*[-*•]\s+\S", re.MULTILINE),
    "numbered_list": re.compile(r"^\s*\d+[.)]\s+\S", re.MULTILINE),
    "boxed": re.compile(r"\\boxed"),
    "final_answer_label": re.compile(r"final answer\s*:", re.IGNORECASE),
    "rule_or_table": re.compile(r"^\s*(?:---|___|\|)", re.MULTILINE),
}
_OPERAND = r"\d[\d,]*(?:\.\d+)?"
#: what may stand between an operand and its operator: units, currency, asides, no digit, sign or line break
_FILLER = r"[^\d\n=+*/×÷-]{0,24}"
_OPERATOR = "(?:[=+*/×÷-]|" + "|".join(
    [r"\b" + re.escape(w).replace(r"\ ", r"\s+") + r"\b" for w in STEP_WORDS["en"]]
    + [re.escape(w) for w in sorted(STEP_WORDS["zh"], key=len, reverse=True)]) + ")"
_STEP = re.compile(_OPERAND + _FILLER + _OPERATOR + _FILLER + _OPERAND, re.IGNORECASE)
#: LaTeX in a reply: a backslash command (\frac, \times, \boxed), \( \) \[ \], $$, or a braced super/subscript
LATEX_PATTERN = re.compile(r"\\[A-Za-z]+|\\[()\[\]]|\$\$|[\^_]\{")
_HAN = re.compile(r"[\u4e00-\u9fff]")
_LATIN = re.compile(r"[A-Za-z]")
#: the opening: up to the first sentence end or line break, at most this many characters
OPENING_CHARS = 120
#: the end a teacher's encouragement is looked for in, in characters
CLOSING_CHARS = 150


def ai_style_markers(reply: str) -> List[str]:
    """The names of the :data:`AI_STYLE_MARKERS` the reply has (empty: it does not look AI-written)."""
    return [name for name, pattern in AI_STYLE_MARKERS.items() if pattern.search(reply or "")]


def work_steps(reply: str) -> int:
    """How many calculation steps the reply shows ("20 + 44 = 64" is one, "64 ... minus 30" another)."""
    return len(_STEP.findall(reply or ""))


def opening(reply: str) -> str:
    """The reply's opening: its text up to the first sentence end (. ! ? 。！？ followed by a space or the end) or
    line break, at most :data:`OPENING_CHARS` characters."""
    text = (reply or "").strip()
    m = re.search(r"[.!?](?=\s|$)|[。！？]|\n", text)
    return text[:m.end() if m else len(text)][:OPENING_CHARS]


def _has_phrase(text: str, phrases, lang: str) -> bool:
    low = text.casefold()
    if lang == "zh":
        return any(p in low for p in phrases)
    return any(re.search(rf"(?<![\w']){re.escape(p)}(?![\w'])", low) for p in phrases)


def _friendly_opener(reply: str) -> bool:
    head = opening(reply)
    return _has_phrase(head, FRIENDLY_OPENERS["en"], "en") or _has_phrase(head, FRIENDLY_OPENERS["zh"], "zh")


def _encouraging_close(reply: str) -> bool:
    tail = (reply or "").strip()[-CLOSING_CHARS:]
    return _has_phrase(tail, ENCOURAGEMENTS["en"], "en") or _has_phrase(tail, ENCOURAGEMENTS["zh"], "zh")


def _answer_first(reply: str) -> bool:
    last = final_number(reply)
    head = opening(reply)
    return last is not None and head != (reply or "").strip() and any(
        abs(v - last) < 1e-6 for v in (final_number(m.group(0)) for m in re.finditer(_OPERAND, head)) if v is not None)


def _in_chinese(reply: str) -> bool:
    han, latin = len(_HAN.findall(reply or "")), len(_LATIN.findall(reply or ""))
    return han >= 10 and han >= 0.7 * (han + latin)


def checks(persona: str, reply: str) -> Dict[str, bool]:
    """The persona's acceptance checks of one reply, by name (all True: accepted). See the module docstring."""
    if persona not in HOMEWORK_PERSONAS:
        raise ValueError(f"persona must be one of {HOMEWORK_PERSONAS}, got {persona!r}")
    if persona == "student":
        own = {"no_ai_style": not ai_style_markers(reply)}
    elif persona == "teacher":
        own = {"friendly_opener": _friendly_opener(reply), "encouraging_close": _encouraging_close(reply)}
    elif persona == "answer_first":
        own = {"answer_first": _answer_first(reply)}
    elif persona == "no_latex":
        own = {"no_latex": not LATEX_PATTERN.search(reply or "")}
    else:
        own = {"in_chinese": _in_chinese(reply)}
    return {**own, "shows_work": work_steps(reply) >= 2}


def accepts(persona: str, reply: str) -> bool:
    """Does the persona accept this reply (every check of :func:`checks` passes)?"""
    return all(checks(persona, reply).values())


def preference(persona: str, lang: str) -> str:
    """What the persona wants, in its own words (the preference told in a system prompt, the OPD hint's content)."""
    if lang not in HOMEWORK_LANGS:
        raise ValueError(f"lang must be one of {HOMEWORK_LANGS}, got {lang!r}")
    return PERSONA_PREFERENCES[persona][lang]


@dataclass
class Reaction:
    """The user's next message after a reply. text: what it says; accepted: the persona's verdict on the reply;
    checks: the verdict by check; done: the user is satisfied and the session ends after this message."""

    text: str
    accepted: bool
    checks: Dict[str, bool] = field(default_factory=dict)
    done: bool = False


class HomeworkUser:
    """A scripted homework user: one persona (:data:`claw_lib.config.HOMEWORK_PERSONAS`), one language ("en",
    "zh"); ``seed`` picks among the equivalent phrasings, deterministically."""

    def __init__(self, persona: str = "student", lang: str = "en", seed: int = 0):
        if persona not in HOMEWORK_PERSONAS:
            raise ValueError(f"persona must be one of {HOMEWORK_PERSONAS}, got {persona!r}")
        if lang not in HOMEWORK_LANGS:
            raise ValueError(f"lang must be one of {HOMEWORK_LANGS}, got {lang!r}")
        self.persona, self.lang = persona, lang
        self.rng = random.Random(seed)

    def ask(self, problem: Problem) -> str:
        """The session's first message: the request for a solution, with the problem."""
        return self.rng.choice(HOMEWORK_ASKS[self.lang]).format(problem=problem.question.strip())

    def complaint(self, verdict: Dict[str, bool], markers: Optional[List[str]] = None) -> str:
        """What the user says about a reply it does not accept: what to fix (the student names what looks
        AI-written), the request to keep all the steps, and the request to show the working when it is missing."""
        lang, parts = self.lang, []
        style_ok = all(v for k, v in verdict.items() if k != "shows_work")
        if self.persona == "student" and markers:
            words = [AI_STYLE_WORDS[m][lang] for m in markers]
            things = "、".join(words) if lang == "zh" else (
                words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1])
            parts.append(self.rng.choice(STUDENT_COMPLAINTS[lang]).format(things=things))
        elif not style_ok:
            parts.append(preference(self.persona, lang))
        if not verdict.get("shows_work", True):
            parts.append(NO_WORK_COMPLAINTS[lang])
        return ("" if lang == "zh" else " ").join(parts)

    def react(self, problem: Problem, reply: str) -> Reaction:
        """The user's answer to a reply: thanks (done) if the persona accepts it, else a complaint."""
        verdict = checks(self.persona, reply)
        if all(verdict.values()):
            return Reaction(self.rng.choice(HOMEWORK_THANKS[self.lang]), True, verdict, done=True)
        return Reaction(self.complaint(verdict, ai_style_markers(reply)), False, verdict)


def request_messages(user: HomeworkUser, problem: Problem, system: Optional[str] = None) -> List[dict]:
    """The session's first request as chat messages: ``[system?, user]``."""
    head = [{"role": "system", "content": system}] if system else []
    return head + [{"role": "user", "content": user.ask(problem)}]


def first_request(persona: str, lang: str, problem: Problem, seed: int = 0) -> Tuple[HomeworkUser, List[dict]]:
    """The user of this problem's session (seeded ``seed + problem.index``, its request made) and the request: the
    same pair on every call, so every condition, decoding and OPD view sees the same request and reaction."""
    user = HomeworkUser(persona, lang, seed + problem.index)
    return user, request_messages(user, problem)
