"""A token-level reward model: predict the alignment's token rewards from the output alone
(the seed article's section 7, "奖励模型的微调"; notebook 13).

The alignment (:func:`claw_lib.signals.rewards.token_rewards`) needs the user's correction. A
reward model is trained on (output, correction) pairs once, then scores a new output *without* a
correction: here a logistic regression on frozen contextual word vectors of the output
(:meth:`claw_lib.alignment.encoders.Encoder.embed_words`), predicting for every word the
probability that the alignment's binary reward would be negative (-1).

* Data (:func:`claw_lib.toy.probe.world_rows`): the toy world's facts, answered rightly or wrongly, and the
  :class:`~claw_lib.toy.users.CorrectingUser`'s reply; each row is in the probe-set format
  (``id``, ``lang``, ``kind``, ``output``, ``correction``, ``rejected`` character spans), so
  :func:`claw_lib.toy.probe.probe_metrics` reads it too.
* Labels (:func:`label_rows`): per word, ``token_rewards(output, correction, "binary") < 0``.
* Model (:class:`TokenRewardModel`): standardised features, L2-regularised logistic regression
  fitted by Newton's method (deterministic, no learning rate, well under a second on one thread).
* Metrics (:func:`evaluate`): per-word accuracy, precision and recall of the negative words
  against the alignment's labels, the hit rate against the rejected spans (lowest predicted
  reward inside a span; ties share the credit, as in :mod:`claw_lib.toy.probe`), and the share of
  right answers without a negative word.

What it can and cannot know: without the correction, the model only sees the output. It can
learn which words tend to be wrong *in the world it was trained on* (the value slot of an answer,
the wrong values it has seen next to a country), not the truth of a fact it has never seen.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..text.tokens import Token, tokenize
from .rewards import TokenRewards, token_rewards

__all__ = ["world_rows", "label_rows", "word_features", "LabelledRows", "TokenRewardModel", "evaluate",
           "baseline_metrics", "value_auc", "MATCH", "REJECT"]

#: the binary strategy's rewards (RewardConfig defaults): what the model's expected reward mixes
MATCH, REJECT = 0.5, -1.0


# --------------------------------------------------------------------------- data (the rows: claw_lib.toy.probe.world_rows)
def word_features(encoder, output: str) -> np.ndarray:
    """Features of the OUTPUT only: (n_words, d) float32, one row per word token of
    :func:`claw_lib.text.tokens.tokenize` (``d`` = the encoder's hidden size, 384 for e5); the
    contextual vector of the encoder's layer, sub-tokens mean-pooled per word."""
    return encoder.embed_words(output).vectors


@dataclass
class LabelledRows:
    """rows: the pairs; tokens[r]: word tokens of row r's output (n_r); X[r]: (n_r, d) features;
    y[r]: (n_r,) bool, True where the alignment's binary reward is negative; rewards[r]: (n_r,)
    the alignment's binary rewards (+0.5 / 0 / -1)."""

    rows: List[dict]
    tokens: List[List[Token]]
    X: List[np.ndarray]
    y: List[np.ndarray]
    rewards: List[np.ndarray] = field(default_factory=list)

    def stacked(self) -> Tuple[np.ndarray, np.ndarray]:
        """All words of all rows: X (N, d), y (N,) bool, N = total word count."""
        d = self.X[0].shape[1] if self.X else 0
        X = np.concatenate(self.X) if self.X else np.zeros((0, d), np.float32)
        y = np.concatenate(self.y) if self.y else np.zeros(0, bool)
        return X, y


def label_rows(rows: Sequence[dict], encoder, config=None) -> LabelledRows:
    """Label every output word with the alignment (binary token rewards from the row's
    correction, ``encoder`` for the costs) and embed the output alone (:func:`word_features`)."""
    toks, X, y, rw = [], [], [], []
    for r in rows:
        tr = token_rewards(r["output"], r["correction"], "binary", config, encoder=encoder)
        f = word_features(encoder, r["output"])
        assert len(f) == len(tr.tokens)
        toks.append(tr.tokens)
        X.append(f)
        y.append(tr.rewards < 0)
        rw.append(tr.rewards)
    return LabelledRows(list(rows), toks, X, y, rw)


# --------------------------------------------------------------------------- model
class TokenRewardModel:
    """Logistic regression: p(word's reward is negative | its contextual vector).

    l2: weight of the L2 penalty ``l2 / 2 * |w|^2`` on the mean log-loss (features standardised
    with the training mean and standard deviation, so it is unit-free); iters: Newton steps.
    After :meth:`fit`: ``w`` (d,), ``b`` (float), ``mu`` and ``sd`` (d,).
    """

    def __init__(self, l2: float = 1e-2, iters: int = 25):
        if l2 <= 0:
            raise ValueError("l2 must be > 0 (keeps Newton's method finite on separable data)")
        self.l2, self.iters = float(l2), int(iters)
        self.w: Optional[np.ndarray] = None
        self.b = 0.0

    def _z(self, X: np.ndarray) -> np.ndarray:
        return (np.asarray(X, np.float64) - self.mu) / self.sd

    def fit(self, X: np.ndarray, y: np.ndarray) -> "TokenRewardModel":
        """X: (N, d) features; y: (N,) bool or 0/1 (1 = negative reward). Returns self."""
        X = np.asarray(X, np.float64)
        y = np.asarray(y, np.float64)
        if X.ndim != 2 or len(X) != len(y) or len(X) == 0:
            raise ValueError(f"need X (N, d) and y (N,) with N > 0, got {X.shape} and {y.shape}")
        self.mu = X.mean(0)
        self.sd = X.std(0) + 1e-6
        Z = np.hstack([self._z(X), np.ones((len(X), 1))])
        n, d1 = Z.shape
        theta = np.zeros(d1)
        reg = np.full(d1, self.l2)
        reg[-1] = 0.0  # no penalty on the bias
        for _ in range(self.iters):
            p = 1 / (1 + np.exp(-np.clip(Z @ theta, -30, 30)))
            grad = Z.T @ (p - y) / n + reg * theta
            H = (Z * (p * (1 - p))[:, None]).T @ Z / n + np.diag(reg) + 1e-9 * np.eye(d1)
            step = np.linalg.solve(H, grad)
            theta -= step
            if np.abs(step).max() < 1e-8:
                break
        self.w, self.b = theta[:-1], float(theta[-1])
        return self

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        """X: (N, d) -> (N,) float64 in [0, 1], the probability of a negative reward."""
        if self.w is None:
            raise RuntimeError("fit the model first")
        X = np.asarray(X, np.float64).reshape(-1, len(self.w))
        return 1 / (1 + np.exp(-np.clip(self._z(X) @ self.w + self.b, -30, 30)))

    @staticmethod
    def expected_reward(p: np.ndarray) -> np.ndarray:
        """The binary reward expected when a word is rejected with probability p, else matched:
        ``REJECT * p + MATCH * (1 - p)`` in [-1, 0.5]; negative iff p > 1/3."""
        p = np.asarray(p, np.float64)
        return REJECT * p + MATCH * (1 - p)

    def score(self, output: str, encoder) -> TokenRewards:
        """One predicted reward per word token of ``output`` (any string, also "" or emoji): the
        expected binary reward of :meth:`expected_reward`; ``rejected`` where it is negative;
        ``info["p_negative"]`` the probabilities. No correction is used."""
        toks = tokenize(output)
        p = self.predict_proba(word_features(encoder, output)) if toks else np.zeros(0)
        r = self.expected_reward(p)
        return TokenRewards(output, "reward_model", toks, r, r < 0, None, {"p_negative": p})

    def as_strategy(self, encoder) -> Callable[[str, str], TokenRewards]:
        """A ``(output, correction) -> TokenRewards`` callable for
        :func:`claw_lib.toy.probe.probe_metrics`; the correction is ignored."""
        def reward_model(output: str, correction: str) -> TokenRewards:
            return self.score(output, encoder)
        return reward_model


# --------------------------------------------------------------------------- metrics
def _inside(tok: Token, spans) -> bool:
    return any(tok.start < e and tok.end > s for s, e in spans)


def evaluate(pred_rewards: Sequence[np.ndarray], data: LabelledRows) -> Dict[str, float]:
    """Predicted rewards per row (``pred_rewards[r]``: (n_r,), negative = "rejected") against
    the alignment's labels and the rows' rejected spans.

    * ``accuracy``: share of words whose sign (negative or not) agrees with the alignment's;
    * ``precision`` / ``recall``: of the predicted negative words against the alignment's
      negative words (nan when undefined);
    * ``hit_rate``: over rows with a rejected span, the share of the lowest-predicted words that
      lie inside it (ties share the credit, :func:`claw_lib.toy.probe.probe_metrics`);
    * ``right_ok``: over rows without a span (right answers), the share with no negative word;
    * ``n_words``, ``n_rows``, ``neg_share`` (share of the alignment's negative words).
    """
    tp = fp = fn = agree = n = 0
    hits, ok = [], []
    for r, tk, y, pr in zip(data.rows, data.tokens, data.y, pred_rewards):
        pr = np.asarray(pr, np.float64)
        if len(pr) != len(y):
            raise ValueError(f"row {r['id']}: {len(pr)} predictions for {len(y)} words")
        neg = pr < 0
        tp += int((neg & y).sum())
        fp += int((neg & ~y).sum())
        fn += int((~neg & y).sum())
        agree += int((neg == y).sum())
        n += len(y)
        if r["rejected"] and len(pr):
            flags = np.array([_inside(t, r["rejected"]) for t in tk], bool)
            hits.append(float(flags[np.isclose(pr, pr.min())].mean()))
        elif not r["rejected"]:
            ok.append(float(not neg.any()))
    pos = sum(int(y.sum()) for y in data.y)
    return {"n_rows": len(data.rows), "n_words": n, "neg_share": pos / n if n else float("nan"),
            "accuracy": agree / n if n else float("nan"),
            "precision": tp / (tp + fp) if tp + fp else float("nan"),
            "recall": tp / (tp + fn) if tp + fn else float("nan"),
            "hit_rate": float(np.mean(hits)) if hits else float("nan"),
            "right_ok": float(np.mean(ok)) if ok else float("nan")}


def value_auc(pred_rewards: Sequence[np.ndarray], data: LabelledRows) -> float:
    """Can the model tell a wrong value from a right one? Over rows with a ``value`` span
    (:func:`~claw_lib.toy.probe.world_rows`), the probability that a random wrong answer's value words get a lower
    mean predicted reward than a random right answer's (ties count 1/2): 0.5 = no knowledge of
    the facts, 1 = it always knows. nan without both kinds."""
    wrong, right = [], []
    for r, tk, pr in zip(data.rows, data.tokens, pred_rewards):
        if "value" not in r:
            continue
        at = [k for k, t in enumerate(tk) if _inside(t, [r["value"]])]
        if not at:
            continue
        (wrong if r["rejected"] else right).append(float(np.mean(np.asarray(pr)[at])))
    if not wrong or not right:
        return float("nan")
    a, b = np.array(wrong)[:, None], np.array(right)[None, :]
    return float(np.mean((a < b) + 0.5 * (a == b)))


def baseline_metrics(data: LabelledRows) -> Dict[str, float]:
    """The majority-class baseline: every word gets the same non-negative reward. Its accuracy
    is the share of non-negative words, recall 0, and its hit rate (all words tied) the expected
    hit rate of a random ranking: the mean share of words inside the span."""
    return evaluate([np.full(len(y), MATCH) for y in data.y], data)
