"""The reviser stage (notebooks 10 and 11): an instruct LM reads the correction, the alignment localises.

The rules (:mod:`claw_lib.signals.rules`) localise well when the correction restates the answer and read free text
poorly. Here an instruct LM does the reading: given the question (when known), the output and the user's reply, it
writes the output as the user wants it, changing as little as possible. The kit's own cost matrix and DP then align
output <-> revision (:func:`revision_rewards`): a word kept gets the match reward, a word changed or deleted the
reject reward (continuous: graded by the recorded cost).

What makes it usable on a small model, pair by pair (:meth:`Reviser.revise`, settings
:class:`~claw_lib.config.ReviserConfig`):

1. **Does the reply correct anything?** A pure affirmation ("对，谢谢！", :func:`~claw_lib.text.corrections.
   clean_correction`) does not, nor does a reply that starts with one ("没错，而且…", "Right, and…": the rules read
   it as an elaboration, where only a negation or a differing number contradicts): the rules' rewards, source "rules".
   A reply that only asks something (``questions``: it ends with a question mark) corrects nothing: no word negative,
   source "rules" (a rule decided). With ``gate > 0`` the LM is asked yes / no first, and ``P(yes) < gate`` means nothing to correct (thanks, a
   follow-up question, an aside): no word negative.
2. **Constrained copying** (``scope="sentence"``): in a long output the LM rewrites only the sentences the rules find
   the correction addresses (:func:`~claw_lib.signals.rules.addressed_sentences`); every other character is copied
   from the output as it is. A one-sentence output is rewritten whole.
3. **Candidates**: the greedy rewrite and ``samples`` sampled ones, every pair's prompts in batches.
4. **Validation** (:func:`check_candidate`): not empty, readable, not far longer than the text, different from it in
   at least one content word (a comma is no revision), and at least ``min_similarity`` similar to it (difflib ratio of the characters): a copy of the correction, a
   rewrite, garbage or an echo of the prompt fail, each with its reason.
5. **Score**: agreement with the correction (:func:`agreement`) minus ``edit_weight`` x the edit size; the best valid
   candidate of each text is its revision.
6. **Retry** once with a second, shorter prompt where no text got a valid candidate; then a clean **fallback** to the
   rules, for that pair alone.
7. **Combine** (``combine``): the revision's reading alone, the rules first (the revision where they find nothing;
   the LM is asked only for those pairs), or the union of both.

Every result says which path produced it: ``info["source"]`` is "revision" (the LM's reading: a revision, or nothing
to correct) or "rules" (the fallback, or a pure affirmation); ``info["revision"]`` holds the revision (None when there
is none) and ``info["reviser"]`` the candidates and the reasons (:meth:`Revision.to_dict`).

The LM: anything with ``chat``, ``yes_probability`` and ``length`` (:mod:`claw_lib.signals.reviser_lm`: a local HF
instruct model, an OpenAI-compatible URL, either cached in a file); :func:`load_reviser` takes a name, folder or URL.
Which LM revises by default (``RewardConfig.reviser.model = "auto"``): :func:`auto_reviser`.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import asdict, dataclass, field
from typing import List, Optional, Sequence, Tuple

import numpy as np

from ..alignment.texts import align_texts
from ..config import ALIGNMENT_STRATEGIES, SMALL_MODEL_PARAMS, RewardConfig, ReviserConfig, is_url
from ..prompts import has_chat_template
from ..text.claims import sentence_spans
from ..text.corrections import CONTENT_KINDS, clean_correction, guess_lang, value_key, word_kind
from ..text.tokens import check_text, tokenize
from .judges import _new_question
from .localiser import learned_rewards
from .reviser_lm import CachedLM, LocalLM, RemoteLM
from .rewards import TokenRewards, affirmed_reward, kept_reward, rejected_reward, sentence_rewards, token_rewards
from .rules import _units, omitted_at

__all__ = ["Candidate", "Revision", "Reviser", "load_reviser", "auto_reviser", "check_candidate", "similarity",
           "agreement", "revision_rewards", "revised_rewards", "batch_rewards", "run_reviser", "wants_base", "SOURCES",
           "LocalLM", "RemoteLM", "CachedLM"]

#: which path produced a result (``info["source"]``)
SOURCES = ("revision", "rules")

# --------------------------------------------------------------------------- prompts
_GATE = ("Question: {q}\nAnswer: {o}\nThe user replied: {k}\n\nDoes the user's reply say that something in the "
         "answer is wrong, or ask for something in it to be changed? Answer with one word: yes or no.")
#: the first prompt, for one sentence of a longer answer and for a whole answer
_REVISE = {
    "sentence": ("Question: {q}\nAnswer: {o}\nThe user replied: {k}\n\nOne sentence of the answer:\n{s}\n\nRewrite "
                 "this sentence so that it agrees with the user's reply. Change only the words the reply says are "
                 "wrong and copy the rest exactly. Write only the rewritten sentence."),
    "output": ("Question: {q}\nAnswer: {o}\nThe user replied: {k}\n\nRewrite the answer so that it agrees with the "
               "user's reply. Change only the words the reply says are wrong and copy the rest exactly. Write only "
               "the corrected answer."),
}
#: the retry: shorter, in the output's language, the mistake taken as given
_RETRY = {
    "en": ("The user says this text has a mistake.\n\nText: {s}\nThe user's correction: {k}\n\nWrite the text again "
           "with the mistake fixed, changing as few words as possible. Reply with the fixed text only."),
    "zh": ("用户说下面这段话有错误。\n\n原文：{s}\n用户的纠正：{k}\n\n请把原文重写一遍，只改正错误，尽量少改动，其余的字保持不变。"
           "只输出改正后的原文。"),
}


def _messages(template: str, question: Optional[str], output: str, correction: str, text: str) -> List[dict]:
    return [{"role": "user", "content": template.format(q=question or "(not given)", o=output, k=correction,
                                                        s=text)}]


# --------------------------------------------------------------------------- candidates
def similarity(a: str, b: str) -> float:
    """difflib's ratio of the characters of two texts, case-folded, white space collapsed (1: equal, 0: nothing in
    common)."""
    a, b = (" ".join(x.casefold().split()) for x in (a, b))
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


_LABEL = re.compile(r"^\s*(?:\*\*)?(?:corrected|rewritten|revised|fixed)?\s*(?:answer|response|sentence|text)\s*"
                    r"(?:\*\*)?\s*[:：]\s*|^\s*(?:修改后的|改正后的|纠正后的|重写后的)?(?:回答|答案|句子|原文)\s*[:：]\s*",
                    re.IGNORECASE)
_QUOTES = "\"'“”「」‘’`"


def _strip(reply: str, text: str) -> str:
    """A reply as a candidate: code fences, a leading label ("Corrected answer:", "原文："), wrapping quotes dropped;
    when ``text`` is one paragraph (one sentence), the reply's paragraph (sentence) most similar to it."""
    t = _unquote(_LABEL.sub("", reply.strip().replace("```", "").strip(), count=1).strip())
    if "\n\n" not in text.strip() and "\n\n" in t:
        t = max((p.strip() for p in t.split("\n\n") if p.strip()), key=lambda p: similarity(p, text), default="")
    if len(sentence_spans(text)) == 1 and len(sentence_spans(t)) > 1:
        t = max((t[a:b] for a, b in sentence_spans(t)), key=lambda p: similarity(p, text))
    return _unquote(t)


