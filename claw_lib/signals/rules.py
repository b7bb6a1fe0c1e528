"""The rules engine: what a correction says about each output word, read from the alignment
(notebooks 03, 07 and 10). :func:`claw_lib.signals.rewards.token_rewards` turns its reading into rewards.

Evidence, not absence (each rule a field of :class:`~claw_lib.config.RewardConfig`, defaults chosen on the dev
split of ``data/probe_v2.jsonl``). A word the correction does not mention is not wrong. Every output word is

* *confirmed*: matched, or repeated anywhere in the correction (``reorder`` also tries the correction with its
  copula turned round: "巴黎才是首都" -> "首都才是巴黎");
* *contradicted*: negated ("不是北京"); a number / code / name that differs from the one it is paired with, or
  from one the correction brings anywhere (``exact``, ``alternatives``: "1946" / "1945", "HNO2" / "HNO3", "Only
  50."); replaced by a content word whose cost is above the neutral band and at most ``unrelated_cost``; a copy of
  a contradicted word, or a part of a contradicted name ("J. R. R. Tolkien"); named to be rejected, swapped, or
  of the opposite polarity (:func:`marks`);
* or *absent*: deleted, paired with a function word, a word of another kind or an unrelated one, or a paraphrase
  inside the neutral band: no signal.

In a long output the correction speaks to the sentences it addresses (:func:`addressed_sentences`);
contradictions elsewhere are not looked for.

:func:`read_pair` is the whole engine for one pair: align (:func:`align_pair`), the words' facts once
(:class:`Facts`: kind, value key and unit of every word, read by every rule below), the outright marks, the
scope, the evidence (:class:`Evidence`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Tuple

import numpy as np

from ..alignment.dp import align
from ..alignment.texts import TextAlignment, align_texts
from ..config import RewardConfig
from ..text.claims import clause_spans, polarity_flips, quoted_spans, sentence_spans, swap_items
from ..text.corrections import (CONTENT_KINDS, EXACT_KINDS, guess_lang, invert_copula, negated_spans, value_key,
                                word_kind)
from ..text.memo import one_pair
from ..text.phrases import ZH_MEASURES
from ..text.tokens import Token, tokenize

__all__ = ["Facts", "Evidence", "Reading", "read_pair", "align_pair", "marks", "MARKS", "sentence_of",
           "addressed_sentences", "omitted_at", "content_keys"]


# --------------------------------------------------------------------------- the words' facts, once per pair
#: unit words after a number ("70 公斤", "11 meters", "20 %"): numbers with different units are not alternatives
_EN_UNITS = frozenset("""% percent meter meters metre metres kilometer kilometers km m cm mm mile miles feet foot inch
    inches yard yards kilogram kilograms kg gram grams g pound pounds ton tons liter liters litre litres ml second
    seconds minute minutes hour hours day days week weeks month months year years degree degrees century centuries
    mph""".split())


def _units_after(tokens: Sequence[Token], kinds: Sequence[str]) -> List[str]:
    """Per token: the unit word right after it when it is a number ("" otherwise, or when none follows)."""
    out = []
    for k, t in enumerate(tokens):
        nxt = tokens[k + 1].text.casefold() if k + 1 < len(tokens) else ""
        unit = nxt in _EN_UNITS or nxt in ZH_MEASURES or nxt in ("％", "%")
        out.append(value_key(nxt) if kinds[k] == "number" and unit else "")
    return out


@dataclass
class Facts:
    """What every rule reads about the words of one aligned pair, computed once (:func:`facts_of`).

    ok / kc: (n,) / (m,) the kind of each output / correction word (:func:`~claw_lib.text.corrections.word_kind`);
    okey / ckey: their value keys (:func:`~claw_lib.text.corrections.value_key`); ounit / cunit: the unit word after
    each number ("" if none)."""

    ok: List[str]
    kc: List[str]
    okey: List[str]
    ckey: List[str]
    ounit: List[str]
    cunit: List[str]


def _side(tokens: Sequence[Token]) -> Tuple[List[str], List[str], List[str]]:
    kinds = [word_kind(t.text) for t in tokens]
    return kinds, [value_key(t.text) for t in tokens], _units_after(tokens, kinds)


def facts_of(ta: TextAlignment, output_side=None) -> Facts:
    """The :class:`Facts` of ``ta``; output_side: the output's (kinds, keys, units) when already computed."""
    ok, okey, ounit = output_side or _side(ta.output_tokens)
    kc, ckey, cunit = _side(ta.correction_tokens)
    return Facts(ok, kc, okey, ckey, ounit, cunit)


