"""Judging the next state, as OpenClaw-RL does (notebook 06).

A next-state message (the user's reply, a tool error) is read twice:

* **Binary RL** -- a judge scores the turn +1 (progress), -1 (a correction or complaint) or 0
  (ambiguous); m votes are taken, failed votes dropped, the majority wins, ties and no votes -> 0.
* **OPD** -- a judge decides whether the reply carries *hindsight* (what the answer should have
  been) and, if so, writes a short hint inside ``[HINT_START]...[HINT_END]``. A vote is good if it is
  positive and its hint is longer than 10 characters; the longest good hint wins; no good vote ->
  the sample is dropped (and counted).

Two judges of each kind: rule-based ones for the toy world (:class:`RuleJudge`), and
:class:`LLMJudge`, which prompts any instruct model and parses its output.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import List, Optional, Sequence

from ..text.corrections import clean_correction, is_chinese
from ..text.phrases import HINT_LEADS, NEGATIVE_MARKERS, POSITIVE_MARKERS, POSITIVE_START_ZH, VAGUE_MARKERS, hint_lead

__all__ = ["Vote", "HintVote", "RuleJudge", "LLMJudge", "parse_boxed", "parse_hint", "majority_vote",
           "select_hint", "MIN_HINT_CHARS", "judge_prompt", "hint_prompt"]

#: OpenClaw-RL keeps a hint only if it is longer than this many characters.
MIN_HINT_CHARS = 10


@dataclass
class Vote:
    """score: +1, -1, 0, or None for a failed vote (unparseable); text: the judge's reasoning."""

    score: Optional[int]
    text: str = ""


@dataclass
class HintVote:
    """positive: the judge found hindsight information; hint: its text (None if none)."""

    positive: bool
    hint: Optional[str]
    text: str = ""


_BOX = re.compile(r"\\boxed\{([^{}]*)\}")
_HINT = re.compile(r"\[HINT_START\](.*?)\[HINT_END\]", re.S)


def parse_boxed(text: str) -> Optional[int]:
    """The **last** ``\\boxed{...}`` of a judge's output as +1 / -1 / 0, or None if absent or
    unreadable. Accepts numbers and the words progress/positive/good, correction/negative/bad,
    ambiguous/neutral."""
    found = _BOX.findall(text or "")
    if not found:
        return None
    v = found[-1].strip().casefold().lstrip("+")
    table = {"1": 1, "-1": -1, "0": 0, "progress": 1, "positive": 1, "good": 1, "correction": -1,
             "negative": -1, "bad": -1, "ambiguous": 0, "neutral": 0}
    return table.get(v)


def parse_hint(text: str) -> Optional[str]:
    """The text of the **last** ``[HINT_START]...[HINT_END]`` block, stripped, or None."""
    found = _HINT.findall(text or "")
    return found[-1].strip() if found else None


def majority_vote(votes: Sequence[Vote]) -> int:
    """Majority of the valid votes (failed ones, score None, are dropped); ties or no votes -> 0."""
    c = Counter(v.score for v in votes if v.score is not None)
    if not c:
        return 0
    (top, n), *rest = c.most_common()
    if rest and rest[0][1] == n:
        return 0
    return int(top)


def select_hint(votes: Sequence[HintVote], min_chars: int = MIN_HINT_CHARS) -> Optional[str]:
    """The longest hint among good votes (positive, hint longer than ``min_chars``); None if none."""
    good = [v.hint.strip() for v in votes if v.positive and v.hint and len(v.hint.strip()) > min_chars]
    return max(good, key=len) if good else None


# --------------------------------------------------------------------------- rule-based judge