def _unquote(t: str) -> str:
    return t[1:-1].strip() if len(t) >= 2 and t[0] in _QUOTES and t[-1] in _QUOTES else t


@dataclass
class Candidate:
    """One reply of the LM judged as a revision. text: the candidate (stripped); similarity to the text it revises
    (0-1); agreement with the correction (0-1); score: agreement - edit_weight x (1 - similarity); why: "ok" or why
    it was refused ("empty", "unreadable", "too long", "unchanged", "no content word changed", "no words", "copied the
    correction", "rewrote too much")."""

    text: str
    similarity: float
    agreement: float
    score: float
    why: str


def _content(text: str) -> set:
    return {value_key(t.text) for t in tokenize(text) if word_kind(t.text) in CONTENT_KINDS}


def agreement(candidate: str, text: str, correction: str, question: Optional[str] = None) -> float:
    """How well a candidate follows the correction (cleaned: lead-ins such as "不对" dropped), 0-1: the mean of (a) the
    share of the content words it adds (not in ``text``) that the correction says and (b) the share of the content words the correction brings (not in the
    text or the question) that it says; 0.5 when neither is defined (it adds nothing and the correction brings
    nothing)."""
    o, k, c = _content(text), _content(clean_correction(correction).text), _content(candidate)
    q = _content(question) if question else set()
    added, brought = c - o, k - o - q
    parts = []
    if added:
        parts.append(len(added & k) / len(added))
    if brought:
        parts.append(len(brought & c) / len(brought))
    return float(np.mean(parts)) if parts else 0.5