def content_keys(tokens: Sequence[Token]) -> set:
    """The value keys of the content words among ``tokens``."""
    return {value_key(t.text) for t in tokens if word_kind(t.text) in CONTENT_KINDS}


# --------------------------------------------------------------------------- the alignment
#: the cost an equal word pair gets at most under ``reorder`` (the contextual cost of a repeated word
#: rises when its neighbours move: 首都 / 首都 costs 0.35 in "巴黎才是首都" against "法国的首都是伦敦")
_ANCHOR_COST = 0.1


def _anchored(ta: TextAlignment, f: Facts, cfg: RewardConfig) -> TextAlignment:
    """``ta`` re-aligned with every pair of equal words (:func:`value_key`, not punctuation) at a cost
    of at most ``_ANCHOR_COST``."""
    C = ta.cost.copy()
    for i, (a, ka) in enumerate(zip(f.okey, f.ok)):
        for j, (b, kb) in enumerate(zip(f.ckey, f.kc)):
            if a == b and ka != "punct" and kb != "punct":
                C[i, j] = min(C[i, j], _ANCHOR_COST)
    if np.array_equal(C, ta.cost):
        return ta
    al = align(C, cfg.align.insert_cost, cfg.align.delete_cost, cfg.align.match_threshold)
    return TextAlignment(ta.output, ta.correction, ta.output_tokens, ta.correction_tokens, C, al)


def _anchors(ta: TextAlignment, f: Facts) -> int:
    return sum(1 for o in ta.alignment.ops if o.op == "match" and f.ok[o.i] != "punct" and f.okey[o.i] == f.ckey[o.j])


def align_pair(output: str, text: str, cfg: RewardConfig, encoder, tokens) -> Tuple[TextAlignment, str, Facts]:
    """The alignment of ``text`` and, with ``cfg.reorder``, of its copula turned round, equal words anchored: the one
    that pairs more equal words (then the cheaper). Returns (alignment, the correction text aligned, its facts)."""
    ta = align_texts(output, text, cfg.align, encoder=encoder, output_tokens=tokens)
    fa = facts_of(ta)
    if not cfg.reorder:
        return ta, text, fa
    ta = _anchored(ta, fa, cfg)
    inv = invert_copula(text)
    if inv is not None:
        tb = align_texts(output, inv, cfg.align, encoder=encoder, output_tokens=tokens)
        fb = facts_of(tb, (fa.ok, fa.okey, fa.ounit))
        tb = _anchored(tb, fb, cfg)
        if (_anchors(tb, fb), -tb.alignment.total_cost) > (_anchors(ta, fa), -ta.alignment.total_cost):
            return tb, inv, fb
    return ta, text, fa


# --------------------------------------------------------------------------- outright marks
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


def negated_output(ta: TextAlignment, correction: str) -> np.ndarray:
    """(n,) bool: output words equal to a word the correction negates, else aligned to it (a negated word
    that the output says itself points at that word only: "Not for relativity" rejects "relativity", not the word
    the alignment happened to pair with the correction's copy)."""
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


#: why a word is contradicted outright, whatever the alignment paired it with (:func:`marks`)
MARKS = ("negated", "quoted", "swapped", "polarity")


def marks(ta: TextAlignment, correction: str, negated: np.ndarray, cfg: RewardConfig, f: Facts) -> List[str]:
    """Per output word: "" or why the correction rejects it outright: "negated" ("不是北京"), "quoted" (named
    to be rejected: "十五万公里不对"), "swapped" ("内存和硬盘说反了"), "polarity" ("不能。" against "也能传播").
    correction: the cleaned correction as the user wrote it (not turned round)."""
    toks = ta.output_tokens
    out = ["negated" if x else "" for x in negated]
    if cfg.quotes:
        quoted = [correction[a:b] for a, b in quoted_spans(correction)]
        keys = {value_key(q) for q in quoted}
        for i, t in enumerate(toks):
            kind = f.ok[i]
            if kind in CONTENT_KINDS and (f.okey[i] in keys or kind in EXACT_KINDS and any(
                    q != t.text and q.startswith(t.text) and word_kind(q) not in EXACT_KINDS for q in quoted)):
                out[i] = out[i] or "quoted"
    if cfg.swaps:
        for i in swap_items(toks, correction) or []:
            out[i] = out[i] or "swapped"
    if cfg.polarity:
        for i in polarity_flips(toks, correction, ta.output):
            out[i] = out[i] or "polarity"
    return out


