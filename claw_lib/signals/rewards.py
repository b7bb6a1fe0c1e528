"""From an alignment (or a judge LM) to one reward per output token (notebooks 03, 04, 05b, 07).

Every strategy returns a :class:`TokenRewards` with exactly one finite reward per word token of
the model output, in order, whatever the input (empty texts, emoji, affirmations, vague replies).

* ``binary`` (article, strategy 1): match -> ``match`` (+0.5), replace / delete / negated -> -1.
  Inserted correction words attach to no output token. (The article's base reward of 0.1 is
  overwritten by some op for every token of a complete alignment, so it has no parameter.)
* ``continuous`` (strategy 2, done properly): the alignment records ``j``, so a substituted token
  gets ``a - b * C[i, j]``, clipped to ``[lo, hi]`` = [-1, 0.5] by default (PPO-friendly, same
  range as binary); delete and negated -> ``lo``.
* ``perplexity`` (strategy 3): a judge LM scores each output sub-token with the correction in
  its context; ``contrast=True`` subtracts the score without the correction (cancels tokens that
  are merely rare). Sub-token log-probs are summed into words (log p of the word); ``reward = clip(gap / scale, -1, 1)``
  (contrast) or ``clip(1 + logp / scale, -1, 1)`` (correction only).
* ``sentence``: one scalar for the whole response (``match`` if nothing is rejected, else -1),
  spread over its tokens: the A/B control of the article's section 8.

Before aligning, the correction is cleaned (:func:`claw_lib.corrections.clean_correction`):
lead-ins and asides are dropped; an affirmation ("对，谢谢！") gives every token the match reward;
a vague reply with nothing left ("不太对吧。") gives every token 0 (no token-level information).
Words the correction explicitly negates ("不是北京") reject the output words that match them.

Evidence, not absence (issue 16; each rule a field of :class:`~claw_lib.config.RewardConfig`,
defaults chosen on the dev split of ``data/probe_v2.jsonl``, notebook 10). A word the correction
does not mention is not wrong. Every output word is

* *confirmed*: matched, or repeated anywhere in the correction (``reorder`` also tries the
  correction with its copula turned round: "巴黎才是首都" -> "首都才是巴黎");
* *contradicted*: negated ("不是北京"); a number / code / name that differs from the one it is
  paired with, or from one the correction brings anywhere (``exact``, ``alternatives``: "1946" /
  "1945", "HNO2" / "HNO3", "Only 50."); replaced by a content word whose cost is above the neutral
  band and at most ``unrelated_cost``; a copy of a contradicted word, or a part of a contradicted
  name ("J. R. R. Tolkien");
* or *absent*: deleted, paired with a function word, a word of another kind or an unrelated one,
  or a paraphrase inside the neutral band: reward ``absent`` (0), no signal.

Binary: confirmed ``match``, contradicted ``reject``, absent ``absent``. Continuous: ``a - b C`` on
the recorded pair (confirmed words never below ``absent``), a contradiction never above 0 (``lo``
when the cost calls the pair close but exactness says it differs), negated words and omissions
``lo``. ``info["evidence"]`` says why each word got its reward. ``ARTICLE_RULES`` switches every
rule off (the article's replace / delete -> reject), for the tutorials that show it and for
comparison.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..alignment.dp import align
from ..alignment.texts import TextAlignment, align_texts
from ..config import REWARD_STRATEGIES as STRATEGIES
from ..config import RewardConfig
from ..config import validate
from ..text.claims import clause_spans, polarity_flips, quoted_spans, sentence_spans, swap_items
from ..text.langs import warn_language_mismatch
from ..text.corrections import (CONTENT_KINDS, EXACT_KINDS, clean_correction, guess_lang, invert_copula,
                                negated_spans, value_key, word_kind)
from ..text.tokens import Token, check_text, subtokens_to_words, tokenize

__all__ = ["TokenRewards", "token_rewards", "omitted_at", "fuse_rewards", "STRATEGIES", "ARTICLE_RULES",
           "addressed_sentences", "sentence_of"]

#: RewardConfig overrides that switch off every rule of issue 16: the article's rule (replace and
#: delete -> reject, the cost decides match vs replace), as the kit had it before
ARTICLE_RULES = {"evidence": False, "exact": False, "neutral_band": 0.0, "reorder": False, "keep_context": False,
                 "alternatives": "none", "elaboration": False, "rewrite_share": 0.0, "local": False, "quotes": False,
                 "polarity": False, "swaps": False, "premise": False}
_ALTERNATIVES = ("none", "exact", "all")


@dataclass
class TokenRewards:
    """output: the text; tokens: its word tokens (n); rewards: (n,) float64; rejected: (n,) bool
    (contradicted: replaced, negated, differing, an alternative; deleted under ``ARTICLE_RULES``;
    omissions when charged); alignment: the alignment used (None for perplexity and
    affirmation/vague replies); info: strategy-specific details (``evidence``: per word, why it got
    its reward)."""

    output: str
    strategy: str
    tokens: List[Token]
    rewards: np.ndarray
    rejected: np.ndarray
    alignment: Optional[TextAlignment] = None
    info: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """The CLI's JSON: strategy, tokens (text, start, end, reward), the cleaned correction that was
        aligned and its tokens (the ``j`` of every op indexes them), and the ops."""
        ta = self.alignment
        return {
            "strategy": self.strategy,
            "tokens": [{**t.to_dict(), "reward": round(float(r), 6)} for t, r in zip(self.tokens, self.rewards)],
            "clean_correction": self.info.get("clean_correction"),
            "correction_tokens": [t.to_dict() for t in ta.correction_tokens] if ta else [],
            "ops": [o.to_dict() for o in ta.alignment.ops] if ta else [],
        }


def _negated_j(ta: TextAlignment, correction: str) -> set:
    spans = negated_spans(correction)
    return {j for j, t in enumerate(ta.correction_tokens) if any(t.start < e and t.end > s for s, e in spans)}


_DEGREE_ZH = ("比较", "更", "最", "很", "较", "还", "太")


def _bare(word: str) -> str:
    """The word case-folded, a Chinese degree adverb in front dropped ("更低" -> "低": "不是更低" rejects the
    output's "比水星低")."""
    w = word.casefold()
    for d in _DEGREE_ZH:
        if w.startswith(d) and len(w) > len(d):
            return w[len(d):]
    return w


def _negated_output(ta: TextAlignment, correction: str) -> np.ndarray:
    """Output words equal to a word the correction negates, else aligned to it (a negated word
    that the output says itself points at that word only: "Not for relativity" rejects
    "relativity", not the word the alignment happened to pair with the correction's copy)."""
    neg_j = _negated_j(ta, correction)
    neg_text = {_bare(ta.correction_tokens[j].text) for j in neg_j}
    out_text = {_bare(t.text) for t in ta.output_tokens}
    out = np.zeros(len(ta.output_tokens), dtype=bool)
    for o in ta.alignment.ops:
        if o.i is not None and o.j in neg_j and _bare(ta.correction_tokens[o.j].text) not in out_text:
            out[o.i] = True
    for i, t in enumerate(ta.output_tokens):
        if _bare(t.text) in neg_text:
            out[i] = True
    own = negated_spans(ta.output)  # the output says "never spoils" itself: no contradiction
    for i, t in enumerate(ta.output_tokens):
        if out[i] and any(t.start < e and t.end > s for s, e in own):
            out[i] = False
    return out


#: why a word is contradicted outright, whatever the alignment paired it with (:func:`_marks`)
_MARKS = ("negated", "quoted", "swapped", "polarity")


def _marks(ta: TextAlignment, correction: str, negated: np.ndarray, cfg: RewardConfig) -> List[str]:
    """Per output word: "" or why the correction rejects it outright: "negated" ("不是北京"), "quoted" (named
    to be rejected: "十五万公里不对"), "swapped" ("内存和硬盘说反了"), "polarity" ("不能。" against "也能传播").
    correction: the cleaned correction as the user wrote it (not turned round)."""
    toks = ta.output_tokens
    marks = ["negated" if x else "" for x in negated]
    if cfg.quotes:
        quoted = [correction[a:b] for a, b in quoted_spans(correction)]
        keys = {value_key(q) for q in quoted}
        for i, t in enumerate(toks):
            kind = word_kind(t.text)
            if kind in CONTENT_KINDS and (value_key(t.text) in keys or kind in EXACT_KINDS and any(
                    q != t.text and q.startswith(t.text) and word_kind(q) not in EXACT_KINDS for q in quoted)):
                marks[i] = marks[i] or "quoted"
    if cfg.swaps:
        for i in swap_items(toks, correction) or []:
            marks[i] = marks[i] or "swapped"
    if cfg.polarity:
        for i in polarity_flips(toks, correction, ta.output):
            marks[i] = marks[i] or "polarity"
    return marks


@dataclass
class _Scope:
    """Where the evidence rules may find a contradiction (issue 23); (n,) bool arrays.

    allowed: the words of the sentences the correction addresses (all for a one-sentence output);
    restated: the words of a sentence the correction restates (shares ``restated_words`` content words with
    one clause of it): only there is the alignment's replacement of one content word by another evidence
    (in a long output a terse correction's words are paired with whatever the DP found cheapest);
    premise: words the question says (the question's premise, not the output's claim: "Scotland" in "What
    is the capital of Scotland?"): never an alternative's or a replacement's target;
    answers: per terse clause of the correction, its content words and the (n,) mask of the sentence it
    answers: the closest word of a compatible kind there that nothing else explains is the wrong answer."""

    allowed: np.ndarray
    restated: np.ndarray
    premise: np.ndarray
    answers: List[Tuple[List[int], np.ndarray]] = field(default_factory=list)


def _scope(ta: TextAlignment, correction: str, marks: List[str], cfg: RewardConfig, question: Optional[str],
           info: dict) -> _Scope:
    toks = ta.output_tokens
    n = len(toks)
    scope = _Scope(np.ones(n, bool), np.ones(n, bool), np.zeros(n, bool))
    q = _content_keys(tokenize(question)) if question else set()  # the question's words, read once
    if q and cfg.premise:
        scope.premise = np.array([word_kind(t.text) in CONTENT_KINDS and value_key(t.text) in q for t in toks], bool)
    if not cfg.local:
        return scope
    sent = sentence_of(toks, ta.output)
    if sent.max(initial=0) == 0:
        return scope
    marked = [i for i, w in enumerate(marks) if w]
    targets = _clause_targets(ta, correction, sent, marked, cfg, q)
    addressed = _addressed(sent, marked, targets)
    scope.allowed = np.isin(sent, sorted(addressed))
    info["addressed_sentences"] = sorted(addressed)
    scope.restated = np.isin(sent, sorted(_restated_sentences(ta, correction, sent, cfg.restated_words)))
    if swap_items(toks, correction) is None:  # "Those two are swapped." names no value to place
        scope.answers = [(js, sent == t) for js, terse, t in targets if terse and t is not None]
    return scope


def _content_keys(tokens: Sequence[Token]) -> set:
    return {value_key(t.text) for t in tokens if word_kind(t.text) in CONTENT_KINDS}


def _restated_sentences(ta: TextAlignment, correction: str, sent: np.ndarray, k: int) -> set:
    """Sentences that share at least ``k`` distinct content words with one clause of the correction."""
    okey = [value_key(t.text) if word_kind(t.text) in CONTENT_KINDS else None for t in ta.output_tokens]
    out = set()
    for a, b in clause_spans(correction):
        said = _content_keys([t for t in ta.correction_tokens if a <= t.start < b])
        for s in set(sent.tolist()):
            if len({okey[i] for i in range(len(okey)) if sent[i] == s and okey[i] in said}) >= k:
                out.add(s)
    return out


def sentence_of(tokens: Sequence[Token], text: str) -> np.ndarray:
    """(n,) int: the index of the sentence (:func:`claw_lib.text.claims.sentence_spans`) of each token."""
    ends = [e for _, e in sentence_spans(text)]
    return np.array([min(int(np.searchsorted(ends, t.start, side="right")), max(len(ends) - 1, 0)) for t in tokens],
                    dtype=int)


def addressed_sentences(ta: TextAlignment, correction: str, sent: np.ndarray, marked: Sequence[int],
                        cfg: RewardConfig, question: Optional[str] = None) -> set:
    """The sentences of the output that the correction speaks to (issue 23): those that hold a word it
    rejects outright (``marked``: negated, quoted, swapped, polarity) and the one each of its clauses fits
    best (:func:`_clause_targets`). sent: (n,) the sentence of each output word (:func:`sentence_of`).
    Returns a set of sentence indices (all of them when nothing fits)."""
    q = _content_keys(tokenize(question)) if question else set()
    return _addressed(sent, marked, _clause_targets(ta, correction, sent, marked, cfg, q))


def _addressed(sent: np.ndarray, marked: Sequence[int], targets) -> set:
    """The sentences of the marked words and the clauses' targets; all sentences when there is none."""
    out = {int(sent[i]) for i in marked} | {t for _, _, t in targets if t is not None}
    return out if out else set(range(int(sent.max(initial=0)) + 1))


def _same_kind(a: str, b: str) -> bool:
    """Could a word of kind ``b`` replace one of kind ``a``: a number a number, a code a code, a name or any
    other content word a name or a content word."""
    exact = ("number", "code")
    return a == b if a in exact or b in exact else a in CONTENT_KINDS and b in CONTENT_KINDS


def _clause_targets(ta: TextAlignment, correction: str, sent: np.ndarray, marked: Sequence[int], cfg: RewardConfig,
                    q: set) -> List[Tuple[List[int], bool, Optional[int]]]:
    """Per clause of the correction (:func:`claw_lib.text.claims.clause_spans`) that carries a claim: its
    content words (indices into the correction's tokens), whether it is terse (at most ``terse_words`` of
    them) and the output sentence it fits best (None: none). q: the question's content words (value keys;
    empty without a question).

    * a clause scores each sentence by the sum, over its content words, of their best match there:
      1 / (number of sentences that say it) for a word the sentence says too (a subject every sentence
      repeats says little), else ``(1 - cost) / 2`` for a word of the same kind (:func:`_same_kind`) at
      most ``unrelated_cost`` away that the question does not say (a value it could replace); plus
      ``question_weight`` x the share of the question's content words the sentence says (each weighted by
      1 / the number of sentences that say it);
    * a terse clause ("88个。", "Edinburgh.", "It's 500.") answers the question: the share of the question
      counts ``terse_question`` times, any word of the same kind counts whatever its cost, and a sentence
      that already says every word of the clause is not the one it corrects;
    * when the correction rejects some word outright, a clause reaches another sentence only through a
      word both say ("大英博物馆？不是吧，它在巴黎的卢浮宫" speaks to the museum's sentence alone).
    """
    out_t, cor_t, C = ta.output_tokens, ta.correction_tokens, ta.cost
    k = int(sent.max(initial=0)) + 1
    strong = {int(sent[i]) for i in marked}
    ok, kc = [word_kind(t.text) for t in out_t], [word_kind(t.text) for t in cor_t]
    okey, ckey = [value_key(t.text) for t in out_t], [value_key(t.text) for t in cor_t]
    says = [set() for _ in range(k)]
    for i in range(len(out_t)):
        if ok[i] in CONTENT_KINDS:
            says[sent[i]].add(okey[i])
    df = {}
    for keys in says:
        for key in keys:
            df[key] = df.get(key, 0) + 1
    share = np.zeros(k)
    if q:  # each question word counts 1 / (number of sentences that say it)
        total = sum(1.0 / df.get(key, 1) for key in q)
        share = np.array([sum(1.0 / df[key] for key in q & keys) / total for keys in says])
    targets = []
    for a, b in clause_spans(correction):
        js = [j for j, t in enumerate(cor_t) if a <= t.start < b and kc[j] in CONTENT_KINDS]
        if not js:
            continue
        terse = len(js) <= cfg.terse_words
        score = share * (cfg.terse_question if terse else cfg.question_weight)
        anchored = np.zeros(k, bool)
        for j in js:
            best = np.zeros(k)
            for i in range(len(out_t)):
                if ok[i] not in CONTENT_KINDS:
                    continue
                if okey[i] == ckey[j]:
                    m = 1.0 / df[okey[i]]
                    anchored[sent[i]] = True
                elif okey[i] in q or not _same_kind(ok[i], kc[j]) or not terse and C[i, j] > cfg.unrelated_cost:
                    continue  # the question's premise, or no value this word could replace
                else:
                    m = (1.0 - C[i, j]) / 2
                best[sent[i]] = max(best[sent[i]], m)
            score += best
        if terse:
            keys = {ckey[j] for j in js}
            score -= np.array([100.0 if keys <= says[t] else 0.0 for t in range(k)])
        if strong:
            score = np.where(anchored | np.isin(np.arange(k), sorted(strong)), score, -np.inf)
        t = int(np.argmax(score))
        targets.append((js, terse, t if np.isfinite(score[t]) and score[t] > 0 else None))
    return targets


def token_rewards(output: str, correction: str, strategy: str = "binary", config: Optional[RewardConfig] = None,
                  encoder=None, judge=None, question: Optional[str] = None,
                  response_ids: Optional[Sequence[int]] = None) -> TokenRewards:
    """One reward per word token of ``output``, from the user's ``correction``.

    strategy: "binary", "continuous", "perplexity" or "sentence".
    encoder:  a loaded :class:`~claw_lib.alignment.encoders.Encoder` (default: ``config.align.encoder``).
    judge:    ``(model, tokenizer)`` for perplexity (default: the kit's tiny LM); with binary or continuous and
              ``config.judge_weight > 0``, the words the rules find no evidence for get ``judge_weight`` x the
              judge's perplexity reward (``info["judge_filled"]``); the rules decide the others.
    question: the question the output answers (perplexity context; optional).
    response_ids: perplexity only: the judge-tokenizer ids that produced ``output`` (the policy's
              own actions in PPO); scored as they are instead of re-tokenising the text.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
    if not isinstance(output, str) or not isinstance(correction, str):
        raise TypeError("output and correction must be strings")
    cfg = config or RewardConfig()
    validate(cfg, "reward.")  # the library refuses what the command line refuses (a NaN constant, a bad range)
    _check_judge_args(strategy, cfg, judge, response_ids, output)
    warn_language_mismatch(output, correction)
    if cfg.alternatives not in _ALTERNATIVES:
        raise ValueError(f"RewardConfig.alternatives must be one of {_ALTERNATIVES}, got {cfg.alternatives!r}")
    tokens = tokenize(output, cfg.align.max_chars)
    check_text(correction, cfg.align.max_chars)
    n = len(tokens)
    cc = clean_correction(correction) if cfg.clean else None
    text = cc.text if cc is not None else correction
    info = {"clean_correction": text}
    if strategy == "perplexity":
        return _perplexity(output, text if text.strip() else correction, tokens, cfg, judge, question, info,
                           response_ids)
    if cc is not None and (cc.affirmation or not text.strip()):
        kind = "affirmation" if cc.affirmation else "vague"
        value = cfg.match if kind == "affirmation" else 0.0
        if strategy == "continuous" and kind == "affirmation":
            value = cfg.hi
        info[kind] = True
        return TokenRewards(output, strategy, tokens, np.full(n, value, dtype=np.float64), np.zeros(n, bool), None, info)
    ta, aligned = _align(output, text, cfg, encoder, tokens)
    if aligned != text:
        info["aligned_correction"] = aligned
    negated = _negated_output(ta, aligned) if cfg.negation else np.zeros(n, bool)
    info["negated"] = [tokens[i].text for i in np.flatnonzero(negated)]
    marks = _marks(ta, text, negated, cfg)
    scope = _scope(ta, aligned, marks, cfg, question, info)
    ev = _evidence(ta, aligned, marks, cfg, bool(cc is not None and cc.affirmed), scope)
    info["evidence"] = ev.why
    omitted = np.zeros(n, bool)
    if cfg.omissions:
        omitted = omitted_at(ta)
        info["omitted_before"] = [tokens[i].text for i in np.flatnonzero(omitted)]
    contra = ev.status == "contradicted"
    rejected = contra | omitted
    if strategy == "binary":
        r = np.where(rejected, cfg.reject, np.where(ev.status == "confirmed", cfg.match,
                                                      np.where(ev.status == "context", cfg.match, cfg.absent)))
    elif strategy == "continuous":
        r = np.full(n, float(cfg.absent))
        for i in range(n):
            formula = float(np.clip(cfg.a - cfg.b * ev.cost[i], cfg.lo, cfg.hi)) if np.isfinite(ev.cost[i]) else cfg.lo
            if omitted[i] or (contra[i] and ev.why[i] in ("deleted",) + _MARKS):
                r[i] = cfg.lo
            elif contra[i]:  # graded by the cost; a pair the cost calls close but exactness does not
                r[i] = formula if formula < 0 or not cfg.evidence else cfg.lo  # ("1946" / "1945"): lo
            elif ev.status[i] == "confirmed":
                r[i] = max(formula, cfg.absent) if cfg.evidence else formula
            elif ev.status[i] == "context":
                r[i] = cfg.hi
    else:  # sentence
        r = np.full(n, cfg.reject if rejected.any() else cfg.match)
    if ev.rewrite:
        info["rewrite"] = True
        r = np.asarray(r, dtype=np.float64) * cfg.rewrite_scale
    r = np.asarray(r, dtype=np.float64)
    if judge is not None and cfg.judge_weight > 0 and strategy != "sentence":
        # a judge LM speaks where the rules found no evidence; where they did, they decide
        jr = _perplexity(output, text, tokens, cfg, judge, question, {}).rewards
        silent = np.array([s == "absent" for s in ev.status]) & ~rejected
        r = np.where(silent, np.clip(cfg.judge_weight * jr, cfg.lo, cfg.hi), r)
        rejected = rejected | (silent & (r < 0))
        info["judge_filled"] = [tokens[i].text for i in np.flatnonzero(silent)]
    return TokenRewards(output, strategy, tokens, r, rejected, ta, info)


#: the cost an equal word pair gets at most under ``reorder`` (the contextual cost of a repeated word
#: rises when its neighbours move: 首都 / 首都 costs 0.35 in "巴黎才是首都" against "法国的首都是伦敦")
_ANCHOR_COST = 0.1


def _anchored(ta: TextAlignment, cfg: RewardConfig) -> TextAlignment:
    """``ta`` re-aligned with every pair of equal words (:func:`value_key`, not punctuation) at a cost
    of at most ``_ANCHOR_COST``."""
    C = ta.cost.copy()
    okey = [(value_key(t.text), word_kind(t.text)) for t in ta.output_tokens]
    ckey = [(value_key(t.text), word_kind(t.text)) for t in ta.correction_tokens]
    for i, (a, ka) in enumerate(okey):
        for j, (b, kb) in enumerate(ckey):
            if a == b and ka != "punct" and kb != "punct":
                C[i, j] = min(C[i, j], _ANCHOR_COST)
    if np.array_equal(C, ta.cost):
        return ta
    al = align(C, cfg.align.insert_cost, cfg.align.delete_cost, cfg.align.match_threshold)
    return TextAlignment(ta.output, ta.correction, ta.output_tokens, ta.correction_tokens, C, al)


def _anchors(ta: TextAlignment) -> int:
    return sum(1 for o in ta.alignment.ops if o.op == "match" and word_kind(ta.output_tokens[o.i].text) != "punct"
               and value_key(ta.output_tokens[o.i].text) == value_key(ta.correction_tokens[o.j].text))


def _align(output, text, cfg, encoder, tokens):
    """The alignment of ``text`` and, with ``cfg.reorder``, of its copula turned round, equal words
    anchored: the one that pairs more equal words (then the cheaper)."""
    ta = align_texts(output, text, cfg.align, encoder=encoder, output_tokens=tokens)
    if not cfg.reorder:
        return ta, text
    ta = _anchored(ta, cfg)
    inv = invert_copula(text)
    if inv is not None:
        tb = _anchored(align_texts(output, inv, cfg.align, encoder=encoder, output_tokens=tokens), cfg)
        if (_anchors(tb), -tb.alignment.total_cost) > (_anchors(ta), -ta.alignment.total_cost):
            return tb, inv
    return ta, text


@dataclass
class _Evidence:
    status: np.ndarray  # (n,) object: "confirmed", "contradicted", "absent" or "context"
    why: List[str]      # per word: match, mentioned, same value, exact, replaced, alternative, negated, same word,
    cost: np.ndarray    # same name; paraphrase, unrelated, other kind, elaboration, absent; context; deleted
    rewrite: bool


def _evidence(ta: TextAlignment, correction: str, marks: List[str], cfg: RewardConfig, affirmed: bool,
              scope: Optional[_Scope] = None) -> _Evidence:
    """Why each output word gets its reward (see the module docstring); (n,) arrays. marks: per word, "" or
    why the correction rejects it outright (:func:`_marks`); scope: where a contradiction may be found
    (:class:`_Scope`; default everywhere)."""
    out_t, cor_t, C = ta.output_tokens, ta.correction_tokens, ta.cost
    n, m = len(out_t), len(cor_t)
    ok, kc = [word_kind(t.text) for t in out_t], [word_kind(t.text) for t in cor_t]
    okey, ckey = [value_key(t.text) for t in out_t], [value_key(t.text) for t in cor_t]
    status = np.array(["absent"] * n, dtype=object)
    why, cost = ["absent"] * n, np.full(n, np.nan)
    neg_j = _negated_j(ta, correction) if cfg.negation else set()
    elaborating = cfg.evidence and cfg.elaboration and affirmed
    used = set()
    dp_pairs = []

    scope = scope or _Scope(np.ones(n, bool), np.ones(n, bool), np.zeros(n, bool))
    allowed = scope.allowed

    def put(i, st, reason, c=np.nan):
        if st == "contradicted" and not allowed[i]:  # another sentence: the correction does not speak to it
            st, reason = "absent", "elsewhere"
        status[i], why[i], cost[i] = st, reason, c

    def exact_pair(i, j):
        return cfg.exact and ok[i] in EXACT_KINDS and kc[j] in EXACT_KINDS

    conceded = _conceded_j(ta, correction) if cfg.evidence and cfg.quotes else set()
    for i, o in enumerate(ta.alignment.op_for_output()):
        if marks[i]:
            put(i, "contradicted", marks[i])
            if status[i] == "contradicted":
                continue
        if o.op == "delete":
            put(i, "absent", "absent") if cfg.evidence else put(i, "contradicted", "deleted")
            continue
        j, c = o.j, o.cost
        if j in conceded:  # "Sydney is the biggest city, but ...": what the user concedes confirms nothing
            put(i, "absent", "conceded", c)
            continue
        if o.op == "match":
            if exact_pair(i, j) and okey[i] != ckey[j]:
                if scope.premise[i]:  # "巴西" matched with "巴西利亚": the question's subject, not the claim
                    put(i, "absent", "premise", c)
                    continue
                put(i, "contradicted", "exact", c)
            else:
                put(i, "confirmed", "match", c)
            if allowed[i]:  # a pair in another sentence leaves the correction's word free for this one
                used.add(j)
        elif exact_pair(i, j) and okey[i] == ckey[j]:
            if allowed[i]:
                used.add(j)
            put(i, "confirmed", "same value", c)
        elif not cfg.evidence:
            used.add(j)
            put(i, "absent", "paraphrase", c) if c <= cfg.neutral_band else put(i, "contradicted", "replaced", c)
        else:
            put(i, "absent", "absent", c)  # decided in _contradictions
            dp_pairs.append((i, j))
    rewrite = False
    if cfg.evidence:
        where = {}  # a word the correction repeats anywhere is confirmed, whatever the order (not in a concession)
        for j in range(m):
            if j not in neg_j and kc[j] != "punct" and j not in conceded:
                where.setdefault(ckey[j], j)
        for i in range(n):
            if status[i] == "absent" and ok[i] != "punct" and okey[i] in where:
                if allowed[i]:  # a repetition in another sentence leaves the word free to correct this one
                    used.add(where[okey[i]])
                put(i, "confirmed", "mentioned", C[i, where[okey[i]]])
        marked = {okey[i] for i in range(n) if marks[i]}  # a value named as wrong is no alternative to pair
        used |= {j for j in range(m) if ckey[j] in marked}
        units = (_units_after(out_t), _units_after(cor_t))
        _contradictions(C, ok, kc, okey, ckey, status, used, neg_j, dp_pairs, cfg, elaborating, put, scope, units)
        # copies carry the evidence (and the cost) of the word they copy
        wrong = {okey[i]: cost[i] for i in range(n) if status[i] == "contradicted" and ok[i] in CONTENT_KINDS}
        for i in range(n):  # every copy of a contradicted word ("伦敦伦敦") is wrong too
            if status[i] == "absent" and ok[i] in CONTENT_KINDS and okey[i] in wrong:
                put(i, "contradicted", "same word", wrong[okey[i]])
        if cfg.exact:  # a name or code is exact as a whole: "J. R. R. Tolkien" vs "J. K. Rowling"
            for unit in _units(out_t, ta.output, ok):
                bad = [cost[i] for i in unit if status[i] == "contradicted"]
                if bad:
                    for i in unit:
                        initial = len(out_t[i].text) == 1 and out_t[i].text.isupper()
                        if status[i] == "absent" or ok[i] == "punct" or initial:
                            put(i, "contradicted", "same name", np.nanmax(bad) if np.isfinite(bad).any() else np.nan)
        content = [i for i in range(n) if ok[i] in CONTENT_KINDS]
        if cfg.rewrite_share > 0 and content:
            share = np.mean([status[i] == "confirmed" for i in content])
            new = sum(1 for j in range(m) if kc[j] in CONTENT_KINDS and ckey[j] not in set(okey))
            rewrite = share < cfg.rewrite_share and new >= len(content)
        if cfg.keep_context:
            spoken = [i for i in range(n) if status[i] in ("confirmed", "contradicted") or why[i] == "paraphrase"]
            if spoken:
                for i in list(range(spoken[0])) + list(range(spoken[-1] + 1, n)):
                    if status[i] == "absent" and ok[i] != "punct":
                        put(i, "context", "context")
    return _Evidence(status, why, cost, rewrite)


#: how the clause after a concession starts: "Auckland is the biggest city, but the capital is Wellington."
_BUT = {"zh": ("但是", "但", "不过", "可是", "然而"), "en": ("but", "however", "though", "yet")}


def _conceded_j(ta: TextAlignment, correction: str) -> set:
    """Indices of correction words in a clause followed by a "but" clause: what the user concedes ("Auckland
    is the biggest city, but ...") is not a confirmation of the output's claim about it."""
    spans = clause_spans(correction)
    zh = guess_lang(correction) == "zh"
    out = set()
    for (a, b), (c, _) in zip(spans, spans[1:]):
        nxt = correction[c:].lstrip().casefold()
        if any(nxt.startswith(w) if zh else re.match(rf"{w}\b", nxt) for w in _BUT["zh" if zh else "en"]):
            out |= {j for j, t in enumerate(ta.correction_tokens) if a <= t.start < b}
    return out


def _initial(word: str) -> bool:
    """One capital letter: an initial ("J" of "J. R. R. Tolkien")."""
    return len(word) == 1 and word.isupper()


def _units(tokens: List[Token], text: str, kinds: List[str]) -> List[List[int]]:
    """Runs of name / code tokens that form one name or code: words separated by spaces ("Pacific
    Ocean", "Charlotte Brontë"), initials with their dots ("J. R. R. Tolkien"), a middle dot
    (比尔·盖茨), brackets right after a code ("list.length()"). Only runs of two or more."""
    units, cur = [], []
    for k, t in enumerate(tokens):
        gap = text[tokens[k - 1].end:t.start] if k else ""
        if kinds[k] in ("name", "code"):
            if cur and (gap.strip() or tokens[cur[-1]].end == t.start and kinds[cur[-1]] in ("name", "code")):
                units.append(cur)
                cur = []
            cur.append(k)
        elif cur and not gap and t.text in ".·•()" and (
                t.text in "()" or k + 1 < len(tokens) and kinds[k + 1] in ("name", "code")
                and (text[t.end:tokens[k + 1].start] == "" or _initial(tokens[k - 1].text))):
            cur.append(k)
        else:
            units.append(cur)
            cur = []
    units.append(cur)
    return [u for u in units if sum(1 for i in u if kinds[i] in ("name", "code")) + sum(
        1 for i in u if tokens[i].text in "()") >= 2]


def _contradictions(C, ok, kc, okey, ckey, status, used, neg_j, dp_pairs, cfg, elaborating, put, scope,
                    units) -> None:
    """Pair output words the correction does not confirm with words it brings, most certain first:
    (0) numbers / codes / names that differ, paired by the alignment; (1) the same paired anywhere
    in the correction (``alternatives`` "exact" or "all"; cost at most ``unrelated_cost``); (2)
    content words the alignment paired, cost above the neutral band (and the match threshold) and
    at most ``unrelated_cost``; (3) content words paired anywhere, mutually closest, same limits
    (``alternatives="all"``). Greedy, each word used once. The alignment's pairs inside the
    neutral band are paraphrases: "absent", and they use up their correction word. Then (4) each terse
    clause of the correction (``scope.answers``) whose words are all still unpaired contradicts the closest
    compatible word of the sentence it answers, whatever the cost ("皮肤。" -> 肝脏 in "人体最大的器官是肝脏").
    Numbers pair only with numbers, and only when their units agree (70公斤 is no alternative to 8%).
    scope: where (:class:`_Scope`); units: the unit after each output / correction word ("" if none)."""
    dp = dict(dp_pairs)
    low = max(cfg.neutral_band, cfg.align.match_threshold)
    ounit, cunit = units

    def compatible(i, j):
        if not (ok[i] in CONTENT_KINDS and kc[j] in CONTENT_KINDS and (ok[i] == "number") == (kc[j] == "number")):
            return False
        return ok[i] != "number" or not ounit[i] or not cunit[j] or ounit[i] == cunit[j]

    def exact(i, j):
        return cfg.exact and ok[i] in EXACT_KINDS and kc[j] in EXACT_KINDS

    for i, j in dp_pairs:  # why the alignment's pair is no evidence, unless a class below says otherwise
        if not compatible(i, j):
            put(i, "absent", "other kind", C[i, j])
        elif exact(i, j):
            continue
        elif C[i, j] <= cfg.neutral_band and j not in used:
            used.add(j)
            put(i, "absent", "paraphrase", C[i, j])
        elif C[i, j] > cfg.unrelated_cost:
            put(i, "absent", "unrelated", C[i, j])
        elif elaborating:
            put(i, "absent", "elaboration", C[i, j])
    cand = [i for i in range(len(ok)) if status[i] == "absent" and ok[i] in CONTENT_KINDS and scope.allowed[i]
            and not scope.premise[i]]
    free = [j for j in range(len(kc)) if j not in used and j not in neg_j and kc[j] in CONTENT_KINDS]
    pairs = []
    for i in cand:
        for j in free:
            if not compatible(i, j):
                continue
            on_path = dp.get(i) == j
            if exact(i, j):
                klass = 0 if on_path else 1
                if klass == 1 and (cfg.alternatives == "none" or C[i, j] > cfg.unrelated_cost):
                    continue
            elif elaborating or not low < C[i, j] <= cfg.unrelated_cost or not scope.restated[i]:
                continue
            else:
                klass = 2 if on_path else 3
                if klass == 3 and cfg.alternatives != "all":
                    continue
            pairs.append((klass, C[i, j], i, j))
    pairs.sort()
    best_j, best_i = {}, {}
    for klass, c, i, j in pairs:
        if klass == 3:
            best_j.setdefault(i, j)
            best_i.setdefault(j, i)
    taken_i, taken_j = set(), set()
    for klass, c, i, j in pairs:
        if i in taken_i or j in taken_j or (klass == 3 and (best_j[i] != j or best_i[j] != i)):
            continue
        taken_i.add(i)
        taken_j.add(j)
        put(i, "contradicted", ("exact", "exact", "replaced", "alternative")[klass], c)
    for js, where in scope.answers:
        js = [j for j in js if j not in taken_j and j not in used and j not in neg_j]
        if elaborating or not js or any(status[i] == "contradicted" for i in np.flatnonzero(where)):
            continue  # the clause's words are all placed, or the sentence has its contradiction already
        options = [(C[i, j], i) for j in js for i in np.flatnonzero(where) if status[i] == "absent"
                   and scope.allowed[i] and not scope.premise[i] and compatible(i, j) and _same_kind(ok[i], kc[j])]
        if options:
            c, i = min(options)
            put(i, "contradicted", "answer", c)


#: unit words after a number ("70 公斤", "11 meters", "20 %"): numbers with different units are not alternatives
_EN_UNITS = frozenset("""% percent meter meters metre metres kilometer kilometers km m cm mm mile miles feet foot inch
    inches yard yards kilogram kilograms kg gram grams g pound pounds ton tons liter liters litre litres ml second
    seconds minute minutes hour hours day days week weeks month months year years degree degrees century centuries
    mph""".split())


def _units_after(tokens: Sequence[Token]) -> List[str]:
    """Per token: the unit word right after it when it is a number ("" otherwise, or when none follows)."""
    from ..text.phrases import ZH_MEASURES

    out = []
    for k, t in enumerate(tokens):
        nxt = tokens[k + 1].text.casefold() if k + 1 < len(tokens) else ""
        unit = nxt in _EN_UNITS or nxt in ZH_MEASURES or nxt in ("％", "%")
        out.append(value_key(nxt) if word_kind(t.text) == "number" and unit else "")
    return out


def omitted_at(ta) -> np.ndarray:
    """(n,) bool: output word ``i`` stands where the output left out correction words (a run of
    "insert" ops of non-punctuation words right before it; a run at the very end is charged to the
    last word, since the output stopped instead of saying it), or right after a word cut short (a
    word aligned with a longer correction word that it begins: in "堪。" for "堪培拉。" the 。 is
    where the policy stopped the word, so the 。 is charged)."""
    n = len(ta.output_tokens)
    out = np.zeros(n, bool)
    pending = False
    for o in ta.alignment.ops:
        if o.op == "insert":
            pending |= any(ch.isalnum() for ch in ta.correction_tokens[o.j].text)
        elif o.i is not None:
            if pending:
                out[o.i] = True
            pending = False
            if o.j is not None:  # a word cut short (堪 for 堪培拉): the next word is where the rest is missing
                a, b = ta.output_tokens[o.i].text.casefold(), ta.correction_tokens[o.j].text.casefold()
                pending = len(a) < len(b) and b.startswith(a)
    if pending and n:
        out[n - 1] = True
    return out


def _check_judge_args(strategy: str, cfg: RewardConfig, judge, response_ids, output: str = "") -> None:
    """Refuse (ValueError naming it) what would be silently ignored or fail deep in torch: ``judge_weight > 0``
    without a judge (R01: the rewards were those of weight 0), a judge that is not ``(model, tokenizer)`` (R05),
    perplexity's ``response_ids`` that are empty for a non-empty output, not integers, or beyond the judge's
    vocabulary (R07, R06; the other strategies do not read them)."""
    import operator

    if judge is None and cfg.judge_weight > 0 and strategy in ("binary", "continuous"):
        raise ValueError(f"judge_weight {cfg.judge_weight} needs a judge: pass judge=(model, tokenizer), e.g. "
                         "load_causal_lm('tiny'), or leave judge_weight at 0")
    if judge is not None and (not isinstance(judge, (tuple, list)) or len(judge) != 2 or not callable(judge[0])
                              or judge[1] is None):
        raise ValueError(f"judge must be a (model, tokenizer) pair such as load_causal_lm('tiny') returns, got "
                         f"{type(judge).__name__}")
    if response_ids is None or strategy != "perplexity":
        return
    try:
        ids = [operator.index(i) for i in response_ids if not isinstance(i, bool) or _no_bool()]
    except TypeError:
        raise ValueError("response_ids must be integer token ids") from None
    if not ids and output.strip():
        raise ValueError("response_ids is empty but the output is not: give the ids that produced the output, or "
                         "leave response_ids out")
    if ids and judge is not None:
        rows = judge[0].get_input_embeddings().num_embeddings
        if min(ids) < 0 or max(ids) >= rows:
            raise ValueError(f"response_ids hold an id beyond the judge's vocabulary (0..{rows - 1}): "
                             f"{max(ids) if max(ids) >= rows else min(ids)}")


def _no_bool() -> bool:
    raise TypeError("a bool is no token id")


def _perplexity(output, correction, tokens, cfg, judge, question, info, response_ids=None) -> TokenRewards:
    from ..models.lm import encode, encode_pair, ids_logprobs, load_causal_lm, pad_token_id
    from ..prompts import build_prompt, response_text
    from ..text.tokens import subtoken_spans

    model, tok = judge if judge is not None else load_causal_lm("tiny")
    if response_ids is not None and judge is None:  # the default judge: its vocabulary is known only now
        _check_judge_args("perplexity", cfg, (model, tok), response_ids, output)
    lang = guess_lang(output, correction)
    q = question or ""
    prompts = [build_prompt(q, lang, correction, tokenizer=tok), build_prompt(q, lang, tokenizer=tok)]
    n = len(tokens)
    if not output.strip():
        return TokenRewards(output, "perplexity", tokens, np.zeros(n), np.zeros(n, bool), None, info)
    if response_ids is None:  # a text: score the continuation the prompt format expects
        cont = response_text(output, lang, tok)
        _, ids, subs = encode_pair(tok, "", cont)
        shift = len(cont) - len(output)
    else:  # the policy's own ids (PPO): score exactly those, find their characters by decoding
        ids, subs = list(response_ids), subtoken_spans(tok, response_ids)
        decoded = "".join(t.text for t in subs)
        shift = decoded.find(output.strip()) - output.find(output.strip())
    subs = [Token(t.text, max(0, t.start - shift), max(0, t.end - shift)) for t in subs]
    p_ids = [encode(tok, p) for p in (prompts if cfg.contrast else prompts[:1])]
    lps = ids_logprobs(model, p_ids, [ids] * len(p_ids), pad_token_id(tok))[0]
    sub_score = lps[0] - lps[1] if cfg.contrast else lps[0]
    word = subtokens_to_words(sub_score, tokens, subs, "sum", fill=0.0)
    r = np.clip(word / cfg.ppl_scale if cfg.contrast else 1.0 + word / cfg.ppl_scale, -1.0, 1.0)
    info.update({"subtokens": subs, "subtoken_scores": sub_score, "word_scores": word, "lang": lang})
    return TokenRewards(output, "perplexity", tokens, r.astype(np.float64), r < 0, None, info)


def fuse_rewards(rewards: Dict[str, np.ndarray], weights: Optional[Dict[str, float]] = None,
                 normalise: str = "maxabs") -> np.ndarray:
    """Weighted sum of several strategies' rewards for the same tokens, each normalised first.

    normalise: "maxabs" (divide by the largest |r|, keeps signs and zero), "zscore" (subtract
    the mean, divide by the std) or "none". Weights default to 1. Returns (n,) float64.
    The article's recipe, "先用基于操作的方法产生基础奖励，再用困惑度平滑", is
    ``fuse_rewards({"binary": rb, "perplexity": rp}, {"binary": 1.0, "perplexity": 0.5})``.
    """
    if not rewards:
        raise ValueError("no rewards to fuse")
    lens = {k: len(v) for k, v in rewards.items()}
    if len(set(lens.values())) != 1:
        raise ValueError(f"strategies disagree on the number of tokens: {lens}")
    weights = weights or {}
    unknown = sorted(set(weights) - set(rewards))
    if unknown:
        raise ValueError(f"weights for {unknown} but no such rewards (rewards: {sorted(rewards)}): a misspelt key "
                         "would silently keep weight 1")
    out = np.zeros(next(iter(lens.values())))
    for k, v in rewards.items():
        v = np.asarray(v, dtype=np.float64)
        if normalise == "maxabs":
            m = np.abs(v).max() if v.size else 0.0
            v = v / m if m > 0 else v
        elif normalise == "zscore":
            sd = v.std() if v.size else 0.0
            v = (v - v.mean()) / sd if sd > 0 else v - (v.mean() if v.size else 0.0)
        elif normalise != "none":
            raise ValueError(f"normalise must be 'maxabs', 'zscore' or 'none', got {normalise!r}")
        out += weights.get(k, 1.0) * v
    return out
