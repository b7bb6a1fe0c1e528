"""Judging the next state, as OpenClaw-RL does (notebook 06).

A next-state message (the user's reply, or a tool's output, with its role) is read twice:

* **Binary RL** -- a judge scores the turn +1 (progress), -1 (a correction or complaint) or 0
  (ambiguous); m votes are taken, failed votes dropped, the majority wins, ties and no votes -> 0.
* **OPD** -- a judge decides whether the reply carries *hindsight* (what the answer should have
  been) and, if so, writes a short hint inside ``[HINT_START]...[HINT_END]``. A vote is good if it is
  positive and its hint is longer than 10 characters; the longest good hint wins; no good vote ->
  the sample is dropped (and counted).

The judges (each answers the :class:`Judge` protocol): rule-based ones for the toy world (:class:`RuleJudge`),
:class:`LLMJudge`, which prompts any local instruct model and parses its output, and :class:`RemoteJudge`, the same
prompts sent to an OpenAI-compatible URL. :func:`make_judge` builds the one a setting names (``opd.judge``,
``claw serve --judge``): the one judge factory of the kit's loop, the TRL engine and the live server.
"""
from __future__ import annotations

import numbers
import re
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Protocol, Sequence

from ..config import HINT_PROMPTS, judge_kind
from ..prompts import has_chat_template
from ..text.corrections import clean_correction, is_chinese
from ..text.phrases import (
    HINT_LEADS,
    NEGATIVE_MARKERS,
    POSITIVE_MARKERS,
    POSITIVE_START_ZH,
    STYLE_HINTS,
    VAGUE_MARKERS,
    hint_lead,
    is_tool_error,
)
from .endpoint import open_endpoint

__all__ = ["Vote", "HintVote", "Judge", "RuleJudge", "LLMJudge", "RemoteJudge", "make_judge", "JUDGES", "parse_boxed",
           "parse_hint", "majority_vote", "select_hint", "hint_candidates", "MIN_HINT_CHARS", "judge_prompt",
           "hint_prompt", "plain_hint_prompt", "parse_plain_hint", "SCORE_VALUES", "HINT_DECISIONS", "ROLES"]

#: OpenClaw-RL keeps a hint only if it is longer than this many characters.
MIN_HINT_CHARS = 10


@dataclass
class Vote:
    """score: +1, -1, 0, or None for a failed vote (unparseable); text: the judge's reasoning."""

    score: Optional[int]
    text: str = ""


@dataclass
class HintVote:
    """positive: the judge found hindsight information; hint: its text (None if none); text: the judge's answer;
    failed: whether the vote failed (None: decided by OpenClaw-RL's decision box, :attr:`TurnSignal.failed_votes`)."""

    positive: bool
    hint: Optional[str]
    text: str = ""
    failed: Optional[bool] = None


#: OpenClaw-RL's box: one optionally signed digit and nothing else between the braces
_BOX_STRICT = re.compile(r"\\boxed\{([-+]?\d)\}")
_BOX_ANY = re.compile(r"\\boxed\{([^{}]*)\}")
_HINT = re.compile(r"\[HINT_START\](.*?)\[HINT_END\]", re.S)
#: scores a judge may give: the Binary RL judge -1 / 0 / +1, the hint judge -1 / +1
SCORE_VALUES = (1, -1, 0)
HINT_DECISIONS = (1, -1)
_WORDS = {"progress": 1, "positive": 1, "good": 1, "correction": -1, "negative": -1, "bad": -1,
          "ambiguous": 0, "neutral": 0}


def parse_boxed(text: str, allowed: Sequence[int] = SCORE_VALUES, lenient: bool = False) -> Optional[int]:
    """The judge's score: the **last** ``\\boxed{d}`` whose content is one optionally signed digit
    (OpenClaw-RL's rule), as an int if it is one of ``allowed``, else None (a failed vote).

    Boxes with any other content (``\\boxed{ 1 }``, ``\\boxed{x}``, an empty ``\\boxed{}`` in a
    sentence about the format) are invisible, so they never hide an earlier valid box; a later valid
    box with a value outside ``allowed`` (``\\boxed{2}``) makes the vote fail. ``allowed``: the Binary RL
    judge's (1, -1, 0), or the hint judge's (1, -1).

    ``lenient=True`` is the kit's earlier rule, kept to show how much a parser decides: the last box
    of *any* content, stripped, with words (progress / negative / neutral ...) accepted. It flips
    votes: ``\\boxed{-1} ... \\boxed{ 1 }`` is -1 strictly but +1 leniently (notebook 06).
    """
    if lenient:
        found = _BOX_ANY.findall(text or "")
        if not found:
            return None
        v = found[-1].strip().casefold().lstrip("+")
        score = _WORDS.get(v, {"1": 1, "-1": -1, "0": 0}.get(v))
    else:
        found = _BOX_STRICT.findall(text or "")
        if not found:
            return None
        score = int(found[-1])
    return score if score in allowed else None


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


