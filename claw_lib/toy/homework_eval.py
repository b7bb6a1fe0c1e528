"""The personal-agent ceiling: what a model does for a homework persona before any training.

OPD distils what the hinted model does into the unhinted one, and Binary RL reinforces what sampling finds, so what a
model can learn from its user is bounded by what it does when told. For one persona (:mod:`claw_lib.toy.homework`)
and a list of GSM8K problems, :func:`ceiling` measures the persona's acceptance of the session's first reply, and its
correctness (the gold answer is the reply's final number), under three conditions
(:data:`claw_lib.config.CEILING_CONDITIONS`):

* ``untrained`` -- the request as the user sends it (:meth:`HomeworkUser.ask`), nothing else;
* ``prompted``  -- the persona's preference (:func:`~claw_lib.toy.homework.preference`) as a system prompt before it;
* ``hinted``    -- OPD's teacher, exactly as OPD scores it: the user reacts to the untrained reply, the judge
  (:func:`claw_lib.signals.opd.judge_turn`, the rule judge by default) reads that reaction, and its hint is appended
  to the request (``"\\n\\n[user's hint / instruction]\\n" + hint``, :func:`claw_lib.prompts.append_hint`); counted
  over the turns that give a hint (an accepted reply is thanked: no hint, no OPD sample), as
  :func:`claw_lib.toy.evaluation.hinted_teacher_score` does for the fact world.

Where OPD's signal lands (:func:`landing`): on an untrained reply that drew a hint, OPD's per-token advantage
``log pi(y_t | x + hint) - log pi(y_t | x)`` (:func:`claw_lib.signals.opd.explain_turn`) is read by the kind of token:
the ``first`` token (a chat teacher's drift sits there), ``style`` tokens (inside what the persona objects to: the
student's AI-style markers, the LaTeX the no-LaTeX user refuses, the Latin words of a reply the Chinese user wanted
in Chinese), ``number`` tokens (inside a digit run) and ``other`` -- raw and with the kit's drift controls
(:func:`claw_lib.signals.opd.drift_controls`: the first token skipped; the rest centred).

Each condition decodes greedy or sampled at temperature 1 (:data:`claw_lib.config.DECODINGS`). A prompt that does not
fit the model's positions with ``max_new_tokens`` more is not generated and is counted as ``too_long`` (the tiny
GPT's 160 positions hold few GSM8K requests; a real model's hold all). A model without a chat template gets the
system prompt as a paragraph before the request, in the kit's plain prompt form.
"""
from __future__ import annotations

import re
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..config import CEILING_CONDITIONS, DECODINGS
from ..models.lm import encode, generate, max_positions
from ..prompts import append_hint, build_prompt, has_chat_template, template_messages
from ..signals.opd import drift_controls, explain_turn, judge_turn
from .gsm8k import Problem, is_correct
from .homework import AI_STYLE_MARKERS, LATEX_PATTERN, checks, first_request, preference

__all__ = ["render", "hinted_messages", "ceiling", "LANDING_CLASSES",
           "DRIFT_VARIANTS", "objected_spans", "token_classes", "landing", "opd_tokens"]

#: the kinds of response token OPD's signal is read by (:func:`token_classes`)
LANDING_CLASSES = ("first", "style", "number", "other")
#: the advantage as OPD computes it, and with each drift control (name -> drift_controls keyword arguments)
DRIFT_VARIANTS = {"raw": {}, "skip_first": {"skip_first": 1}, "skip_first_centred": {"skip_first": 1, "center": True}}


def _hinted(persona: str, lang: str, problem: Problem, reply: str, seed: int, judge) -> Optional[List[dict]]:
    user, messages = first_request(persona, lang, problem, seed)
    return hinted_messages(messages, reply, user.react(problem, reply).text, judge)


def render(tokenizer, messages: List[dict], lang: str) -> str:
    """The prompt text of ``messages``: the tokenizer's chat template (generation prompt added), or, without one, the
    kit's plain form of the user message with any system text as a paragraph before it."""
    if has_chat_template(tokenizer):
        return tokenizer.apply_chat_template(template_messages(messages), tokenize=False, add_generation_prompt=True)
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
    user = next(m["content"] for m in reversed(messages) if m["role"] == "user")
    return build_prompt((system + "\n\n" + user) if system else user, lang)