# --------------------------------------------------------------------------- scope: which sentences are addressed
@dataclass
class Scope:
    """Where the evidence rules may find a contradiction; (n,) bool arrays.

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

    @classmethod
    def everywhere(cls, n: int) -> "Scope":
        return cls(np.ones(n, bool), np.ones(n, bool), np.zeros(n, bool))


def scope_of(ta: TextAlignment, correction: str, mk: List[str], cfg: RewardConfig, q: set, f: Facts,
             info: dict) -> Scope:
    """The :class:`Scope` of a pair; q: the question's content words (value keys; empty without a question)."""
    toks = ta.output_tokens
    scope = Scope.everywhere(len(toks))
    if q and cfg.premise:
        scope.premise = np.array([k in CONTENT_KINDS and key in q for k, key in zip(f.ok, f.okey)], bool)
    if not cfg.local:
        return scope
    sent = sentence_of(toks, ta.output)
    if sent.max(initial=0) == 0:
        return scope
    marked = [i for i, w in enumerate(mk) if w]
    targets = _clause_targets(ta, correction, sent, marked, cfg, q, f)
    addressed = _addressed(sent, marked, targets)
    scope.allowed = np.isin(sent, sorted(addressed))
    info["addressed_sentences"] = sorted(addressed)
    scope.restated = np.isin(sent, sorted(_restated_sentences(ta, correction, sent, cfg.restated_words, f)))
    if swap_items(toks, correction) is None:  # "Those two are swapped." names no value to place
        scope.answers = [(js, sent == t) for js, terse, t in targets if terse and t is not None]
    return scope


def _restated_sentences(ta: TextAlignment, correction: str, sent: np.ndarray, k: int, f: Facts) -> set:
    """Sentences that share at least ``k`` distinct content words with one clause of the correction."""
    okey = [key if kind in CONTENT_KINDS else None for kind, key in zip(f.ok, f.okey)]
    out = set()
    for a, b in clause_spans(correction):
        said = {f.ckey[j] for j, t in enumerate(ta.correction_tokens) if a <= t.start < b and f.kc[j] in CONTENT_KINDS}
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
    """The sentences of the output that the correction speaks to: those that hold a word it
    rejects outright (``marked``: negated, quoted, swapped, polarity) and the one each of its clauses fits
    best (:func:`_clause_targets`). sent: (n,) the sentence of each output word (:func:`sentence_of`).
    Returns a set of sentence indices (all of them when nothing fits)."""
    q = content_keys(tokenize(question)) if question else set()
    return _addressed(sent, marked, _clause_targets(ta, correction, sent, marked, cfg, q, facts_of(ta)))


def _addressed(sent: np.ndarray, marked: Sequence[int], targets) -> set:
    """The sentences of the marked words and the clauses' targets; all sentences when there is none."""
    out = {int(sent[i]) for i in marked} | {t for _, _, t in targets if t is not None}
    return out if out else set(range(int(sent.max(initial=0)) + 1))


def _same_kind(a: str, b: str) -> bool:
    """Could a word of kind ``b`` replace one of kind ``a``: a number a number, a code a code, a name or any
    other content word a name or a content word."""
    exact = ("number", "code")
    return a == b if a in exact or b in exact else a in CONTENT_KINDS and b in CONTENT_KINDS


def _sentences_say(f: Facts, sent: np.ndarray, k: int, q: set):
    """says: per sentence, the value keys of its content words; df: per key, how many sentences say it; share:
    (k,) the share of the question's content words each sentence says (each weighted by 1 / df)."""
    says = [set() for _ in range(k)]
    for i in range(len(f.ok)):
        if f.ok[i] in CONTENT_KINDS:
            says[sent[i]].add(f.okey[i])
    df = {}
    for keys in says:
        for key in keys:
            df[key] = df.get(key, 0) + 1
    share = np.zeros(k)
    if q:  # each question word counts 1 / (number of sentences that say it)
        total = sum(1.0 / df.get(key, 1) for key in q)
        share = np.array([sum(1.0 / df[key] for key in q & keys) / total for keys in says])
    return says, df, share