def hint_candidates(votes: Sequence[HintVote], min_chars: int = MIN_HINT_CHARS, max_candidates: int = 3) -> List[str]:
    """The paper's second version's hint candidates (upstream ``_opd_evaluate``): the good votes' hints (positive,
    stripped, longer than ``min_chars``), exact duplicates dropped, **shortest first** (ties in vote order), at most
    ``max_candidates``. Empty when no vote is good. Refuses (ValueError) ``max_candidates`` < 1 (H01: -1 dropped the
    longest) and ``min_chars`` < 0 (H02: an empty hint passed), and a hint that is not a string (TypeError, H03)."""
    for name, v, least in (("min_chars", min_chars, 0), ("max_candidates", max_candidates, 1)):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < least:
            raise ValueError(f"{name} must be an integer >= {least}, got {v!r}")
    good: List[str] = []
    for v in votes:
        if v.hint is not None and not isinstance(v.hint, str):
            raise TypeError(f"a vote's hint must be a string or None, got {type(v.hint).__name__} {v.hint!r}")
        h = (v.hint or "").strip()
        if v.positive and len(h) > min_chars and h not in good:
            good.append(h)
    return sorted(good, key=len)[:max_candidates]


# --------------------------------------------------------------------------- rule-based judge


class RuleJudge:
    """Rules for the toy world's next states.

    A user's reply (``role="user"``): correction or preference markers -> -1, thanks -> +1, vague or
    unknown -> 0; the hint is the corrective clauses of the reply (lead-in "不对，"/"No, " kept, asides
    dropped), so a correction becomes "不对，法国的首都是巴黎。"; a reply that only asks a new question (vote 0, ends
    with a question mark: the next question of a live session) carries no hint. A tool's output (``role="tool"``), by
    OpenClaw-RL's rules: an error the call caused -> -1, and the error text is the hint; a result
    without error is progress (+1) and not hindsight (no hint).
    """

    def __init__(self, phrasings: int = 1):
        if isinstance(phrasings, bool) or not isinstance(phrasings, int) or phrasings < 1:
            raise ValueError(f"phrasings must be an integer >= 1, got {phrasings!r}")
        self.phrasings = phrasings

    def vote(self, response: str, next_state: str, role: str = "user") -> Vote:
        _check_role(role)  # an unknown role ("Tool") is refused, never read as the user's (H04)
        s = (next_state or "").strip()
        low = s.casefold()
        if role == "tool":
            return Vote(-1, "the tool call failed") if is_tool_error(s) else Vote(1, "the tool call worked")
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

    def votes(self, response: str, next_state: str, role: str = "user") -> List[Vote]:
        """One deterministic vote (the same interface as :class:`LLMJudge`)."""
        return [self.vote(response, next_state, role)]

    def hint_votes(self, response: str, next_state: str, role: str = "user") -> List[HintVote]:
        """The hint vote; with ``phrasings`` > 1 (a stand-in for an LLM judge's several samples, which quote different
        parts of the reply) also the reply's correction alone and its stated preference alone, where it holds both
        (a style user's "不对，法国的首都是巴黎。" + "请先说“好问题！”…"), up to ``phrasings`` votes."""
        full = self.hint(response, next_state, role)
        out = [full]
        if self.phrasings > 1 and full.positive and role != "tool":
            for pref in (p for pair in STYLE_HINTS.values() for p in pair):
                rest = full.hint.replace(pref, "").strip()
                if pref in full.hint and rest:
                    out += [HintVote(True, h, f"\\boxed{{1}}[HINT_START]{h}[HINT_END]") for h in (rest, pref)]
                    break
        return out[:self.phrasings]

    def hint(self, response: str, next_state: str, role: str = "user") -> HintVote:
        _check_role(role)
        if role == "tool":
            s = (next_state or "").strip()
            if is_tool_error(s):
                return HintVote(True, s, f"\\boxed{{1}}[HINT_START]{s}[HINT_END]")
            return HintVote(False, None, "\\boxed{-1} a tool result alone is not hindsight")
        cc = clean_correction(next_state or "")
        if cc.affirmation or not cc.text.strip():
            return HintVote(False, None, "\\boxed{-1} no hindsight information")
        if _new_question(next_state) and self.vote(response, next_state, role).score == 0:
            return HintVote(False, None, "\\boxed{-1} a new question says nothing about the answer")
        zh = is_chinese(next_state)
        lead = ""
        if any(d.strip(" ，,。.").casefold() in HINT_LEADS for d in cc.dropped):
            lead = hint_lead("zh" if zh else "en")
        text = cc.text if zh else cc.text[0].lower() + cc.text[1:] if lead else cc.text
        hint = lead + text
        return HintVote(True, hint, f"\\boxed{{1}}[HINT_START]{hint}[HINT_END]")