def _content_seq(text: str) -> list:
    return [value_key(t.text) for t in tokenize(text) if word_kind(t.text) in CONTENT_KINDS]


def _fold(t: str) -> str:
    return " ".join(t.casefold().split())


def check_candidate(reply: str, text: str, correction: str, settings: ReviserConfig,
                    question: Optional[str] = None) -> Candidate:
    """A reply of the LM judged as a revision of ``text`` (a sentence of the output, or the output): the checks of
    the module docstring, in order; the first that fails is ``why``."""
    t = _strip(reply, text)
    try:
        check_text(t)
        readable = True
    except ValueError:
        readable = False
    sim = similarity(t, text) if readable else 0.0
    why = "ok"
    if not t:
        why = "empty"
    elif not readable:
        why = "unreadable"
    elif len(t) > 2 * len(text) + 50:
        why = "too long"
    elif _fold(t) == _fold(text):
        why = "unchanged"
    elif _content_seq(t) == _content_seq(text):
        why = "no content word changed"  # a comma, a space, a function word: nothing the correction could reject
    elif not any(ch.isalnum() for ch in t):
        why = "no words"
    elif sim < settings.min_similarity:
        why = "copied the correction" if similarity(t, correction) >= sim else "rewrote too much"
    agree = agreement(t, text, correction, question) if why == "ok" else 0.0
    return Candidate(t, round(sim, 4), round(agree, 4), round(agree - settings.edit_weight * (1 - sim), 4), why)


# --------------------------------------------------------------------------- the stage
@dataclass
class Revision:
    """The reviser's answer for one pair. corrects: the reply corrects something; p_corrects: the gate's P(yes)
    (None: not asked); revision: the text the alignment uses (the output itself when there is nothing to correct;
    None: no usable revision, the rules decide); why: "revised", "nothing to correct", "affirmation", "affirmed" (the
    reply starts with an affirmation: the rules decide), "a question" (``questions``: no word negative), "rules first" (``combine="rules_first"`` and the rules found a
    contradiction: the LM was not asked) or "no usable candidate"; spans: the [start, end) character spans of the output that were rewritten; candidates: every
    candidate of every attempt, span by span; attempts: prompts tried."""

    output: str
    correction: str
    question: Optional[str]
    corrects: bool
    p_corrects: Optional[float]
    revision: Optional[str]
    why: str
    spans: List[Tuple[int, int]] = field(default_factory=list)
    candidates: List[Candidate] = field(default_factory=list)
    attempts: int = 0

    def to_dict(self) -> dict:
        return {**asdict(self), "spans": [list(s) for s in self.spans],
                "candidates": [asdict(c) for c in self.candidates]}


def _spans(output: str, spans: Optional[Sequence[Tuple[int, int]]]) -> List[Tuple[int, int]]:
    """The spans to rewrite, checked and sorted; None or empty: the whole output (stripped of outer space)."""
    if not spans:
        a = len(output) - len(output.lstrip())
        return [(a, len(output.rstrip()))] if output.strip() else []
    out = sorted((int(a), int(b)) for a, b in spans)
    for (a, b), nxt in zip(out, out[1:] + [(len(output), len(output))]):
        if not 0 <= a < b <= nxt[0] <= len(output):
            raise ValueError(f"reviser spans must be ordered, non-overlapping and inside the output, got {spans}")
    return out