def _word_fit(C, f: Facts, sent, k: int, j: int, terse: bool, q: set, df, cfg: RewardConfig, anchored) -> np.ndarray:
    """(k,) the best match of correction word ``j`` in each sentence (see :func:`_clause_targets`); sets
    ``anchored[s]`` where sentence s says the word itself."""
    best = np.zeros(k)
    for i in range(len(f.ok)):
        if f.ok[i] not in CONTENT_KINDS:
            continue
        if f.okey[i] == f.ckey[j]:
            m = 1.0 / df[f.okey[i]]
            anchored[sent[i]] = True
        elif f.okey[i] in q or not _same_kind(f.ok[i], f.kc[j]) or not terse and C[i, j] > cfg.unrelated_cost:
            continue  # the question's premise, or no value this word could replace
        else:
            m = (1.0 - C[i, j]) / 2
        best[sent[i]] = max(best[sent[i]], m)
    return best


def _clause_targets(ta: TextAlignment, correction: str, sent: np.ndarray, marked: Sequence[int], cfg: RewardConfig,
                    q: set, f: Facts) -> List[Tuple[List[int], bool, Optional[int]]]:
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
    k = int(sent.max(initial=0)) + 1
    strong = {int(sent[i]) for i in marked}
    says, df, share = _sentences_say(f, sent, k, q)
    targets = []
    for a, b in clause_spans(correction):
        js = [j for j, t in enumerate(ta.correction_tokens) if a <= t.start < b and f.kc[j] in CONTENT_KINDS]
        if not js:
            continue
        terse = len(js) <= cfg.terse_words
        score = share * (cfg.terse_question if terse else cfg.question_weight)
        anchored = np.zeros(k, bool)
        for j in js:
            score += _word_fit(ta.cost, f, sent, k, j, terse, q, df, cfg, anchored)
        if terse:
            keys = {f.ckey[j] for j in js}
            score -= np.array([100.0 if keys <= says[t] else 0.0 for t in range(k)])
        if strong:
            score = np.where(anchored | np.isin(np.arange(k), sorted(strong)), score, -np.inf)
        t = int(np.argmax(score))
        targets.append((js, terse, t if np.isfinite(score[t]) and score[t] > 0 else None))
    return targets


# --------------------------------------------------------------------------- evidence
@dataclass
class Evidence:
    """Why each output word gets its reward. status: (n,) object: "confirmed", "contradicted", "absent" or
    "context"; why: per word: match, mentioned, same value, exact, replaced, alternative, answer, negated, quoted,
    swapped, polarity, same word, same name; paraphrase, unrelated, other kind, elaboration, conceded, premise,
    elsewhere, absent; context; deleted; cost: (n,) the recorded alignment cost behind it (nan: none); rewrite: the
    correction rewrites everything (``rewrite_share``)."""

    status: np.ndarray
    why: List[str]
    cost: np.ndarray
    rewrite: bool


class _State:
    """The evidence being built: status / why / cost per word, the correction words used up, and ``put`` (which
    keeps a contradiction outside the addressed sentences ``absent``, "elsewhere")."""

    def __init__(self, n: int, allowed: np.ndarray):
        self.status = np.array(["absent"] * n, dtype=object)
        self.why, self.cost = ["absent"] * n, np.full(n, np.nan)
        self.used: set = set()
        self.allowed = allowed

    def put(self, i, st, reason, c=np.nan) -> None:
        if st == "contradicted" and not self.allowed[i]:  # another sentence: the correction does not speak to it
            st, reason = "absent", "elsewhere"
        self.status[i], self.why[i], self.cost[i] = st, reason, c


