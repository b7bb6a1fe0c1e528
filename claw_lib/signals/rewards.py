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

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

import numpy as np

from ..alignment.dp import align
from ..alignment.texts import TextAlignment, align_texts
from ..config import REWARD_STRATEGIES as STRATEGIES
from ..config import RewardConfig
from ..config import validate
from ..text.langs import warn_language_mismatch
from ..text.corrections import (CONTENT_KINDS, EXACT_KINDS, clean_correction, guess_lang, invert_copula,
                                negated_spans, value_key, word_kind)
from ..text.tokens import Token, check_text, subtokens_to_words, tokenize

__all__ = ["TokenRewards", "token_rewards", "omitted_at", "fuse_rewards", "STRATEGIES", "ARTICLE_RULES"]

#: RewardConfig overrides that switch off every rule of issue 16: the article's rule (replace and
#: delete -> reject, the cost decides match vs replace), as the kit had it before
ARTICLE_RULES = {"evidence": False, "exact": False, "neutral_band": 0.0, "reorder": False, "keep_context": False,
                 "alternatives": "none", "elaboration": False, "rewrite_share": 0.0}
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


def _negated_output(ta: TextAlignment, correction: str) -> np.ndarray:
    """Output words equal to a word the correction negates, else aligned to it (a negated word
    that the output says itself points at that word only: "Not for relativity" rejects
    "relativity", not the word the alignment happened to pair with the correction's copy)."""
    neg_j = _negated_j(ta, correction)
    neg_text = {ta.correction_tokens[j].text.casefold() for j in neg_j}
    out_text = {t.text.casefold() for t in ta.output_tokens}
    out = np.zeros(len(ta.output_tokens), dtype=bool)
    for o in ta.alignment.ops:
        if o.i is not None and o.j in neg_j and ta.correction_tokens[o.j].text.casefold() not in out_text:
            out[o.i] = True
    for i, t in enumerate(ta.output_tokens):
        if t.text.casefold() in neg_text:
            out[i] = True
    own = negated_spans(ta.output)  # the output says "never spoils" itself: no contradiction
    for i, t in enumerate(ta.output_tokens):
        if out[i] and any(t.start < e and t.end > s for s, e in own):
            out[i] = False
    return out


def token_rewards(output: str, correction: str, strategy: str = "binary", config: Optional[RewardConfig] = None,
                  encoder=None, judge=None, question: Optional[str] = None,
                  response_ids: Optional[Sequence[int]] = None) -> TokenRewards:
    """One reward per word token of ``output``, from the user's ``correction``.

    strategy: "binary", "continuous", "perplexity" or "sentence".
    encoder:  a loaded :class:`~claw_lib.alignment.encoders.Encoder` (default: ``config.align.encoder``).
    judge:    ``(model, tokenizer)`` for perplexity (default: the kit's tiny LM).
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
    ev = _evidence(ta, aligned, negated, cfg, bool(cc is not None and cc.affirmed))
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
            if omitted[i] or (contra[i] and ev.why[i] in ("deleted", "negated")):
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
    return TokenRewards(output, strategy, tokens, np.asarray(r, dtype=np.float64), rejected, ta, info)


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


def _evidence(ta: TextAlignment, correction: str, negated: np.ndarray, cfg: RewardConfig, affirmed: bool) -> _Evidence:
    """Why each output word gets its reward (see the module docstring); (n,) arrays."""
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

    def put(i, st, reason, c=np.nan):
        status[i], why[i], cost[i] = st, reason, c

    def exact_pair(i, j):
        return cfg.exact and ok[i] in EXACT_KINDS and kc[j] in EXACT_KINDS

    for i, o in enumerate(ta.alignment.op_for_output()):
        if negated[i]:
            put(i, "contradicted", "negated")
            continue
        if o.op == "delete":
            put(i, "absent", "absent") if cfg.evidence else put(i, "contradicted", "deleted")
            continue
        j, c = o.j, o.cost
        if o.op == "match":
            if exact_pair(i, j) and okey[i] != ckey[j]:
                put(i, "contradicted", "exact", c)
            else:
                put(i, "confirmed", "match", c)
            used.add(j)
        elif exact_pair(i, j) and okey[i] == ckey[j]:
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
        where = {}  # a word the correction repeats anywhere is confirmed, whatever the order
        for j in range(m):
            if j not in neg_j and kc[j] != "punct":
                where.setdefault(ckey[j], j)
        for i in range(n):
            if status[i] == "absent" and ok[i] != "punct" and okey[i] in where:
                used.add(where[okey[i]])
                put(i, "confirmed", "mentioned", C[i, where[okey[i]]])
        _contradictions(C, ok, kc, okey, ckey, status, used, neg_j, dp_pairs, cfg, elaborating, put)
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
                and not text[t.end:tokens[k + 1].start].strip()):
            cur.append(k)
        else:
            units.append(cur)
            cur = []
    units.append(cur)
    return [u for u in units if sum(1 for i in u if kinds[i] in ("name", "code")) + sum(
        1 for i in u if tokens[i].text in "()") >= 2]


def _contradictions(C, ok, kc, okey, ckey, status, used, neg_j, dp_pairs, cfg, elaborating, put) -> None:
    """Pair output words the correction does not confirm with words it brings, most certain first:
    (0) numbers / codes / names that differ, paired by the alignment; (1) the same paired anywhere
    in the correction (``alternatives`` "exact" or "all"; cost at most ``unrelated_cost``); (2)
    content words the alignment paired, cost above the neutral band (and the match threshold) and
    at most ``unrelated_cost``; (3) content words paired anywhere, mutually closest, same limits
    (``alternatives="all"``). Greedy, each word used once. The alignment's pairs inside the
    neutral band are paraphrases: "absent", and they use up their correction word."""
    dp = dict(dp_pairs)
    low = max(cfg.neutral_band, cfg.align.match_threshold)

    def compatible(i, j):
        return ok[i] in CONTENT_KINDS and kc[j] in CONTENT_KINDS and (ok[i] == "number") == (kc[j] == "number")

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
    cand = [i for i in range(len(ok)) if status[i] == "absent" and ok[i] in CONTENT_KINDS]
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
            elif elaborating or not low < C[i, j] <= cfg.unrelated_cost:
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


def _perplexity(output, correction, tokens, cfg, judge, question, info, response_ids=None) -> TokenRewards:
    from ..models.lm import encode, encode_pair, ids_logprobs, load_causal_lm, pad_token_id
    from ..prompts import build_prompt, response_text
    from ..text.tokens import subtoken_spans

    model, tok = judge if judge is not None else load_causal_lm("tiny")
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