class Reviser:
    """The reviser stage on an LM (:mod:`claw_lib.signals.reviser_lm`, or anything with their ``chat``,
    ``yes_probability`` and ``length`` methods, such as a test's scripted LM); settings:
    :class:`~claw_lib.config.ReviserConfig`."""

    def __init__(self, lm, settings: Optional[ReviserConfig] = None):
        self.lm, self.settings = lm, settings or ReviserConfig()

    def revise(self, pairs: Sequence[Tuple]) -> List[Revision]:
        """pairs: (question or None, output, correction[, spans]): spans the [start, end) character spans of the
        output to rewrite (absent or None: the whole output). One :class:`Revision` per pair; the LM is called in
        batches: the gate for all pairs at once, then every text's candidates, then the retry."""
        st = self.settings
        res = [Revision(p[1], p[2], p[0], True, None, None, "no usable candidate",
                        _spans(p[1], p[3] if len(p) > 3 else None)) for p in pairs]
        ask = []
        for r in res:
            cc = clean_correction(r.correction)
            if cc.affirmation or cc.affirmed or not r.spans:  # the rules read these (elaboration)
                r.corrects, r.revision = False, r.output
                r.why = "nothing to correct" if not r.spans else "affirmation" if cc.affirmation else "affirmed"
            elif st.questions and _new_question(r.correction):  # a follow-up question: nothing to correct
                r.corrects, r.revision, r.why = False, r.output, "a question"
            else:
                ask.append(r)
        if st.gate > 0 and ask:
            probs = self.lm.yes_probability([_messages(_GATE, r.question, r.output, r.correction, "") for r in ask],
                                            st.batch_size)
            for r, p in zip(ask, probs):
                r.p_corrects = float(p)
                if p < st.gate:
                    r.corrects, r.revision, r.why = False, r.output, "nothing to correct"
        todo = [r for r in ask if r.corrects]
        self._attempt(todo, lambda r, whole: _REVISE["output" if whole else "sentence"])
        if st.retry:
            self._attempt([r for r in todo if r.revision is None],
                          lambda r, whole: _RETRY["zh" if guess_lang(r.output) == "zh" else "en"])
        return res

    def _attempt(self, todo: List[Revision], template) -> None:
        """One prompt for every span of every pair of ``todo``: candidates checked, the best valid one of each span
        kept; a pair with at least one span revised gets its revision (the other spans as they were)."""
        st = self.settings
        jobs = [(r, a, b) for r in todo for a, b in r.spans]
        if not jobs:
            return
        msgs, budgets = [], []
        for r, a, b in jobs:
            whole = len(r.spans) == 1 and r.output[a:b] == r.output.strip()
            msgs.append(_messages(template(r, whole), r.question, r.output, r.correction, r.output[a:b]))
            budgets.append(min(st.max_new_tokens, int(1.5 * self.lm.length(r.output[a:b])) + 16))
        replies = self.lm.chat(msgs, budgets, st.samples, st.temperature, st.seed, st.batch_size)
        new = {id(r): {} for r in todo}
        for (r, a, b), texts in zip(jobs, replies):
            cands = [check_candidate(t, r.output[a:b], r.correction, st, r.question) for t in texts]
            r.candidates += cands
            ok = [c for c in cands if c.why == "ok"]
            if ok:
                new[id(r)][(a, b)] = max(ok, key=lambda c: c.score).text
        for r in todo:
            r.attempts += 1
            if new[id(r)]:
                r.revision, r.why = _splice(r.output, new[id(r)]), "revised"


def _splice(output: str, new: dict) -> str:
    """``output`` with each span ``(a, b)`` of ``new`` replaced by its text (spans do not overlap)."""
    out, last = [], 0
    for (a, b), text in sorted(new.items()):
        out += [output[last:a], text]
        last = b
    return "".join(out) + output[last:]


# --------------------------------------------------------------------------- which LM
def load_reviser(spec: str, device: str = "cpu", dtype=None, settings: Optional[ReviserConfig] = None,
                 model: str = "") -> Reviser:
    """A :class:`Reviser` on ``spec``: an ``http(s)://`` URL (an OpenAI-compatible endpoint; ``model`` the name to
    ask for) or a Hugging Face name / folder of a causal LM with a chat template (loaded on ``device``). ValueError
    (one line) for an endpoint that does not answer or a model without a chat template."""
    if is_url(spec):
        return Reviser(RemoteLM(spec, model), settings)
    from ..models.lm import load_causal_lm  # lazy: models.lm imports torch: a local reviser only

    return Reviser(LocalLM(*load_causal_lm(spec, device=device, dtype=dtype)), settings)