def _from_ops(ta: TextAlignment, f: Facts, mk: List[str], cfg: RewardConfig, scope: Scope, conceded: set,
              s: _State) -> List[Tuple[int, int]]:
    """The evidence of each alignment op (marks first); returns the replacements left to :func:`_contradictions`."""
    dp_pairs = []
    allowed = scope.allowed
    for i, o in enumerate(ta.alignment.op_for_output()):
        if mk[i]:
            s.put(i, "contradicted", mk[i])
            if s.status[i] == "contradicted":
                continue
        if o.op == "delete":
            s.put(i, "absent", "absent") if cfg.evidence else s.put(i, "contradicted", "deleted")
            continue
        j, c = o.j, o.cost
        exact_pair = cfg.exact and f.ok[i] in EXACT_KINDS and f.kc[j] in EXACT_KINDS
        if j in conceded:  # "Sydney is the biggest city, but ...": what the user concedes confirms nothing
            s.put(i, "absent", "conceded", c)
        elif o.op == "match":
            if exact_pair and f.okey[i] != f.ckey[j]:
                if scope.premise[i]:  # "巴西" matched with "巴西利亚": the question's subject, not the claim
                    s.put(i, "absent", "premise", c)
                    continue
                s.put(i, "contradicted", "exact", c)
            else:
                s.put(i, "confirmed", "match", c)
            if allowed[i]:  # a pair in another sentence leaves the correction's word free for this one
                s.used.add(j)
        elif exact_pair and f.okey[i] == f.ckey[j]:
            if allowed[i]:
                s.used.add(j)
            s.put(i, "confirmed", "same value", c)
        elif not cfg.evidence:
            s.used.add(j)
            s.put(i, "absent", "paraphrase", c) if c <= cfg.neutral_band else s.put(i, "contradicted", "replaced", c)
        else:
            s.put(i, "absent", "absent", c)  # decided in _contradictions
            dp_pairs.append((i, j))
    return dp_pairs


def _mentioned(C, f: Facts, neg_j: set, conceded: set, s: _State) -> None:
    """A word the correction repeats anywhere is confirmed, whatever the order (not in a concession)."""
    where = {}
    for j in range(len(f.kc)):
        if j not in neg_j and f.kc[j] != "punct" and j not in conceded:
            where.setdefault(f.ckey[j], j)
    for i in range(len(f.ok)):
        if s.status[i] == "absent" and f.ok[i] != "punct" and f.okey[i] in where:
            if s.allowed[i]:  # a repetition in another sentence leaves the word free to correct this one
                s.used.add(where[f.okey[i]])
            s.put(i, "confirmed", "mentioned", C[i, where[f.okey[i]]])


def _copies(ta: TextAlignment, f: Facts, cfg: RewardConfig, s: _State) -> None:
    """Copies carry the evidence (and the cost) of the word they copy: every copy of a contradicted word
    ("伦敦伦敦"), and with ``exact`` every part of a contradicted name or code ("J. R. R. Tolkien")."""
    n = len(f.ok)
    wrong = {f.okey[i]: s.cost[i] for i in range(n) if s.status[i] == "contradicted" and f.ok[i] in CONTENT_KINDS}
    for i in range(n):
        if s.status[i] == "absent" and f.ok[i] in CONTENT_KINDS and f.okey[i] in wrong:
            s.put(i, "contradicted", "same word", wrong[f.okey[i]])
    if not cfg.exact:
        return
    out_t = ta.output_tokens
    for unit in _units(out_t, ta.output, f.ok):
        bad = [s.cost[i] for i in unit if s.status[i] == "contradicted"]
        if bad:
            for i in unit:
                initial = len(out_t[i].text) == 1 and out_t[i].text.isupper()
                if s.status[i] == "absent" or f.ok[i] == "punct" or initial:
                    s.put(i, "contradicted", "same name", np.nanmax(bad) if np.isfinite(bad).any() else np.nan)


def _rewrite_and_context(f: Facts, cfg: RewardConfig, s: _State) -> bool:
    """The rewrite fallback's verdict (``rewrite_share``), and ``keep_context``: words before the first and after the
    last word the correction speaks to are kept context."""
    n = len(f.ok)
    content = [i for i in range(n) if f.ok[i] in CONTENT_KINDS]
    rewrite = False
    if cfg.rewrite_share > 0 and content:
        share = np.mean([s.status[i] == "confirmed" for i in content])
        new = sum(1 for j in range(len(f.kc)) if f.kc[j] in CONTENT_KINDS and f.ckey[j] not in set(f.okey))
        rewrite = share < cfg.rewrite_share and new >= len(content)
    if cfg.keep_context:
        spoken = [i for i in range(n) if s.status[i] in ("confirmed", "contradicted") or s.why[i] == "paraphrase"]
        if spoken:
            for i in list(range(spoken[0])) + list(range(spoken[-1] + 1, n)):
                if s.status[i] == "absent" and f.ok[i] != "punct":
                    s.put(i, "context", "context")
    return rewrite