def _new_question(text: str) -> bool:
    """A reply that only asks something (ends with a question mark): in a live session the next question, which
    carries no hindsight about the answer before it (no toy-world reply is one: they thank, correct or complain)."""
    return (text or "").strip().endswith(("?", "？"))


# --------------------------------------------------------------------------- LLM judge
#: the next state's roles a judge is told about
ROLES = ("user", "tool")

_ROLE_RULES = (
    "## Who wrote the next state\n"
    "- role 'user': the user's reply to the assistant.\n"
    "- role 'tool': what a tool returned because the assistant called it. It did not exist before the "
    "assistant acted; it exists because of that action.\n"
)


def _check_role(role: str) -> None:
    """Refuse (ValueError naming it) a role that is not one of :data:`ROLES`: no judge reads it as another."""
    if not isinstance(role, str) or role not in ROLES:
        raise ValueError(f"the next state's role must be one of {ROLES}, got {role!r}")


def judge_prompt(response: str, next_state: str, role: str = "user") -> List[dict]:
    """The Binary RL judge's chat messages (system + user), with OpenClaw-RL's rules in the kit's words:
    progress is +1 (the user moves on or thanks; a tool returns a result without error); -1 for a
    request to redo or retry, a correction or change request (negative feedback, not a neutral new
    instruction), a rephrasing of the same request, or an error the assistant's action caused; 0 for
    an unrelated follow-up or too little evidence. The judge thinks step by step and ends with one box."""
    _check_role(role)
    system = (
        "You are a process reward model judging one step of an AI assistant. You see the assistant's output "
        "and the next state that followed it, and decide whether the output did what the user wanted at that "
        "step, using the next state as evidence.\n\n" + _ROLE_RULES +
        "A tool result without an error means the assistant's action worked: score it as progress.\n\n"
        "## Scores\n"
        "- \\boxed{1}: the step went as intended: the user moves on or thanks the assistant, or a tool returns "
        "a result without an error.\n"
        "- \\boxed{-1}: the output was wrong, incomplete or unwanted. Signs: the user asks to redo, retry or "
        "repeat it; the user asks for a correction or a change (\"no, I meant ...\", \"change X to Y\"); the "
        "user says the same request again in other words; a tool reports an error that the assistant's call "
        "caused.\n"
        "- \\boxed{0}: the next state says neither, e.g. an unrelated follow-up question, or there is too "
        "little to tell.\n\n"
        "A request to change the output is negative feedback about it, not a neutral new instruction.\n\n"
        "Think step by step, then write your final score in one \\boxed{}."
    )
    user = (f"## Assistant output\n{response}\n\n## Next state [role: {role}]\n{next_state}\n\n"
            "First say whether the next state shows (a) progress, (b) a correction, redo or change request, or "
            "(c) neither; then give \\boxed{1}, \\boxed{-1} or \\boxed{0}.")
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def hint_prompt(response: str, next_state: str, role: str = "user") -> List[dict]:
    """The hint judge's chat messages (system + user), with OpenClaw-RL's rules in the kit's words:
    exactly one final decision, \\boxed{1} or \\boxed{-1}; a hint of 1-3 concise, concrete, actionable
    sentences between [HINT_START] and [HINT_END] only when the decision is +1, no hint block when it
    is -1; a tool's result alone is not hindsight."""
    _check_role(role)
    system = (
        "You extract hindsight hints for an AI assistant. You see the assistant's response at turn t and the "
        "next state at turn t+1 with its role.\n\n" + _ROLE_RULES +
        "A tool result without an error means the action was fine; it is not something the assistant should "
        "have known before acting.\n\n"
        "Decide whether the next state tells what would have made the turn-t response better.\n\n"
        "## Output rules\n"
        "- Write exactly one final decision: \\boxed{1} (there is such information) or \\boxed{-1} (there is "
        "not).\n"
        "- Only when the decision is \\boxed{1}, write a hint of 1-3 short sentences between [HINT_START] and "
        "[HINT_END]: concrete and actionable, saying what the response should have done.\n"
        "- When the decision is \\boxed{-1}, write no hint block."
    )
    user = (f"## Assistant response (turn t)\n{response}\n\n## Next state (turn t+1) [role: {role}]\n"
            f"{next_state}\n\nGive your decision and, if it is \\boxed{{1}}, the hint, in the format above.")
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def plain_hint_prompt(response: str, next_state: str, role: str = "user") -> List[dict]:
    """The "plain" hint question (``opd.hint_prompt``): one question a small instruct model answers in its own words,
    with nothing to format: what the response should have done, starting "The answer should", or NONE. Read by
    :func:`parse_plain_hint`."""
    _check_role(role)
    who = {"user": "The user then wrote", "tool": "The tool then returned", "system": "The system then said"}.get(
        role, "Then came")
    user = (f"An assistant wrote this answer:\n{response}\n\n{who}:\n{next_state}\n\n"
            "Does that message say how the answer should have been different? If it does, write one or two "
            "sentences that start with \"The answer should\" and say what to change. If it does not, write only: NONE")
    return [{"role": "user", "content": user}]