def hinted_messages(messages: List[dict], reply: str, reaction_text: str, judge=None) -> Optional[List[dict]]:
    """OPD's teacher request for one turn: ``messages`` with the judge's hint from the user's reaction appended to
    the last user message; None when the judge gives no hint (OPD drops such a turn)."""
    hint = judge_turn(reply, reaction_text, judge).hint
    return append_hint(messages, hint) if hint else None


def _fits(model, tokenizer, prompt: str, max_new_tokens: int) -> bool:
    m = max_positions(model)
    return m is None or len(encode(tokenizer, prompt)) + max_new_tokens <= m


def _decode(model, tokenizer, prompts: Sequence[Optional[str]], decoding: str, max_new_tokens: int, seed: int):
    """Replies to the prompts that fit (None for a prompt that is None or too long), in order."""
    keep = [i for i, p in enumerate(prompts) if p is not None and _fits(model, tokenizer, p, max_new_tokens)]
    gens = generate(model, tokenizer, [prompts[i] for i in keep], max_new_tokens=max_new_tokens,
                    greedy=decoding == "greedy", seed=seed) if keep else []
    out: List = [None] * len(prompts)
    for i, g in zip(keep, gens):
        out[i] = g
    return out


def _tally(persona: str, problems: Sequence[Problem], prompts, gens) -> Dict:
    """{"n", "too_long", "cut", "accepted", "correct", "tokens"} of one condition (n: the problems that had a prompt;
    cut: replies that reached ``max_new_tokens`` without ending)."""
    rows = [(p, g) for p, q, g in zip(problems, prompts, gens) if q is not None]
    done = [(p, g) for p, g in rows if g is not None]
    return {"n": len(rows), "too_long": len(rows) - len(done), "cut": sum(not g.finished for _, g in done),
            "accepted": sum(all(checks(persona, g.text).values()) for _, g in done),
            "correct": sum(is_correct(g.text, p.gold) for p, g in done),
            "tokens": round(sum(len(g.ids) for _, g in done) / len(done), 1) if done else None}


def ceiling(model, tokenizer, persona: str, lang: str, problems: Sequence[Problem], max_new_tokens: int = 320,
            decodings: Sequence[str] = ("greedy",), seed: int = 0, judge=None) -> Dict:
    """The persona's acceptance and correctness under each condition and decoding.

    Returns ``{"persona", "lang", "problems": [test.jsonl indices], DECODING: {CONDITION: {"n", "too_long", "cut",
    "accepted", "correct", "tokens"}}, "records": [{"problem", "decoding", "condition", "reply", "checks",
    "correct"}]}``: counts, not rates (``accepted / (n - too_long)`` is the acceptance); ``tokens``: the mean reply
    length in tokens. ``seed``: the sampled decoding's seed (and the users' phrasing, with each problem's index).
    """
    bad = [d for d in decodings if d not in DECODINGS]
    if bad or not decodings:
        raise ValueError(f"decodings must be some of {DECODINGS}, got {tuple(decodings)}")
    base = [first_request(persona, lang, p, seed)[1] for p in problems]
    told = [[{"role": "system", "content": preference(persona, lang)}] + m for m in base]
    out: Dict = {"persona": persona, "lang": lang, "problems": [p.index for p in problems], "records": []}
    for decoding in decodings:
        prompts = {"untrained": [render(tokenizer, m, lang) for m in base],
                   "prompted": [render(tokenizer, m, lang) for m in told]}
        gens = {c: _decode(model, tokenizer, prompts[c], decoding, max_new_tokens, seed) for c in prompts}
        hinted = [_hinted(persona, lang, p, g.text, seed, judge) if g is not None else None
                  for g, p in zip(gens["untrained"], problems)]
        prompts["hinted"] = [render(tokenizer, m, lang) if m is not None else None for m in hinted]
        gens["hinted"] = _decode(model, tokenizer, prompts["hinted"], decoding, max_new_tokens, seed)
        out[decoding] = {c: _tally(persona, problems, prompts[c], gens[c]) for c in CEILING_CONDITIONS}
        out["records"] += [{"problem": p.index, "decoding": decoding, "condition": c, "reply": g.text,
                            "checks": checks(persona, g.text), "correct": is_correct(g.text, p.gold)}
                           for c in CEILING_CONDITIONS for p, g in zip(problems, gens[c]) if g is not None]
    return out


