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

Evidence, not absence: the rules engine, :mod:`claw_lib.signals.rules`, says for every
output word whether the correction confirms it, contradicts it or does not speak to it (the rules and their
defaults are described there; each is a field of :class:`~claw_lib.config.RewardConfig`).

Binary: confirmed ``match``, contradicted ``reject``, absent ``absent``. Continuous: ``a - b C`` on
the recorded pair (confirmed words never below ``absent``), a contradiction never above 0 (``lo``
when the cost calls the pair close but exactness says it differs), negated words and omissions
``lo``. ``info["evidence"]`` says why each word got its reward. ``ARTICLE_RULES`` switches every
rule off (the article's replace / delete -> reject), for the tutorials that show it and for
comparison.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

import numpy as np

from ..alignment.texts import TextAlignment
from ..config import REWARD_STRATEGIES as STRATEGIES
from ..config import RewardConfig
from ..config import validate
from ..text.corrections import clean_correction, guess_lang
from ..text.langs import warn_language_mismatch
from ..prompts import build_prompt, response_text
from ..text.memo import one_pair
from ..text.tokens import Token, check_text, subtoken_spans, subtokens_to_words, tokenize
from ..utils import check_real, finite_array
from .rules import MARKS, Evidence, addressed_sentences, omitted_at, read_pair, sentence_of

__all__ = ["TokenRewards", "token_rewards", "evidence_rewards", "kept_reward", "rejected_reward", "affirmed_reward",
           "sentence_rewards", "omitted_at", "fuse_rewards", "STRATEGIES",
           "ARTICLE_RULES", "addressed_sentences", "sentence_of"]

#: RewardConfig overrides that switch off every evidence rule: the article's rule (replace and
#: delete -> reject, the cost decides match vs replace), as the kit had it before
ARTICLE_RULES = {"evidence": False, "exact": False, "neutral_band": 0.0, "reorder": False, "keep_context": False,
                 "alternatives": "none", "elaboration": False, "rewrite_share": 0.0, "local": False, "quotes": False,
                 "polarity": False, "swaps": False, "premise": False}


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
        aligned and its tokens (the ``j`` of every op indexes them), and the ops; through the reviser
        (:mod:`claw_lib.signals.reviser`) also ``source`` ("revision" | "rules"), the ``revision`` text and the
        ``reviser``'s candidates (then ``clean_correction`` and the ops are those of the revision when it was used)."""
        ta = self.alignment
        extra = {k: self.info[k] for k in ("source", "revision", "reviser") if k in self.info}
        return {**extra,
            "strategy": self.strategy,
            "tokens": [{**t.to_dict(), "reward": round(float(r), 6)} for t, r in zip(self.tokens, self.rewards)],
            "clean_correction": self.info.get("clean_correction"),
            "correction_tokens": [t.to_dict() for t in ta.correction_tokens] if ta else [],
            "ops": [o.to_dict() for o in ta.alignment.ops] if ta else [],
        }



@one_pair()
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

    Each distinct text of the pair (the output, the cleaned correction, its copula turned round, its clauses) is
    tokenized and split once (:func:`~claw_lib.text.memo.one_pair`).
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
    if not isinstance(output, str) or not isinstance(correction, str):
        raise TypeError("output and correction must be strings")
    cfg = config or RewardConfig()
    validate(cfg, "reward.")  # the library refuses what the command line refuses (a NaN constant, a bad range)
    _check_judge_args(strategy, cfg, judge, response_ids, output)
    warn_language_mismatch(output, correction)
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
        value = affirmed_reward(strategy, cfg) if kind == "affirmation" else 0.0
        info[kind] = True
        return TokenRewards(output, strategy, tokens, np.full(n, value, dtype=np.float64), np.zeros(n, bool), None, info)
    rd = read_pair(output, text, cfg, encoder, tokens, question, bool(cc is not None and cc.affirmed), info)
    ev = rd.evidence
    info["evidence"] = ev.why
    omitted = omitted_at(rd.ta) if cfg.omissions else np.zeros(n, bool)
    if cfg.omissions:
        info["omitted_before"] = [tokens[i].text for i in np.flatnonzero(omitted)]
    rejected = (ev.status == "contradicted") | omitted
    r = evidence_rewards(strategy, ev, omitted, cfg)
    if ev.rewrite:
        info["rewrite"] = True
        r = r * cfg.rewrite_scale
    if judge is not None and cfg.judge_weight > 0 and strategy != "sentence":
        r, rejected = _judge_fill(output, text, tokens, cfg, judge, question, ev, r, rejected, info)
    return TokenRewards(output, strategy, tokens, r, rejected, rd.ta, info)


# --------------------------------------------------------------------------- the formulas, once
# One word's reward per reading of it, for the rules' evidence (:func:`evidence_rewards`) and for a revision
# (:func:`claw_lib.signals.reviser.revision_rewards`) alike; "sentence" takes binary's per-word values, then
# :func:`sentence_rewards`. A new reward strategy adds its branch here.
def _graded(cost: float, cfg: RewardConfig) -> float:
    """continuous: ``a - b C`` clipped to [lo, hi]; an infinite cost: ``lo``."""
    return float(np.clip(cfg.a - cfg.b * cost, cfg.lo, cfg.hi)) if np.isfinite(cost) else cfg.lo


def kept_reward(strategy: str, cost: float, cfg: RewardConfig, floor: bool = True) -> float:
    """A word the correction confirms (or the revision keeps): ``match``; continuous: ``a - b C`` clipped, and with
    ``floor`` never below ``absent``."""
    if strategy != "continuous":
        return cfg.match
    return max(_graded(cost, cfg), cfg.absent) if floor else _graded(cost, cfg)


def rejected_reward(strategy: str, cost: float, cfg: RewardConfig, deleted: bool = False,
                    exact: bool = True) -> float:
    """A word the correction contradicts (or the revision changes): ``reject``; continuous: ``a - b C`` where that is
    negative (or always, without ``exact``), else ``lo`` (a pair the cost calls close that exactness does not:
    "1946" / "1945"); ``deleted`` (a deleted word, a mark, an omission): ``lo``."""
    if strategy != "continuous":
        return cfg.reject
    formula = _graded(cost, cfg)
    return formula if not deleted and (formula < 0 or not exact) else cfg.lo


def affirmed_reward(strategy: str, cfg: RewardConfig) -> float:
    """A word in an answer the user affirms as a whole (or that needs no change): ``match``; continuous: ``hi``."""
    return cfg.hi if strategy == "continuous" else cfg.match


def sentence_rewards(rejected: np.ndarray, cfg: RewardConfig) -> np.ndarray:
    """"sentence": (n,) ``reject`` on every word when any word is rejected, else ``match``."""
    return np.full(len(rejected), cfg.reject if rejected.any() else cfg.match)


def evidence_rewards(strategy: str, ev: Evidence, omitted: np.ndarray, cfg: RewardConfig) -> np.ndarray:
    """(n,) float64 rewards of the rules' evidence (:class:`~claw_lib.signals.rules.Evidence`) for "binary",
    "continuous" or "sentence" (see the module docstring); omitted: (n,) bool, the words charged for an omission."""
    contra = ev.status == "contradicted"
    rejected = contra | omitted
    if strategy == "sentence":
        return np.asarray(sentence_rewards(rejected, cfg), dtype=np.float64)
    r = np.full(len(ev.why), float(cfg.absent))
    for i in range(len(r)):
        if rejected[i]:
            r[i] = rejected_reward(strategy, ev.cost[i], cfg, omitted[i] or ev.why[i] in ("deleted",) + MARKS,
                                   exact=cfg.evidence)
        elif ev.status[i] == "confirmed":
            r[i] = kept_reward(strategy, ev.cost[i], cfg, floor=cfg.evidence)
        elif ev.status[i] == "context":
            r[i] = affirmed_reward(strategy, cfg)
    return r


def _judge_fill(output, text, tokens, cfg, judge, question, ev, r, rejected, info):
    """A judge LM speaks where the rules found no evidence; where they did, they decide. Returns (rewards,
    rejected)."""
    jr = _perplexity(output, text, tokens, cfg, judge, question, {}).rewards
    silent = np.array([s == "absent" for s in ev.status]) & ~rejected
    r = np.where(silent, np.clip(cfg.judge_weight * jr, cfg.lo, cfg.hi), r)
    info["judge_filled"] = [tokens[i].text for i in np.flatnonzero(silent)]
    return r, rejected | (silent & (r < 0))


def _check_judge_args(strategy: str, cfg: RewardConfig, judge, response_ids, output: str = "") -> None:
    """Refuse (ValueError naming it) what would be silently ignored or fail deep in torch: ``judge_weight > 0``
    without a judge (R01: the rewards were those of weight 0), a judge that is not ``(model, tokenizer)`` (R05),
    perplexity's ``response_ids`` that are empty for a non-empty output, not integers, or beyond the judge's
    vocabulary (R07, R06; the other strategies do not read them)."""
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
    # lazy: torch loads for the perplexity judge only (the rules' rewards and `claw align` stay torch-free)
    from ..models.lm import encode, encode_pair, ids_logprobs, load_causal_lm, pad_token_id

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
    for k, w in weights.items():
        check_real(f"weights[{k!r}]", w)
    rewards = {k: finite_array(f"rewards[{k!r}]", v) for k, v in rewards.items()}
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
