"""The fact world's lookup tool: a task whose next state comes from a tool, not from a user
(OpenClaw-RL's general-agent track, scaled down; notebook 06).

The policy is asked to use the tool ("用工具查一下法国的首都。" / "Use the tool to look up the capital of
France.") and should answer with one call in a fixed syntax, ``lookup(capital, 法国)`` /
``lookup(capital, France)``: the relation's key and the country's name in the question's language.
:func:`run_lookup` executes a call on the world and returns what the tool prints: a result,
``capital(France) = Paris``, or an error when the call is malformed, names an unknown relation, or an
unknown country. For a planted wrong name (:data:`TOOL_ALIASES`: "Holland" for the Netherlands) and
for near misses the error suggests the right name, so the error text is a usable hint.

OpenClaw-RL's judge rules make the next state's role decide: a tool result without an error is
progress (+1, and not hindsight), an error the call caused is -1, and its text is the hint
(:class:`~claw_lib.signals.judges.RuleJudge` with ``role="tool"``).
"""
from __future__ import annotations

import difflib
import random
import re
from dataclasses import dataclass
from typing import Optional

from ..text.phrases import TOOL_ERROR_PREFIXES
from .world import RELATIONS, Country, Fact, FactWorld

__all__ = ["ToolFact", "ToolResult", "run_lookup", "tool_call", "TOOL_QUESTIONS", "TOOL_RELATION_WORDS",
           "TOOL_ALIASES", "planted_call", "malformed_call"]

#: how a user asks for the tool: {X} the country, {R} the relation's words
TOOL_QUESTIONS = {"zh": "用工具查一下{X}的{R}。", "en": "Use the tool to look up the {R} of {X}."}
#: relation key -> (zh words, en words) in the question
TOOL_RELATION_WORDS = {"capital": ("首都", "capital"), "colour": ("国旗颜色", "flag colour"),
                       "animal": ("国兽", "national animal"), "provinces": ("省的数量", "number of provinces")}
#: planted wrong names the tiny GPT learns to call the tool with: country (zh) -> (zh alias, en alias)
TOOL_ALIASES = {"荷兰": ("尼德兰", "Holland"), "英国": ("英格兰", "England"), "美国": ("美利坚", "the USA"),
                "瑞士": ("瑞士联邦", "Swiss")}
_CALL = re.compile(r"^lookup\(\s*([^,()]+?)\s*,\s*([^()]+?)\s*\)[。.]?$")


def tool_call(relation: str, entity: str) -> str:
    """The call in the tool's syntax: ``lookup(capital, France)``."""
    return f"lookup({relation}, {entity})"


@dataclass(frozen=True)
class ToolFact:
    """A question that asks the policy to call the tool for ``fact``; the right answer is the call."""

    fact: Fact
    relation = "tool"

    @property
    def lang(self) -> str:
        return self.fact.lang

    @property
    def subject(self) -> str:
        return self.fact.subject

    @property
    def truth(self) -> str:
        return tool_call(self.fact.relation, self.fact.subject)

    def question(self) -> str:
        words = TOOL_RELATION_WORDS[self.fact.relation][0 if self.lang == "zh" else 1]
        return TOOL_QUESTIONS[self.lang].format(X=self.subject, R=words)

    def answer(self, value: Optional[str] = None, style: str = "formal") -> str:
        """The call (``value``: another entity to call it with, e.g. a planted alias)."""
        return tool_call(self.fact.relation, self.subject if value is None else value)


@dataclass
class ToolResult:
    """What the tool printed (``output``), whether it is a result (``ok``), and what was looked up."""

    output: str
    ok: bool
    relation: Optional[str] = None
    country: Optional[Country] = None


def _error(lang: str, zh: str, en: str) -> str:
    return (TOOL_ERROR_PREFIXES[1] + zh) if lang == "zh" else (TOOL_ERROR_PREFIXES[0] + " " + en)


def _find_country(world: FactWorld, name: str, lang: str) -> Optional[Country]:
    key = name.strip().casefold()
    for c in world.known + world.heldout:
        if c.name(lang).casefold() == key:
            return c
    return None


def _suggest(world: FactWorld, name: str, lang: str) -> Optional[str]:
    """The right name for a planted alias, else the closest country name (difflib, cutoff 0.6)."""
    for zh, pair in TOOL_ALIASES.items():
        if name.strip().casefold() == pair[0 if lang == "zh" else 1].casefold():
            c = next((c for c in world.known if c.zh == zh), None)
            if c is not None:
                return c.name(lang)
    names = [c.name(lang) for c in world.known + world.heldout]
    close = difflib.get_close_matches(name.strip(), names, n=1, cutoff=0.6)
    return close[0] if close else None


def run_lookup(world: FactWorld, call: str, lang: str) -> ToolResult:
    """Execute ``call`` on ``world``; ``lang`` is the language the tool answers errors in."""
    m = _CALL.match((call or "").strip())
    if m is None:
        shown = (call or "").strip()[:60]
        return ToolResult(_error(lang, f"调用格式不对：“{shown}”；应写 lookup(关系, 国家)",
                                 f"malformed call '{shown}'; write lookup(relation, country)"), False)
    relation, name = m.group(1), m.group(2)
    if relation not in RELATIONS:
        keys = ", ".join(RELATIONS)
        return ToolResult(_error(lang, f"未知关系“{relation}”；可用 {keys}",
                                 f"unknown relation '{relation}'; use one of {keys}"), False)
    country = _find_country(world, name, lang)
    if country is None:
        hint = _suggest(world, name, lang)
        return ToolResult(_error(lang, f"未知国家“{name}”" + (f"；你是指“{hint}”吗？" if hint else ""),
                                 f"unknown country '{name}'" + (f"; did you mean '{hint}'?" if hint else "")),
                          False, relation)
    return ToolResult(f"{relation}({country.name(lang)}) = {country.value(relation, lang)}", True, relation, country)


def planted_call(world: FactWorld, fact: ToolFact, rng: random.Random) -> Optional[str]:
    """The call a no-hint training answer makes for a country with a planted alias: the alias with
    probability ``misconception_strength``; None for other countries (they get the right call)."""
    pair = TOOL_ALIASES.get(fact.fact.country.zh)
    if pair is None or rng.random() >= world.config.misconception_strength:
        return None
    return fact.answer(pair[0 if fact.lang == "zh" else 1])


def malformed_call(fact: ToolFact, rng: random.Random) -> str:
    """A call with its syntax broken in one of three ways (for the tool's errors in pre-training)."""
    r, e = fact.fact.relation, fact.subject
    return rng.choice([f"lookup {r}, {e}", f"lookup({r} {e})", f"lookup({r}, {e}"])