def auto_reviser(settings: ReviserConfig, model=None, tokenizer=None, adapters_off: bool = False,
                 device: str = "cpu", dtype=None) -> Optional[Reviser]:
    """The reviser ``settings.model`` names, or None (the rules alone). "none": None; "auto": the given
    ``model`` (a training run's frozen base policy; ``adapters_off``: the policy with its LoRA adapters switched off)
    when it has a chat template and over :data:`~claw_lib.config.SMALL_MODEL_PARAMS` parameters, else None (the tiny
    GPT: the rules); "base": that model, refused (ValueError) without one or without a chat template; anything else
    a name, folder or URL for :func:`load_reviser`."""
    name = settings.model
    if name == "none":
        return None
    if name in ("auto", "base"):
        usable = model is not None and has_chat_template(tokenizer)
        if name == "auto":
            from ..models.lora import count_parameters  # lazy: models.lora imports torch: a local reviser only

            big = usable and count_parameters(model) > SMALL_MODEL_PARAMS
            return Reviser(LocalLM(model, tokenizer, adapters_off), settings) if big else None
        if not usable:
            raise ValueError("reward.reviser.model 'base' needs the run's policy to be an instruct model with a chat "
                             "template; give a reviser model or URL, or 'none'")
        return Reviser(LocalLM(model, tokenizer, adapters_off), settings)
    return load_reviser(name, device, dtype, settings, settings.remote_model)


def wants_base(cfg, n_params: int) -> bool:
    """Whether a training run (a PPOConfig ``cfg``) on a policy of ``n_params`` parameters revises with its frozen
    base: an alignment strategy, and ``reward.reviser.model`` "base", or "auto" over
    :data:`~claw_lib.config.SMALL_MODEL_PARAMS` (the run then holds the base: LoRA's adapter-disabled view, or a frozen
    copy)."""
    name = cfg.reward.reviser.model
    return cfg.strategy in ALIGNMENT_STRATEGIES and cfg.reward.localiser != "learned" and (
        name == "base" or name == "auto" and n_params > SMALL_MODEL_PARAMS)


def run_reviser(cfg, ref, tokenizer) -> Optional[Reviser]:
    """The reviser of a training run (a PPOConfig ``cfg``; ref: the run's frozen reference, a model or the
    adapter-disabled view of the policy, :class:`~claw_lib.models.lora.AdapterDisabled`; None without one): None for
    the strategies that read no alignment and where :func:`auto_reviser` says so (the tiny GPT)."""
    from ..models.lora import AdapterDisabled  # lazy: models.lora imports torch: a local reviser only

    if cfg.strategy not in ALIGNMENT_STRATEGIES or cfg.reward.localiser == "learned":
        return None
    base, off = (ref.model, True) if isinstance(ref, AdapterDisabled) else (ref, False)
    rv = auto_reviser(cfg.reward.reviser, base, tokenizer, adapters_off=off, device=cfg.reward.align.device)
    _check_localiser(cfg.reward, cfg.strategy, rv)
    return rv


def batch_rewards(rows: Sequence[dict], strategy: str, config: RewardConfig, encoder=None, judge=None,
                  reviser: Optional[Reviser] = None, response_ids=None) -> List[TokenRewards]:
    """The token rewards of a batch of responses, one :class:`TokenRewards` per row (rows: ``output``,
    ``correction``, ``question``): with ``config.localiser`` "learned" from the learned localiser
    (:func:`~claw_lib.signals.localiser.learned_rewards`); through the reviser (:func:`revised_rewards`, the LM in
    batches) when one is given and the strategy reads an alignment, else :func:`~claw_lib.signals.rewards.token_rewards` row by row
    (response_ids: per row, the policy's ids, for perplexity). What the training loop and the TRL engine call."""
    if config.localiser == "learned" and strategy in ALIGNMENT_STRATEGIES:  # RewardConfig.localiser
        return learned_rewards(rows, strategy, config, encoder)
    _check_localiser(config, strategy, reviser)
    if reviser is not None and strategy in ALIGNMENT_STRATEGIES:
        return revised_rewards(rows, strategy, reviser, config, encoder)
    ids = response_ids if response_ids is not None else [None] * len(rows)
    return [token_rewards(r["output"], r["correction"], strategy, config, encoder=encoder, judge=judge,
                          question=r.get("question"), response_ids=i) for r, i in zip(rows, ids)]