#: how a "plain" answer says there is nothing to learn
_NONE = re.compile(r"^\W*none\b", re.I)
#: the end of a sentence (Latin or CJK punctuation)
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s*")


def parse_plain_hint(text: str, max_sentences: int = 2) -> HintVote:
    """A "plain" answer (:func:`plain_hint_prompt`) as a hint vote: positive with its first ``max_sentences``
    sentences as the hint, from the first one that starts "The answer should" (or the answer's start when none
    does); negative for an empty answer or one that starts with NONE. A decision is never missing, so a plain vote
    fails only when there is no answer at all (``failed``); a hint of 10 characters or fewer is still dropped by
    :func:`select_hint`."""
    t = (text or "").strip()
    if not t or _NONE.match(t):
        return HintVote(False, None, text or "", failed=not t)  # no answer at all (an unreachable endpoint): failed
    start = t.casefold().find("the answer should")
    sentences = [x for x in _SENTENCE_END.split(t[max(start, 0):]) if x.strip()]
    return HintVote(True, " ".join(x.strip() for x in sentences[:max_sentences]), text, failed=False)


class Judge(Protocol):
    """What the stages ask of a next-state judge (:func:`~claw_lib.signals.opd.judge_turn`): its Binary RL votes and
    its hint votes on one turn (``role``: one of :data:`ROLES`, who wrote ``next_state``). A failed vote is a
    :class:`Vote` with score None (an :class:`HintVote` without a hint), never an exception."""

    def votes(self, response: str, next_state: str, role: str = "user") -> List[Vote]: ...

    def hint_votes(self, response: str, next_state: str, role: str = "user") -> List[HintVote]: ...


class _PromptJudge:
    """A judge that asks a language model OpenClaw-RL's two prompts (:func:`judge_prompt`, :func:`hint_prompt`) and
    parses its ``m`` completions (the last ``\\boxed{d}``, ``[HINT_START]...[HINT_END]``); a subclass says how to ask
    (``_ask(messages) -> m texts``, "" for a failed one)."""

    m: int
    hint_format: str = "openclaw"  # opd.hint_prompt: "openclaw" or "plain" (plain_hint_prompt)

    def _ask(self, messages: List[dict]) -> List[str]:
        raise NotImplementedError

    def votes(self, response: str, next_state: str, role: str = "user") -> List[Vote]:
        return [Vote(parse_boxed(t, SCORE_VALUES), t) for t in self._ask(judge_prompt(response, next_state, role))]

    def hint_votes(self, response: str, next_state: str, role: str = "user") -> List[HintVote]:
        if self.hint_format == "plain":
            return [parse_plain_hint(t) for t in self._ask(plain_hint_prompt(response, next_state, role))]
        return [HintVote(parse_boxed(t, HINT_DECISIONS) == 1, parse_hint(t), t)
                for t in self._ask(hint_prompt(response, next_state, role))]