def evidence(ta: TextAlignment, correction: str, mk: List[str], cfg: RewardConfig, affirmed: bool, f: Facts,
             scope: Optional[Scope] = None) -> Evidence:
    """Why each output word gets its reward (see the module docstring); (n,) arrays. mk: per word, "" or
    why the correction rejects it outright (:func:`marks`); scope: where a contradiction may be found
    (:class:`Scope`; default everywhere)."""
    n = len(ta.output_tokens)
    scope = scope or Scope.everywhere(n)
    s = _State(n, scope.allowed)
    neg_j = _negated_j(ta, correction) if cfg.negation else set()
    elaborating = cfg.evidence and cfg.elaboration and affirmed
    conceded = _conceded_j(ta, correction, f) if cfg.evidence and cfg.quotes else set()
    dp_pairs = _from_ops(ta, f, mk, cfg, scope, conceded, s)
    rewrite = False
    if cfg.evidence:
        _mentioned(ta.cost, f, neg_j, conceded, s)
        marked = {f.okey[i] for i in range(n) if mk[i]}  # a value named as wrong is no alternative to pair
        s.used |= {j for j in range(len(f.kc)) if f.ckey[j] in marked}
        _contradictions(ta.cost, f, s, neg_j, dp_pairs, cfg, elaborating, scope)
        _copies(ta, f, cfg, s)
        rewrite = _rewrite_and_context(f, cfg, s)
    return Evidence(s.status, s.why, s.cost, rewrite)


#: how the clause after a concession starts: "Auckland is the biggest city, but the capital is Wellington."
_BUT = {"zh": ("但是", "但", "不过", "可是", "然而"), "en": ("but", "however", "though", "yet")}


def _conceded_j(ta: TextAlignment, correction: str, f: Facts) -> set:
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


# --------------------------------------------------------------------------- contradictions
def _compatible(f: Facts, i: int, j: int) -> bool:
    """Content words of which neither or both are numbers; numbers only when their units agree (70公斤 is no
    alternative to 8%)."""
    ok, kc = f.ok, f.kc
    if not (ok[i] in CONTENT_KINDS and kc[j] in CONTENT_KINDS and (ok[i] == "number") == (kc[j] == "number")):
        return False
    return ok[i] != "number" or not f.ounit[i] or not f.cunit[j] or f.ounit[i] == f.cunit[j]


def _exact(f: Facts, cfg: RewardConfig, i: int, j: int) -> bool:
    return cfg.exact and f.ok[i] in EXACT_KINDS and f.kc[j] in EXACT_KINDS


def _dp_reasons(C, f: Facts, s: _State, dp_pairs, cfg: RewardConfig, elaborating: bool) -> None:
    """Why the alignment's pair is no evidence, unless a class of :func:`_contradictions` says otherwise."""
    for i, j in dp_pairs:
        if not _compatible(f, i, j):
            s.put(i, "absent", "other kind", C[i, j])
        elif _exact(f, cfg, i, j):
            continue
        elif C[i, j] <= cfg.neutral_band and j not in s.used:
            s.used.add(j)
            s.put(i, "absent", "paraphrase", C[i, j])
        elif C[i, j] > cfg.unrelated_cost:
            s.put(i, "absent", "unrelated", C[i, j])
        elif elaborating:
            s.put(i, "absent", "elaboration", C[i, j])


def _candidate_pairs(C, f: Facts, s: _State, neg_j: set, dp: dict, cfg: RewardConfig, elaborating: bool,
                     scope: Scope) -> list:
    """(class, cost, i, j) of every pair that could be a contradiction (see :func:`_contradictions`), sorted."""
    low = max(cfg.neutral_band, cfg.align.match_threshold)
    cand = [i for i in range(len(f.ok)) if s.status[i] == "absent" and f.ok[i] in CONTENT_KINDS and scope.allowed[i]
            and not scope.premise[i]]
    free = [j for j in range(len(f.kc)) if j not in s.used and j not in neg_j and f.kc[j] in CONTENT_KINDS]
    pairs = []
    for i in cand:
        for j in free:
            if not _compatible(f, i, j):
                continue
            on_path = dp.get(i) == j
            if _exact(f, cfg, i, j):
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
    return pairs