def _check_localiser(config: RewardConfig, strategy: str, reviser: Optional[Reviser]) -> None:
    """``localiser`` "reviser" without a reviser LM is refused (ValueError naming the setting)."""
    if config.localiser == "reviser" and reviser is None and strategy in ALIGNMENT_STRATEGIES:
        raise ValueError("reward.localiser 'reviser' needs a reviser LM: set reward.reviser.model (--reviser "
                         "MODEL|URL), or use localiser 'rules' or 'learned'")


# --------------------------------------------------------------------------- rewards (the formulas: signals/rewards.py)
def revision_rewards(output: str, revision: str, strategy: str = "binary", config: Optional[RewardConfig] = None,
                     encoder=None) -> TokenRewards:
    """Token rewards of ``output`` (n words) from its revision: the kit's cost matrix and DP align output <->
    revision. A word *kept* (matched with an equal word, :func:`~claw_lib.text.corrections.value_key`) gets ``match``
    (continuous: ``a - b C`` clipped, never below ``absent``: :func:`~claw_lib.signals.rewards.kept_reward`); a word
    *changed* (matched with another word, or replaced) or *deleted* gets ``reject`` (continuous:
    :func:`~claw_lib.signals.rewards.rejected_reward`, a pair the cost calls close changed all the same, "1914" /
    "1916": ``lo``); punctuation is never negative
    (``absent`` when not kept), except inside a name or code that is changed: with ``exact`` such a name is wrong as a
    whole, its initials and dots too ("J. R. R. Tolkien" -> "J. K. Rowling", the rules' ``_units``). With ``omissions`` the word where the revision inserts words is charged as the rules
    charge it (:func:`~claw_lib.signals.rules.omitted_at`). "sentence": ``reject`` on every word if any word is
    negative, else ``match``. info["evidence"]: per word "kept", "changed", "deleted", "punct", "same name" or "omitted";
    info["clean_correction"]: the revision (what the output was aligned with)."""
    cfg = config or RewardConfig()
    if strategy not in ALIGNMENT_STRATEGIES:
        raise ValueError(f"the reviser gives {', '.join(ALIGNMENT_STRATEGIES)} rewards, not {strategy!r}")
    tokens = tokenize(output, cfg.align.max_chars)
    ta = align_texts(output, revision, cfg.align, encoder=encoder, output_tokens=tokens)
    n = len(tokens)
    why, r = [], np.zeros(n)
    for i, o in enumerate(ta.alignment.op_for_output()):
        kept = o.op == "match" and value_key(tokens[i].text) == value_key(ta.correction_tokens[o.j].text)
        if kept:
            why.append("kept")
            r[i] = kept_reward(strategy, o.cost, cfg)
        elif word_kind(tokens[i].text) == "punct":
            why.append("punct")
            r[i] = cfg.absent
        else:
            why.append("deleted" if o.op == "delete" else "changed")
            r[i] = rejected_reward(strategy, o.cost, cfg, deleted=o.op == "delete")
    units = _units(tokens, output, [word_kind(t.text) for t in tokens]) if cfg.exact else []
    for unit in units:  # a name or code is wrong as a whole
        bad = [i for i in unit if why[i] in ("changed", "deleted")]
        for i in (unit if bad else ()):
            if why[i] in ("kept", "punct"):
                why[i], r[i] = "same name", min(r[j] for j in bad)
    if cfg.omissions and n:
        om = omitted_at(ta) & (np.array(why) != "punct")
        r[om] = rejected_reward(strategy, 0.0, cfg, deleted=True)
        why = ["omitted" if om[i] else w for i, w in enumerate(why)]
    rejected = r < 0
    if strategy == "sentence":
        r = sentence_rewards(rejected, cfg)
    return TokenRewards(output, strategy, tokens, r.astype(np.float64), rejected, ta,
                        {"evidence": why, "clean_correction": revision})


def _unchanged(output: str, strategy: str, cfg: RewardConfig) -> TokenRewards:
    """Nothing to correct: every word the match reward (continuous: ``hi``), none negative, no alignment needed."""
    tokens = tokenize(output, cfg.align.max_chars)
    n = len(tokens)
    value = affirmed_reward(strategy, cfg)
    return TokenRewards(output, strategy, tokens, np.full(n, value, dtype=np.float64), np.zeros(n, bool), None,
                        {"evidence": ["kept"] * n, "clean_correction": output})


