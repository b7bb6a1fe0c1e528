"""From an alignment (or a judge LM) to one reward per output token (notebooks 03, 04, 05, 07).

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
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

import numpy as np

from .corrections import clean_correction, is_chinese, negated_spans
from .semantic import AlignConfig, TextAlignment, align_texts
from .tokens import Token, map_subtokens_to_words, subtokens_to_words, tokenize, words_to_subtokens

__all__ = ["RewardConfig", "TokenRewards", "token_rewards", "omitted_at", "fuse_rewards", "policy_token_rewards",
           "check_lengths", "STRATEGIES", "subtoken_spans"]

STRATEGIES = ("binary", "continuous", "perplexity", "sentence")


@dataclass
class RewardConfig:
    """Constants of every strategy (defaults: the article's values, and the kit's alignment)."""

    match: float = 0.5
    """reward of a matched token (binary, sentence)"""
    reject: float = -1.0
    """reward of a replaced, deleted or negated token (binary, sentence)"""
    a: float = 0.5
    """continuous: reward = a - b * cost, clipped to [lo, hi]"""
    b: float = 2.0
    lo: float = -1.0
    hi: float = 0.5
    ppl_scale: float = 5.0
    """perplexity: nats that map to a reward of 1"""
    contrast: bool = True
    """perplexity: subtract log p without the correction"""
    clean: bool = True
    """clean the correction first (drop lead-ins and asides, detect affirmations)"""
    negation: bool = True
    """reject output words matching words the correction negates"""
    omissions: bool = False
    """charge omissions: a run of inserted correction words (what the output left out; punctuation
    aside) rejects the output word produced in its place, the next one (or the last one when the
    output stopped early). Off in the tutorials (the article's insertions attach to nothing); on in
    PPO (``PPOConfig.omissions``), where a policy otherwise learns to stop early: "The capital."
    matches every word it says (measured on the two-part questions, notebook 09)"""
    align: AlignConfig = field(default_factory=AlignConfig)
    """encoder, layer, lexical weight, gap costs, threshold"""


@dataclass
class TokenRewards:
    """output: the text; tokens: its word tokens (n); rewards: (n,) float64; rejected: (n,) bool
    (replaced, deleted or negated); alignment: the alignment used (None for perplexity and
    affirmation/vague replies); info: strategy-specific details."""

    output: str
    strategy: str
    tokens: List[Token]
    rewards: np.ndarray
    rejected: np.ndarray
    alignment: Optional[TextAlignment] = None
    info: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """The CLI's JSON: strategy, tokens (text, start, end, reward), ops."""
        return {
            "strategy": self.strategy,
            "tokens": [{**t.to_dict(), "reward": round(float(r), 6)} for t, r in zip(self.tokens, self.rewards)],
            "ops": [o.to_dict() for o in self.alignment.alignment.ops] if self.alignment else [],
        }


def _negated_output(ta: TextAlignment, correction: str) -> np.ndarray:
    """Output words aligned to, or equal to, a word the correction negates."""
    spans = negated_spans(correction)
    neg_j = {j for j, t in enumerate(ta.correction_tokens) if any(t.start < e and t.end > s for s, e in spans)}
    neg_text = {ta.correction_tokens[j].text.casefold() for j in neg_j}
    out = np.zeros(len(ta.output_tokens), dtype=bool)
    for o in ta.alignment.ops:
        if o.i is not None and o.j in neg_j:
            out[o.i] = True
    for i, t in enumerate(ta.output_tokens):
        if t.text.casefold() in neg_text:
            out[i] = True
    return out


def token_rewards(output: str, correction: str, strategy: str = "binary", config: Optional[RewardConfig] = None,
                  encoder=None, judge=None, question: Optional[str] = None) -> TokenRewards:
    """One reward per word token of ``output``, from the user's ``correction``.

    strategy: "binary", "continuous", "perplexity" or "sentence".
    encoder:  a loaded :class:`~claw_lib.encoders.Encoder` (default: ``config.align.encoder``).
    judge:    ``(model, tokenizer)`` for perplexity (default: the kit's tiny LM).
    question: the question the output answers (perplexity context; optional).
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
    if not isinstance(output, str) or not isinstance(correction, str):
        raise TypeError("output and correction must be strings")
    cfg = config or RewardConfig()
    tokens = tokenize(output)
    n = len(tokens)
    cc = clean_correction(correction) if cfg.clean else None
    text = cc.text if cc is not None else correction
    info = {"clean_correction": text}
    if strategy == "perplexity":
        return _perplexity(output, text if text.strip() else correction, tokens, cfg, judge, question, info)
    if cc is not None and (cc.affirmation or not text.strip()):
        kind = "affirmation" if cc.affirmation else "vague"
        value = cfg.match if kind == "affirmation" else 0.0
        if strategy == "continuous" and kind == "affirmation":
            value = cfg.hi
        info[kind] = True
        return TokenRewards(output, strategy, tokens, np.full(n, value, dtype=np.float64), np.zeros(n, bool), None, info)
    ta = align_texts(output, text, cfg.align, encoder=encoder)
    ops = ta.alignment.op_for_output()
    rejected = np.array([o.op in ("replace", "delete") for o in ops], dtype=bool)
    negated = _negated_output(ta, text) if cfg.negation else np.zeros(n, bool)
    info["negated"] = [tokens[i].text for i in np.flatnonzero(negated)]
    rejected |= negated
    if cfg.omissions:
        omitted = omitted_at(ta)
        info["omitted_before"] = [tokens[i].text for i in np.flatnonzero(omitted)]
        rejected |= omitted
    if strategy == "binary":
        r = np.where(rejected, cfg.reject, cfg.match)
    elif strategy == "continuous":
        r = np.empty(n)
        for i, o in enumerate(ops):
            charged = o.op == "delete" or negated[i] or (cfg.omissions and omitted[i])
            r[i] = cfg.lo if charged else np.clip(cfg.a - cfg.b * o.cost, cfg.lo, cfg.hi)
    else:  # sentence
        r = np.full(n, cfg.reject if rejected.any() else cfg.match)
    return TokenRewards(output, strategy, tokens, np.asarray(r, dtype=np.float64), rejected, ta, info)


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


def _perplexity(output, correction, tokens, cfg, judge, question, info) -> TokenRewards:
    from .lm import load_causal_lm, response_logprobs
    from .world import build_prompt

    model, tok = judge if judge is not None else load_causal_lm("tiny")
    lang = "zh" if is_chinese(output + correction) else "en"
    q = question or ""
    lead = "" if lang == "zh" or not output or output[0].isspace() else " "  # the plain format's answer space
    prompts = [build_prompt(q, lang, correction, tokenizer=tok), build_prompt(q, lang, tokenizer=tok)]
    n = len(tokens)
    if not output.strip():
        return TokenRewards(output, "perplexity", tokens, np.zeros(n), np.zeros(n, bool), None, info)
    s = response_logprobs(model, tok, prompts if cfg.contrast else prompts[:1], [lead + output] * (2 if cfg.contrast else 1))
    subs = [Token(t.text, max(0, t.start - len(lead)), max(0, t.end - len(lead))) for t in s.tokens[0]]
    with_c = s.logprobs[0]
    if cfg.contrast:
        sub_score = with_c - s.logprobs[1]
        word = subtokens_to_words(sub_score, tokens, subs, "sum", fill=0.0)
        r = np.clip(word / cfg.ppl_scale, -1.0, 1.0)
    else:
        sub_score = with_c
        word = subtokens_to_words(sub_score, tokens, subs, "sum", fill=0.0)
        r = np.clip(1.0 + word / cfg.ppl_scale, -1.0, 1.0)
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


def check_lengths(rewards: Sequence[float], response_ids: Sequence[int], what: str = "rewards") -> None:
    """Raise if there is not exactly one reward per response token (the PPO contract)."""
    if len(rewards) != len(response_ids):
        raise ValueError(f"length mismatch: {len(rewards)} {what} for {len(response_ids)} response tokens; "
                         "PPO needs exactly one per action token (special tokens included in the ids)")


def subtoken_spans(tokenizer, ids: Sequence[int]) -> List[Token]:
    """Character spans of each token id in the decoded text, found by incremental decoding (works
    for any tokenizer, also for ids that re-tokenising the text would not reproduce). A byte token
    that ends inside a character gets that character's span; special tokens get an empty span at
    the end of the text so far."""
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    spans, prev = [], 0
    pending = []
    kept: List[int] = []
    for k, t in enumerate(ids):
        if t in special:
            spans.append([prev, prev])
            continue
        kept.append(t)
        text = tokenizer.decode(kept, skip_special_tokens=True)
        complete = text.rstrip("\ufffd")
        spans.append([prev, len(complete)])
        if len(complete) == prev:          # inside a multi-byte character: wait for its end
            pending.append(k)
        else:
            for p in pending:
                spans[p][1] = len(complete)
            pending = []
            prev = len(complete)
    full = tokenizer.decode(kept, skip_special_tokens=True)
    return [Token(full[s:e], s, e) for s, e in spans]


def policy_token_rewards(tr: TokenRewards, tokenizer, response_ids: Sequence[int], mode: str = "first",
                         special_value: float = 0.0) -> np.ndarray:
    """Word rewards -> one reward per policy action token (``response_ids``, e.g. eos included).

    mode: "first" (the word's reward on its first sub-token, 0 on the rest: the article's
    advice) or "spread" (on every sub-token). Special tokens get ``special_value``.
    Checks that the ids decode to ``tr.output`` and that the lengths agree.
    """
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    subs = subtoken_spans(tokenizer, response_ids)
    decoded = tokenizer.decode([t for t in response_ids if t not in special], skip_special_tokens=True)
    if decoded.strip() != tr.output.strip():
        raise ValueError(f"the response ids decode to {decoded!r}, not to the rewarded output {tr.output!r}")
    shift = decoded.find(tr.output.strip()) - tr.output.find(tr.output.strip())
    words = [Token(w.text, w.start + shift, w.end + shift) for w in tr.tokens]
    mapping = map_subtokens_to_words(words, subs)
    out = words_to_subtokens(tr.rewards, mapping, mode, fill=0.0)
    out[[k for k, t in enumerate(response_ids) if t in special]] = special_value
    check_lengths(out, response_ids)
    return out