class RuleJudge:
    """Rules for the toy world's users: correction or preference markers -> -1, thanks -> +1,
    vague or unknown -> 0; hints: the corrective clauses of the reply (lead-in "不对，"/"No, "
    kept, asides dropped), so a correction becomes "不对，法国的首都是巴黎。"."""

    def vote(self, response: str, next_state: str) -> Vote:
        s = (next_state or "").strip()
        low = s.casefold()
        if not s:
            return Vote(0, "empty reply")
        if any(v in low for v in VAGUE_MARKERS):
            return Vote(-1, "vague complaint: something is wrong, not what")
        zh = is_chinese(s)
        neg = any(m in s for m in NEGATIVE_MARKERS["zh"]) if zh else \
            any(low.startswith(m) or f" {m}" in low for m in NEGATIVE_MARKERS["en"])
        pos = (any(m in s for m in POSITIVE_MARKERS["zh"]) or bool(POSITIVE_START_ZH.match(s))) if zh else \
            any(re.search(rf"\b{re.escape(m)}\b", low) for m in POSITIVE_MARKERS["en"])
        if neg:  # a correction wins over polite words around it ("That's not right, ...")
            return Vote(-1, "the user corrects or restates a preference")
        if pos:
            return Vote(1, "the user confirms")
        return Vote(0, "ambiguous")

    def votes(self, response: str, next_state: str) -> List[Vote]:
        """One deterministic vote (the same interface as :class:`LLMJudge`)."""
        return [self.vote(response, next_state)]

    def hint_votes(self, response: str, next_state: str) -> List[HintVote]:
        return [self.hint(response, next_state)]

    def hint(self, response: str, next_state: str) -> HintVote:
        cc = clean_correction(next_state or "")
        if cc.affirmation or not cc.text.strip():
            return HintVote(False, None, "no hindsight information")
        zh = is_chinese(next_state)
        lead = ""
        if any(d.strip(" ，,。.").casefold() in HINT_LEADS for d in cc.dropped):
            lead = hint_lead("zh" if zh else "en")
        text = cc.text if zh else cc.text[0].lower() + cc.text[1:] if lead else cc.text
        hint = lead + text
        return HintVote(True, hint, f"[HINT_START]{hint}[HINT_END]")


# --------------------------------------------------------------------------- LLM judge
def judge_prompt(response: str, next_state: str) -> str:
    """OpenClaw-style instruction for scoring a turn from the next state."""
    return (
        "You are judging an AI assistant's last reply from the user's next message.\n"
        f"Assistant reply:\n{response}\n\nUser's next message:\n{next_state}\n\n"
        "Does the next message show PROGRESS (the user is satisfied or moves on), a CORRECTION (the user "
        "says the reply was wrong or asks for something different), or is it AMBIGUOUS?\n"
        "Think briefly, then answer with \\boxed{1} for progress, \\boxed{-1} for correction, \\boxed{0} for ambiguous."
    )


def hint_prompt(response: str, next_state: str) -> str:
    """OpenClaw-style instruction for extracting a hindsight hint."""
    return (
        "You are helping an AI assistant learn from the user's reaction.\n"
        f"Assistant reply:\n{response}\n\nUser's next message:\n{next_state}\n\n"
        "Does the user's message contain information about what the reply SHOULD have been? If yes, answer "
        "\\boxed{1} and write a 1-3 sentence hint for the assistant between [HINT_START] and [HINT_END]. "
        "If not, answer \\boxed{-1}."
    )


class LLMJudge:
    """Any instruct model as judge: ``m`` sampled votes per question, parsed from its output.

    model, tokenizer: a causal LM (``claw_lib.lm.load_causal_lm``); uses the chat template when
    the tokenizer has one.
    """

    def __init__(self, model, tokenizer, m: int = 3, temperature: float = 0.6, max_new_tokens: int = 256,
                 seed: int = 0):
        self.model, self.tok, self.m = model, tokenizer, m
        self.temperature, self.max_new_tokens, self.seed = temperature, max_new_tokens, seed

    def _ask(self, prompt: str) -> List[str]:
        from ..models.lm import generate

        if getattr(self.tok, "chat_template", None):
            prompt = self.tok.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                                  add_generation_prompt=True)
        gens = generate(self.model, self.tok, [prompt] * self.m, max_new_tokens=self.max_new_tokens,
                        temperature=self.temperature, seed=self.seed)
        return [g.text for g in gens]

    def votes(self, response: str, next_state: str) -> List[Vote]:
        return [Vote(parse_boxed(t), t) for t in self._ask(judge_prompt(response, next_state))]

    def hint_votes(self, response: str, next_state: str) -> List[HintVote]:
        out = []
        for t in self._ask(hint_prompt(response, next_state)):
            out.append(HintVote(parse_boxed(t) == 1, parse_hint(t), t))
        return out
