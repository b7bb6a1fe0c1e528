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

from ..alignment.texts import TextAlignment, align_texts
from ..config import REWARD_STRATEGIES as STRATEGIES
from ..config import RewardConfig
from ..text.corrections import clean_correction, guess_lang, negated_spans
from ..text.tokens import Token, check_text, subtokens_to_words, tokenize

__all__ = ["TokenRewards", "token_rewards", "omitted_at", "fuse_rewards", "STRATEGIES"]


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
    ta = align_texts(output, text, cfg.align, encoder=encoder, output_tokens=tokens)
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