def _greedy(pairs: list, s: _State) -> set:
    """Each word used once, most certain first; an alternative (class 3) only when mutually closest. Returns the
    correction words taken."""
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
        s.put(i, "contradicted", ("exact", "exact", "replaced", "alternative")[klass], c)
    return taken_j


def _answers(C, f: Facts, s: _State, neg_j: set, taken_j: set, elaborating: bool, scope: Scope) -> None:
    """Each terse clause whose words are all still unpaired contradicts the closest compatible word of the sentence
    it answers, whatever the cost."""
    for js, where in scope.answers:
        js = [j for j in js if j not in taken_j and j not in s.used and j not in neg_j]
        if elaborating or not js or any(s.status[i] == "contradicted" for i in np.flatnonzero(where)):
            continue  # the clause's words are all placed, or the sentence has its contradiction already
        options = [(C[i, j], i) for j in js for i in np.flatnonzero(where) if s.status[i] == "absent"
                   and scope.allowed[i] and not scope.premise[i] and _compatible(f, i, j)
                   and _same_kind(f.ok[i], f.kc[j])]
        if options:
            c, i = min(options)
            s.put(i, "contradicted", "answer", c)


def _contradictions(C, f: Facts, s: _State, neg_j: set, dp_pairs, cfg: RewardConfig, elaborating: bool,
                    scope: Scope) -> None:
    """Pair output words the correction does not confirm with words it brings, most certain first:
    (0) numbers / codes / names that differ, paired by the alignment; (1) the same paired anywhere
    in the correction (``alternatives`` "exact" or "all"; cost at most ``unrelated_cost``); (2)
    content words the alignment paired, cost above the neutral band (and the match threshold) and
    at most ``unrelated_cost``; (3) content words paired anywhere, mutually closest, same limits
    (``alternatives="all"``). Greedy, each word used once. The alignment's pairs inside the
    neutral band are paraphrases: "absent", and they use up their correction word. Then (4) each terse
    clause of the correction (``scope.answers``) whose words are all still unpaired contradicts the closest
    compatible word of the sentence it answers, whatever the cost ("皮肤。" -> 肝脏 in "人体最大的器官是肝脏").
    Numbers pair only with numbers, and only when their units agree (70公斤 is no alternative to 8%)."""
    _dp_reasons(C, f, s, dp_pairs, cfg, elaborating)
    pairs = _candidate_pairs(C, f, s, neg_j, dict(dp_pairs), cfg, elaborating, scope)
    taken_j = _greedy(pairs, s)
    _answers(C, f, s, neg_j, taken_j, elaborating, scope)


# --------------------------------------------------------------------------- omissions
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


# --------------------------------------------------------------------------- the whole reading of one pair
@dataclass
class Reading:
    """The rules' reading of one pair: the alignment used and the correction text it aligned (turned round under
    ``reorder``), the words' facts, the negated output words ((n,) bool), the outright marks, the scope and the
    evidence."""

    ta: TextAlignment
    aligned: str
    facts: Facts
    negated: np.ndarray
    marks: List[str]
    scope: Scope
    evidence: Evidence


@one_pair()
def read_pair(output: str, text: str, cfg: RewardConfig, encoder, tokens, question: Optional[str], affirmed: bool,
              info: dict) -> Reading:
    """The rules engine on one pair. text: the cleaned correction; tokens: the output's word tokens; affirmed: the
    reply starts with an affirmation (``elaboration``). Writes ``negated``, ``addressed_sentences`` and
    ``aligned_correction`` (when turned round) into ``info``. Each distinct text of the pair is tokenized and split
    once (:func:`~claw_lib.text.memo.one_pair`)."""
    ta, aligned, f = align_pair(output, text, cfg, encoder, tokens)
    if aligned != text:
        info["aligned_correction"] = aligned
    negated = negated_output(ta, aligned) if cfg.negation else np.zeros(len(tokens), bool)
    info["negated"] = [tokens[i].text for i in np.flatnonzero(negated)]
    mk = marks(ta, text, negated, cfg, f)
    q = content_keys(tokenize(question)) if question else set()  # the question's words, read once
    scope = scope_of(ta, aligned, mk, cfg, q, f, info)
    ev = evidence(ta, aligned, mk, cfg, affirmed, f, scope)
    return Reading(ta, aligned, f, negated, mk, scope, ev)