class LLMJudge(_PromptJudge):
    """Any instruct model as judge: ``m`` sampled votes per question, parsed from its output.

    model, tokenizer: a causal LM (:func:`claw_lib.models.lm.load_causal_lm`); the messages go through
    its chat template, or are joined by newlines without one. Defaults follow OpenClaw-RL's Binary RL
    script: m = 3 votes, temperature 0.6, up to 4096 new tokens (a thinking judge needs room before
    its box; the OPD scripts allow 8192 and take m = 1).
    """

    def __init__(self, model, tokenizer, m: int = 3, temperature: float = 0.6, max_new_tokens: int = 4096,
                 seed: int = 0):
        self.model, self.tok, self.m = model, tokenizer, m
        self.temperature, self.max_new_tokens, self.seed = temperature, max_new_tokens, seed

    def _ask(self, messages: List[dict]) -> List[str]:
        from ..models.lm import generate  # lazy: torch loads for a local LLM judge only (rule and URL judges need none)

        if has_chat_template(self.tok):
            prompt = self.tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        else:
            prompt = "\n".join(m["content"] for m in messages)
        gens = generate(self.model, self.tok, [prompt] * self.m, max_new_tokens=self.max_new_tokens,
                        temperature=self.temperature, seed=self.seed)
        return [g.text for g in gens]


class RemoteJudge(_PromptJudge):
    """A judge behind any OpenAI-compatible endpoint (vLLM, SGLang, another ``claw serve``, a hosted API), through the
    official ``openai`` client: ``m`` completions per question (the request's ``n``, or ``m`` requests where the
    server ignores ``n``) at ``temperature``, at most ``max_tokens`` each. url: the server's base (``http://host:port``,
    with or without ``/v1``); model: the name to ask for (empty: the first model its ``/v1/models`` lists). The
    endpoint is checked here (:func:`~claw_lib.signals.endpoint.open_endpoint`: one that does not answer
    ``/v1/models`` is refused with a one-line ValueError); a request that fails later is a failed vote, never a crash
    of the judge loop."""

    def __init__(self, url: str, model: str = "", m: int = 3, temperature: float = 0.6, max_tokens: int = 512,
                 timeout_s: float = 60.0):
        self.client, self.model = open_endpoint(url, model, timeout_s, "judge")
        self.m, self.temperature, self.max_tokens = m, temperature, max_tokens

    def _ask(self, messages: List[dict]) -> List[str]:
        out: List[str] = []
        try:
            while len(out) < self.m:
                r = self.client.chat.completions.create(model=self.model, messages=messages, n=self.m - len(out),
                                                        temperature=self.temperature, max_tokens=self.max_tokens)
                got = [c.message.content or "" for c in r.choices]
                out.extend(got or [""])
        except Exception:  # an unreachable or failing judge: the missing votes fail
            out.extend([""] * (self.m - len(out)))
        return out[:self.m]


def _load_lm(spec: str, device: str):
    from ..models.lm import load_causal_lm  # lazy: torch for a local LLM judge only (as in LLMJudge._ask)

    return load_causal_lm(spec, device=device)


#: the judge factory, one line per kind of :data:`~claw_lib.config.JUDGE_KINDS`: (spec, model, m, device, seed) ->
#: the judge (None: the rule judge, which :func:`~claw_lib.signals.opd.judge_turn` builds itself). A new kind of judge
#: is a class above, one line here and its name in ``config.JUDGE_KINDS`` (CONTRIBUTING.md).
JUDGES: Dict[str, Callable[..., Optional[Judge]]] = {
    "rule": lambda spec, model, m, device, seed: None,
    "url": lambda spec, model, m, device, seed: RemoteJudge(spec, model=model, m=m),
    "model": lambda spec, model, m, device, seed: LLMJudge(*_load_lm(spec, device), m=m, max_new_tokens=512,
                                                           seed=seed),
}


def make_judge(spec: str, model: str = "", m: int = 3, device: str = "cpu", seed: int = 0,
               hint_prompt: str = "openclaw") -> Optional[Judge]:
    """The next-state judge a setting names (``opd.judge`` of ``claw train``, ``claw serve --judge``; read by
    :func:`~claw_lib.config.judge_kind`): None for "rule" (the rule judge of
    :func:`~claw_lib.signals.opd.judge_turn`), :class:`RemoteJudge` for an http(s):// URL (``model``: the name asked
    for there; the endpoint checked at once), :class:`LLMJudge` for a local instruct model (a Hugging Face name or
    folder, loaded on ``device``; ``m`` sampled votes of at most 512 new tokens, seeded by ``seed``); an LLM judge
    asks for hints with ``hint_prompt`` (``opd.hint_prompt``: "openclaw" or "plain")."""
    judge = JUDGES[judge_kind(spec)](spec.strip(), model, m, device, seed)
    if judge is not None and hint_prompt != "openclaw":
        if hint_prompt not in HINT_PROMPTS:
            raise ValueError(f"hint_prompt must be one of {', '.join(HINT_PROMPTS)}, got {hint_prompt!r}")
        judge.hint_format = hint_prompt
    return judge