def _addressed_spans(output: str, rules: TokenRewards) -> Optional[List[Tuple[int, int]]]:
    """The character spans of the sentences the rules found the correction addresses, when that is a proper subset of
    a long output's sentences; None (the whole output) otherwise."""
    sents = sentence_spans(output)
    addressed = rules.info.get("addressed_sentences")
    if len(sents) < 2 or not addressed or len(addressed) >= len(sents):
        return None
    return [sents[k] for k in addressed if k < len(sents)]


def revised_rewards(rows: Sequence[dict], strategy: str, reviser: Reviser, config: Optional[RewardConfig] = None,
                    encoder=None, rules: Optional[Sequence[TokenRewards]] = None) -> List[TokenRewards]:
    """Token rewards of many pairs through the reviser, one :class:`TokenRewards` per row, in order (rows: dicts
    with ``output``, ``correction`` and optionally ``question``); the LM is called in batches. The rules read every
    pair first (:func:`~claw_lib.signals.rewards.token_rewards`): their addressed sentences are what the LM rewrites
    (``scope="sentence"``), and their rewards are the fallback of a pair without a usable revision. info: ``source``
    ("revision" | "rules"), ``revision`` (the text, or None) and ``reviser`` (:meth:`Revision.to_dict`); a bad row
    raises ValueError naming it. rules: the rules' :class:`TokenRewards` of every row when the caller has them."""
    cfg = config or RewardConfig()
    if strategy not in ALIGNMENT_STRATEGIES:
        raise ValueError(f"the reviser gives {', '.join(ALIGNMENT_STRATEGIES)} rewards, not {strategy!r}")
    for k, r in enumerate(rows):
        if not isinstance(r, dict) or not isinstance(r.get("output"), str) or not isinstance(r.get("correction"), str):
            raise ValueError(f"row {k}: needs string fields 'output' and 'correction'")
    if rules is None:
        rules = [token_rewards(r["output"], r["correction"], strategy, cfg, encoder=encoder,
                               question=r.get("question")) for r in rows]
    elif len(rules) != len(rows):
        raise ValueError(f"rules has {len(rules)} entries for {len(rows)} rows")
    st = reviser.settings  # the reviser's settings (cfg.reviser made it, or the caller)
    question = [st.questions and _new_question(r["correction"]) for r in rows]  # decided before the rules come first
    ask = [k for k, rl in enumerate(rules) if question[k] or not (st.combine == "rules_first" and rl.rejected.any())]
    asked = reviser.revise([(rows[k].get("question"), rows[k]["output"], rows[k]["correction"],
                             _addressed_spans(rows[k]["output"], rules[k]) if st.scope == "sentence" else None)
                            for k in ask])
    revs = [Revision(r["output"], r["correction"], r.get("question"), True, None, None, "rules first") for r in rows]
    for k, rv in zip(ask, asked):  # rules_first: where the rules find a contradiction the LM is not asked
        revs[k] = rv
    out = []
    for row, rl, rv in zip(rows, rules, revs):
        if rv.why in ("affirmation", "affirmed", "rules first") or rv.revision is None:
            tr, source = rl, "rules"
        elif not rv.corrects or rv.revision == row["output"]:  # the LM's gate, or the question rule
            tr, source = _unchanged(row["output"], strategy, cfg), "rules" if rv.why == "a question" else "revision"
        else:
            tr, source = _combined(revision_rewards(row["output"], rv.revision, strategy, cfg, encoder), rl,
                                   st.combine), "revision"
        tr.info.update({"source": source, "revision": rv.revision, "reviser": rv.to_dict()})
        out.append(tr)
    return out


def _combined(rev: TokenRewards, rules: TokenRewards, combine: str) -> TokenRewards:
    """A revision's rewards combined with the rules' (``ReviserConfig.combine``): "union" takes the lower reward of
    both on every word; "revision" and "rules_first" keep the revision's (a pair where the rules found a contradiction
    never reaches here under "rules_first": :func:`revised_rewards` keeps the rules' reading without asking the LM)."""
    if combine == "union":
        rev.rewards = np.minimum(rev.rewards, rules.rewards)
        rev.rejected = rev.rejected | rules.rejected
        rev.info["rules_evidence"] = rules.info.get("evidence")
    return rev