# --------------------------------------------------------------------------- where OPD's signal lands
_LATIN_WORD = re.compile(r"[A-Za-z]+")
_DIGITS = re.compile(r"\d+")


def objected_spans(persona: str, reply: str) -> List[Tuple[int, int]]:
    """Character spans of what the persona objects to in ``reply``: the student's AI-style markers, the no-LaTeX
    user's LaTeX, the Chinese user's Latin words; none for the teacher and the answer-first user (what they miss is
    absent, not a span)."""
    if persona == "student":
        patterns = list(AI_STYLE_MARKERS.values())
    elif persona == "no_latex":
        patterns = [LATEX_PATTERN]
    elif persona == "chinese":
        patterns = [_LATIN_WORD]
    else:
        patterns = []
    return [m.span() for p in patterns for m in p.finditer(reply) if m.end() > m.start()]


def token_classes(tokens: Sequence[dict], persona: str, reply: str) -> List[str]:
    """Each response token's kind (:data:`LANDING_CLASSES`), from its character span ``start``, ``end`` in ``reply``:
    the first token; else inside an objected span (:func:`objected_spans`); else over a digit; else other."""
    spans = objected_spans(persona, reply)
    digits = [m.span() for m in _DIGITS.finditer(reply)]
    out = []
    for k, t in enumerate(tokens):
        a, b = t["start"], max(t["end"], t["start"] + 1)
        overlaps = lambda ss: any(s < b and a < e for s, e in ss)  # noqa: E731
        out.append("first" if k == 0 else "style" if overlaps(spans) else "number" if overlaps(digits) else "other")
    return out


def landing(turns: Sequence[Tuple[str, Sequence[dict]]], persona: str) -> Dict:
    """Where OPD's advantage lands over ``turns`` ((reply, tokens of :func:`~claw_lib.signals.opd.explain_turn`)):
    for each :data:`DRIFT_VARIANTS`, per class of :data:`LANDING_CLASSES`: ``n`` tokens, ``mean`` advantage (nats),
    ``negative_share`` (the class's share of the negative advantage mass, sum of min(a, 0)) and ``most_negative``
    (replies whose most negative token is of the class). Turns without tokens are skipped."""
    out: Dict = {}
    for name, kw in DRIFT_VARIANTS.items():
        per = {c: {"sum": 0.0, "neg": 0.0, "n": 0, "most_negative": 0} for c in LANDING_CLASSES}
        for reply, tokens in turns:
            if not tokens:
                continue
            adv = drift_controls(np.array([t["advantage"] for t in tokens], np.float64), **kw)
            kinds = token_classes(tokens, persona, reply)
            for kind, a in zip(kinds, adv.tolist()):
                per[kind]["sum"] += a
                per[kind]["neg"] += min(a, 0.0)
                per[kind]["n"] += 1
            per[kinds[int(np.argmin(adv))]]["most_negative"] += 1
        total = sum(v["neg"] for v in per.values())
        out[name] = {c: {"n": v["n"], "mean": round(v["sum"] / v["n"], 4) if v["n"] else None,
                         "negative_share": round(v["neg"] / total, 4) + 0.0 if total < 0 else None,  # never -0.0
                         "most_negative": v["most_negative"]} for c, v in per.items()}
    return out


def opd_tokens(model, tokenizer, persona: str, lang: str, problem: Problem, reply: str, seed: int = 0,
               judge=None) -> Dict:
    """OPD's per-token view of one untrained reply, with the same request and reaction :func:`ceiling` used
    (:func:`first_request`): ``{"hint": the judge gave one, "too_long": the hinted prompt and the
    reply do not fit the model's positions, "tokens": explain_turn's tokens (empty unless both are fine)}``."""
    user, messages = first_request(persona, lang, problem, seed)
    reaction = user.react(problem, reply).text
    hinted = hinted_messages(messages, reply, reaction, judge)
    out = {"hint": hinted is not None, "too_long": False, "tokens": []}
    if hinted is None:
        return out
    if not _fits(model, tokenizer, render(tokenizer, hinted, lang), len(encode(tokenizer, reply)) + 1):
        out["too_long"] = True
        return out
    out["tokens"] = explain_turn(model, tokenizer, messages[-1]["content"], reply, reaction, judge=judge)["tokens"]
    return out
