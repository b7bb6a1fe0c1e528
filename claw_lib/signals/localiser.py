"""The learned localiser (the article's section 7, "训练一个专门的奖励模型来预测Token级的得分"; notebooks 10 and 13):
a small model reads (question, output, correction) and gives every output word a probability of being wrong.

Where the rules (:mod:`claw_lib.signals.rules`) hand-write how to read a correction, this model learns it from pairs
labelled by construction (:mod:`claw_lib.toy.localiser_data`: planted errors with known spans, replies in every
style). It reads no word's identity, only what the kit computes about each word (:func:`pair_features`):

* the word: its kind (number, code, name, content, function, punctuation), whether the correction repeats it, names
  it to reject it (:func:`~claw_lib.text.claims.quoted_spans`), negates it, swaps it or turns its polarity round, its
  lexical edit op against the correction (difflib), its closest correction word by characters and whether that word is
  new, how many new correction words of its kind (and unit) compete with it, whether the question says it, where it
  stands (in the output, in its sentence; the last content word);
* its sentence: how much of it the correction repeats, whether it is the sentence the correction speaks to most;
* the reply: an affirmation, empty after cleaning, ends with a question, how many new content words it brings;
* with ``features="rules"`` also the rules' reading of the word (status, reason, alignment cost: needs the encoder).

Model (:class:`LocaliserNet`): a linear layer, a bidirectional GRU over the output's words (a word's neighbours
matter: the unit after a number, the rest of a name), a logistic head. Trained by :func:`train` (Adam, seeded,
deterministic on one thread); saved with its settings in one file (:data:`CHECKPOINT`, ``tools/train_localiser.py``).

Rewards (:func:`learned_rewards`, one per word token, :class:`~claw_lib.signals.rewards.TokenRewards`): with ``p`` the
probability and ``t`` the checkpoint's threshold (chosen on the probe sets' dev splits): binary ``reject`` where
``p >= t``, else ``match``; continuous ``hi * (1 - p / t)`` below ``t`` and ``lo * (p - t) / (1 - t)`` from ``t`` on
(0 at ``t``); sentence ``reject`` on every word when any ``p >= t``; punctuation ``absent`` and never negative.
"""
from __future__ import annotations

import difflib
import functools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..alignment import encoders  # encoders.load_encoder looked up at the call (tests replace it)
from ..config import ALIGNMENT_STRATEGIES, RewardConfig
from ..text.claims import polarity_flips, quoted_spans, sentence_spans, swap_items
from ..text.corrections import CONTENT_KINDS, clean_correction, negated_spans, value_key, word_kind
from ..text.tokens import Token, tokenize
from .rewards import TokenRewards, token_rewards

__all__ = ["CHECKPOINT", "rules_readings", "LocaliserNotAvailableError", "Localiser", "LocaliserNet", "pair_features", "word_labels",
           "train", "load_localiser", "learned_rewards", "localise", "rewards_from", "FEATURE_SETS"]

#: the shipped checkpoint (``tools/train_localiser.py`` writes it)
CHECKPOINT = Path(__file__).resolve().parents[2] / "data" / "localiser.pt"
#: the feature sets: the lexical features alone (no encoder), or with the rules' reading of every word
FEATURE_SETS = ("lexical", "rules")
_KINDS = ("punct", "function", "number", "code", "name", "content")
_OPS = ("equal", "replace", "delete")
_STATUS = ("confirmed", "contradicted", "absent", "context")
_WHY = ("match", "mentioned", "same value", "exact", "replaced", "alternative", "answer", "negated", "quoted", "swapped",
        "polarity", "same word", "same name", "paraphrase", "unrelated", "other kind", "elaboration", "conceded",
        "premise", "elsewhere", "absent", "context", "deleted")
_LEADS = ("不对", "错", "不是", "no", "wrong", "not", "actually", "isn't", "mistake", "反了", "swapped", "mixed up")


class LocaliserNotAvailableError(FileNotFoundError):
    """The localiser's checkpoint is not on this machine."""


@functools.lru_cache(maxsize=65536)
def _kind(word: str) -> str:
    return word_kind(word)


@functools.lru_cache(maxsize=65536)
def _key(word: str) -> str:
    return value_key(word)


def _inside(tok: Token, spans) -> bool:
    return any(tok.start < e and tok.end > s for s, e in spans)


def _ratio(a: str, b: str) -> float:
    from rapidfuzz import fuzz  # lazy: rapidfuzz is a dev dependency (the feature's reference)

    return fuzz.ratio(a, b) / 100.0


# --------------------------------------------------------------------------- features
def _reply_features(correction: str, cc, ctoks, okeys: set, zh: bool) -> Tuple[List[float], set]:
    """The reply's features (broadcast to every word) and the keys of its new content words."""
    ckinds = [_kind(t.text) for t in ctoks]
    content = [_key(t.text) for t, k in zip(ctoks, ckinds) if k in CONTENT_KINDS]
    new = {k for k in content if k not in okeys}
    raw = correction.strip()
    low = raw.casefold()
    return [float(cc.affirmation), float(cc.affirmed), float(not cc.text.strip()), float(raw.endswith(("?", "？"))),
            float("?" in raw or "？" in raw), math.log1p(len(content)), math.log1p(len(new)),
            float(any(x in low for x in _LEADS)), float(zh), math.log1p(len(raw)) / 5], new


def _diff_ops(tokens: Sequence[Token], ctoks: Sequence[Token]) -> List[str]:
    a = [t.text.casefold() for t in tokens]
    b = [t.text.casefold() for t in ctoks]
    ops = ["delete"] * len(a)
    for op, i1, i2, _, _ in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        for i in range(i1, i2):
            ops[i] = "equal" if op == "equal" else "replace" if op == "replace" else "delete"
    return ops


def _sentences(output: str, tokens: Sequence[Token], keys: List[str], kinds: List[str], ckeys: set) -> Tuple:
    """Per word: its sentence's index, the sentence's share of content words ``ckeys`` holds (the correction's, or
    the question's), and whether it is the sentence that shares most."""
    spans = sentence_spans(output) or [(0, len(output))]
    sent = np.array([next((k for k, (a, b) in enumerate(spans) if a <= t.start < b), len(spans) - 1) for t in tokens],
                    dtype=int)
    share = np.zeros(len(spans))
    for s in range(len(spans)):
        c = [keys[i] for i in range(len(tokens)) if sent[i] == s and kinds[i] in CONTENT_KINDS]
        share[s] = sum(k in ckeys for k in c) / len(c) if c else 0.0
    best = share.max() if len(share) else 0.0
    return sent, share, len(spans), (share >= best) & (best > 0)


def _word_rows(output: str, tokens, kinds, keys, ctoks, ckinds, ckeys, new: set, marks: Dict[str, set],
               question_keys: set) -> List[List[float]]:
    """The per-word features (see the module docstring), one row per output word."""
    n = len(tokens)
    sent, share, n_sent, top = _sentences(output, tokens, keys, kinds, set(ckeys))
    _, qshare, _, qtop = _sentences(output, tokens, keys, kinds, question_keys)
    ops = _diff_ops(tokens, ctoks)
    content = [i for i in range(n) if kinds[i] in CONTENT_KINDS]
    last_in_sent = {max((i for i in content if sent[i] == s), default=-1) for s in range(n_sent)}
    first_in_sent = {min((i for i in content if sent[i] == s), default=-1) for s in range(n_sent)}
    cwords = [(t.text.casefold(), k, kk) for t, k, kk in zip(ctoks, ckeys, ckinds) if kk in CONTENT_KINDS]
    new_units = {u for j, u in enumerate(_units(ckeys, ckinds)) if u and ckeys[j] in new}
    units = _units(keys, kinds)
    new_kinds = {}
    for _, k, kk in cwords:
        if k in new:
            new_kinds[kk] = new_kinds.get(kk, 0) + 1
    rows = []
    for i, t in enumerate(tokens):
        w = t.text.casefold()
        sims = [(_ratio(w, c), k in new) for c, k, _ in cwords] or [(0.0, False)]
        best = max(sims)
        same_new = max([s for (s, is_new), (_, _, kk) in zip(sims, cwords) if is_new and kk == kinds[i]] or [0.0])
        rows.append([*(float(kinds[i] == k) for k in _KINDS), *(float(ops[i] == o) for o in _OPS),
                     float(keys[i] in ckeys), float(i in marks["quoted"]), float(i in marks["negated"]),
                     float(i in marks["swap"]), float(i in marks["polarity"]), best[0], float(best[1]), same_new,
                     math.log1p(new_kinds.get(kinds[i], 0)), float(keys[i] in question_keys),
                     i / max(n - 1, 1), float(bool(content) and i == content[-1]), float(i in last_in_sent),
                     float(i in first_in_sent), sent[i] / max(n_sent - 1, 1), share[sent[i]], float(top[sent[i]]),
                     math.log1p(n_sent), float(i + 1 < n and kinds[i + 1] in CONTENT_KINDS),
                     float(i > 0 and keys[i - 1] in ckeys), float(bool(units[i]) and units[i] in new_units),
                     float(i > 0 and kinds[i - 1] == "number" and keys[i - 1] in ckeys and keys[i] not in ckeys),
                     qshare[sent[i]], float(qtop[sent[i]]), float(bool(question_keys))])
    return rows


@functools.lru_cache(maxsize=1)
def _n_word() -> int:
    """How many per-word features :func:`_word_rows` gives (the width of an output without words)."""
    none = {k: set() for k in ("quoted", "negated", "swap", "polarity")}
    return len(_word_rows("x", tokenize("x"), ["content"], ["x"], [], [], [], set(), none, set())[0])


def _units(keys: Sequence[str], kinds: Sequence[str]) -> List[str]:
    """Per word: a number's unit (its measure word, "五升" -> 升, or the word after it: "11 meters"), else ""."""
    out = []
    for i, (k, kind) in enumerate(zip(keys, kinds)):
        unit = k.split("|", 1)[1] if kind == "number" and "|" in k else ""
        if kind == "number" and not unit and i + 1 < len(keys) and kinds[i + 1] in ("content", "name"):
            unit = keys[i + 1]
        out.append(unit)
    return out


def _marks(tokens, keys, ctext: str, ctoks, output: str) -> Dict[str, set]:
    """Output word indices the correction names to reject, negates, swaps or turns round (:mod:`claw_lib.text.claims`)."""
    ckey_at = [(t, _key(t.text)) for t in ctoks]
    quoted = {k for t, k in ckey_at if _inside(t, quoted_spans(ctext))}
    negated = {k for t, k in ckey_at if _inside(t, negated_spans(ctext))}
    return {"quoted": {i for i, k in enumerate(keys) if k in quoted and _kind(tokens[i].text) != "punct"},
            "negated": {i for i, k in enumerate(keys) if k in negated and _kind(tokens[i].text) != "punct"},
            "swap": set(swap_items(tokens, ctext) or []), "polarity": set(polarity_flips(tokens, ctext, output))}


def pair_features(output: str, correction: str, question: Optional[str] = None, config: Optional[RewardConfig] = None,
                  reading=None) -> Tuple[List[Token], np.ndarray]:
    """(the output's word tokens (n), features (n, d) float32) of one pair. reading: the rules'
    :class:`~claw_lib.signals.rewards.TokenRewards` of the pair, for the "rules" feature set (None: lexical only)."""
    cfg = config or RewardConfig()
    tokens = tokenize(output, cfg.align.max_chars)
    cc = clean_correction(correction)
    ctext = cc.text
    ctoks = tokenize(ctext, cfg.align.max_chars)
    kinds, keys = [_kind(t.text) for t in tokens], [_key(t.text) for t in tokens]
    ckinds, ckeys = [_kind(t.text) for t in ctoks], [_key(t.text) for t in ctoks]
    zh = any("\u3400" <= ch <= "\u9fff" for ch in output + correction)
    reply, new = _reply_features(correction, cc, ctoks, set(keys), zh)
    qkeys = {_key(t.text) for t in tokenize(question)} if question else set()
    marks = _marks(tokens, keys, ctext, ctoks, output) if ctoks else {k: set() for k in ("quoted", "negated", "swap",
                                                                                        "polarity")}
    rows = _word_rows(output, tokens, kinds, keys, ctoks, ckinds, ckeys, new, marks, qkeys)
    X = np.array([r + reply for r in rows], dtype=np.float32).reshape(len(tokens), _n_word() + len(reply))
    if reading is not None:
        X = np.concatenate([X, _rules_features(reading, len(tokens))], axis=1)
    return tokens, X


def _rules_features(tr: TokenRewards, n: int) -> np.ndarray:
    """The rules' reading of every word: status (from its reward) and reason one-hot, (n, 27)."""
    why = tr.info.get("evidence") or ["absent"] * n
    status = np.where(tr.rejected, "contradicted", np.where(tr.rewards > 0, "confirmed", "absent"))
    out = np.zeros((n, len(_STATUS) + len(_WHY)), np.float32)
    for i in range(n):
        out[i, _STATUS.index(status[i])] = 1
        if why[i] in _WHY:
            out[i, len(_STATUS) + _WHY.index(why[i])] = 1
    return out


def word_labels(row: dict, tokens: Sequence[Token]) -> Tuple[np.ndarray, np.ndarray]:
    """(y, w): (n,) float32 1 where a word overlaps a rejected span (punctuation aside); weight 0 on punctuation and
    on the words of an ``unaddressed`` span (a wrong claim the reply leaves alone: neither right nor wrong to flag)."""
    y = np.array([_inside(t, row["rejected"]) for t in tokens], np.float32)
    punct = np.array([_kind(t.text) == "punct" for t in tokens], bool)
    other = np.array([_inside(t, row.get("unaddressed", [])) for t in tokens], bool) & (y == 0)
    y[punct] = 0
    return y, (~punct & ~other).astype(np.float32)


# --------------------------------------------------------------------------- the model
def _net(d: int, hidden: int):
    import torch  # lazy: torch loads only for the learned net; the rules' features need none

    class LocaliserNet(torch.nn.Module):
        """(B, T, d) features -> (B, T) logits of "this word is wrong": Linear + ReLU, a BiGRU, a linear head."""

        def __init__(self):
            super().__init__()
            self.inp = torch.nn.Linear(d, hidden)
            self.drop = torch.nn.Dropout(0.2)
            self.gru = torch.nn.GRU(hidden, hidden, batch_first=True, bidirectional=True)
            self.head = torch.nn.Linear(3 * hidden, 1)

        def forward(self, x):  # x: (B, T, d)
            h = self.drop(torch.relu(self.inp(x)))  # (B, T, H)
            g, _ = self.gru(h)  # (B, T, 2H)
            return self.head(torch.cat([h, g], -1)).squeeze(-1)  # (B, T)
    return LocaliserNet()


LocaliserNet = _net  # the class is built inside (torch is imported only when a model is made)


@dataclass
class Localiser:
    """A trained localiser: the network, the features' standardisation (mu, sd: (d,)), the feature set, the
    threshold on p (chosen on dev) and what it was trained on (``meta``)."""

    net: object
    mu: np.ndarray
    sd: np.ndarray
    features: str = "lexical"
    threshold: float = 0.5
    hidden: int = 32
    meta: Optional[dict] = None

    def probabilities(self, feats: Sequence[np.ndarray], batch: int = 64) -> List[np.ndarray]:
        """P(wrong) of every word of every pair: feats: per pair (n_k, d); returns per pair (n_k,) float64."""
        import torch  # lazy: torch loads only for the learned net; the rules' features need none

        out: List[np.ndarray] = []
        self.net.eval()
        for s in range(0, len(feats), batch):
            chunk = feats[s:s + batch]
            x, _ = _pad([(f - self.mu) / self.sd for f in chunk])
            with torch.no_grad():
                p = torch.sigmoid(self.net(torch.from_numpy(x))).numpy()
            out += [p[k, :len(f)].astype(np.float64) for k, f in enumerate(chunk)]
        return out

    def save(self, path) -> None:
        """Write the checkpoint to ``path`` (a file name or an open binary file)."""
        import torch  # lazy: torch loads only for the learned net; the rules' features need none

        torch.save({"state": self.net.state_dict(), "mu": torch.from_numpy(np.asarray(self.mu, np.float32)),
                    "sd": torch.from_numpy(np.asarray(self.sd, np.float32)), "features": self.features,
                    "threshold": self.threshold, "hidden": self.hidden, "meta": self.meta or {}},
                   path if hasattr(path, "write") else str(path))


def _pad(feats: Sequence[np.ndarray], *others) -> Tuple[np.ndarray, ...]:
    """Right-pad (n_k, d) arrays into (B, T, d) float32 (and (n_k,) ones into (B, T)); also the (B, T) mask."""
    T = max((len(f) for f in feats), default=0) or 1
    d = feats[0].shape[1] if feats else 1
    x = np.zeros((len(feats), T, d), np.float32)
    mask = np.zeros((len(feats), T), np.float32)
    extra = [np.zeros((len(feats), T), np.float32) for _ in others]
    for k, f in enumerate(feats):
        x[k, :len(f)] = f
        mask[k, :len(f)] = 1
        for e, o in zip(extra, others):
            e[k, :len(f)] = o[k]
    return (x, mask, *extra)


def train(feats: Sequence[np.ndarray], labels: Sequence[Tuple[np.ndarray, np.ndarray]], features: str = "lexical",
          epochs: int = 12, hidden: int = 32, lr: float = 3e-3, batch: int = 64, seed: int = 0,
          meta: Optional[dict] = None) -> Localiser:
    """Fit a :class:`Localiser` on pairs: feats per pair (n_k, d); labels per pair (y, w) of :func:`word_labels`.
    Weighted binary cross-entropy, Adam, shuffled batches from ``seed``; deterministic on one thread."""
    import torch  # lazy: torch loads only for the learned net; the rules' features need none

    torch.manual_seed(seed)
    allx = np.concatenate([f for f in feats if len(f)])
    mu, sd = allx.mean(0), allx.std(0)
    sd = np.where(sd < 1e-3, 1.0, sd)  # a feature constant in training stays unscaled (no division by ~0)
    net = _net(allx.shape[1], hidden)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    rng = np.random.default_rng(seed)
    z = [(f - mu) / sd for f in feats]
    for _ in range(epochs):
        net.train()
        order = rng.permutation(len(z))
        for s in range(0, len(order), batch):
            idx = order[s:s + batch]
            x, mask, y, w = _pad([z[k] for k in idx], [labels[k][0] for k in idx], [labels[k][1] for k in idx])
            logits = net(torch.from_numpy(x))
            loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, torch.from_numpy(y),
                                                                        weight=torch.from_numpy(w * mask), reduction="sum")
            opt.zero_grad()
            (loss / max(float((w * mask).sum()), 1.0)).backward()
            opt.step()
    return Localiser(net, mu.astype(np.float32), sd.astype(np.float32), features, 0.5, hidden, meta)


@functools.lru_cache(maxsize=4)
def _load(path: str) -> Localiser:
    import torch  # lazy: torch loads only for the learned net; the rules' features need none

    ck = torch.load(path, map_location="cpu", weights_only=True)  # tensors and plain values only
    net = _net(len(ck["mu"]), ck["hidden"])
    net.load_state_dict(ck["state"])
    net.eval()
    return Localiser(net, ck["mu"].numpy(), ck["sd"].numpy(), ck["features"], float(ck["threshold"]), ck["hidden"],
                     ck["meta"])


def load_localiser(path=None) -> Localiser:
    """The localiser in ``path`` (default :data:`CHECKPOINT`), loaded once per path; a missing file raises
    :class:`LocaliserNotAvailableError` saying how to make it."""
    p = Path(path) if path is not None else CHECKPOINT
    if not p.is_file():
        raise LocaliserNotAvailableError(f"no localiser checkpoint at {p}: train it with `python tools/train_localiser.py`"
                                         " (a few CPU minutes), or use reward.localiser 'rules'")
    return _load(str(p.resolve()))


# --------------------------------------------------------------------------- rewards
def _rewards_of(p: np.ndarray, punct: np.ndarray, strategy: str, cfg: RewardConfig, t: float) -> np.ndarray:
    """(n,) rewards from (n,) probabilities (module docstring): binary, continuous or sentence."""
    neg = (p >= t) & ~punct
    if strategy == "binary":
        r = np.where(neg, cfg.reject, cfg.match)
    elif strategy == "continuous":
        r = np.where(p < t, cfg.hi * (1.0 - p / t), cfg.lo * (p - t) / max(1.0 - t, 1e-9))
    else:  # sentence
        r = np.full(len(p), cfg.reject if neg.any() else cfg.match)
    return np.where(punct & (strategy != "sentence"), cfg.absent, r).astype(np.float64)


def localise(rows: Sequence[dict], config: Optional[RewardConfig] = None, encoder=None,
             localiser: Optional[Localiser] = None) -> List[Tuple[List[Token], np.ndarray]]:
    """(word tokens (n_k), P(wrong) (n_k,) float64, punctuation 0) of every pair (rows: ``output``, ``correction``,
    optionally ``question``), the network reading them in batches. localiser: default :func:`load_localiser`;
    encoder: for the "rules" feature set."""
    cfg = config or RewardConfig()
    loc = localiser or load_localiser()
    for k, r in enumerate(rows):
        if not isinstance(r, dict) or not isinstance(r.get("output"), str) or not isinstance(r.get("correction"), str):
            raise ValueError(f"row {k}: needs string fields 'output' and 'correction'")
    readings = rules_readings(rows, cfg, encoder) if loc.features == "rules" else [None] * len(rows)
    pairs = [pair_features(r["output"], r["correction"], r.get("question"), cfg, rd) for r, rd in zip(rows, readings)]
    probs = loc.probabilities([X for _, X in pairs])
    return [(tokens, np.where([_kind(t.text) == "punct" for t in tokens], 0.0, p)) for (tokens, _), p in zip(pairs, probs)]


def rewards_from(output: str, tokens: List[Token], p: np.ndarray, strategy: str, config: Optional[RewardConfig] = None,
                 threshold: float = 0.5, features: str = "lexical") -> TokenRewards:
    """The :class:`TokenRewards` of one pair from its words' probabilities (module docstring). info: ``p_wrong``,
    ``source`` "learned", ``localiser`` (feature set, threshold)."""
    cfg = config or RewardConfig()
    punct = np.array([_kind(t.text) == "punct" for t in tokens], bool)
    r = _rewards_of(p, punct, strategy, cfg, threshold)
    return TokenRewards(output, strategy, tokens, r, (p >= threshold) & ~punct, None,
                        {"p_wrong": np.round(p, 4).tolist(), "source": "learned",
                         "localiser": {"features": features, "threshold": threshold}})


def learned_rewards(rows: Sequence[dict], strategy: str, config: Optional[RewardConfig] = None, encoder=None,
                    localiser: Optional[Localiser] = None) -> List[TokenRewards]:
    """Token rewards of many pairs from the learned localiser, one :class:`TokenRewards` per row, in order
    (:func:`localise`, then :func:`rewards_from` with the checkpoint's threshold)."""
    if strategy not in ALIGNMENT_STRATEGIES:
        raise ValueError(f"the learned localiser gives {', '.join(ALIGNMENT_STRATEGIES)} rewards, not {strategy!r}")
    loc = localiser or load_localiser()
    return [rewards_from(r["output"], tokens, p, strategy, config, loc.threshold, loc.features)
            for r, (tokens, p) in zip(rows, localise(rows, config, encoder, loc))]


def rules_readings(rows: Sequence[dict], cfg: RewardConfig, encoder) -> List[TokenRewards]:
    """The rules' binary rewards of every row (the "rules" feature set), the encoder's states prefetched in one batch."""
    enc = encoder or encoders.load_encoder(cfg.align.encoder)
    enc.prefetch([r["output"] for r in rows] + [clean_correction(r["correction"]).text for r in rows])
    return [token_rewards(r["output"], r["correction"], "binary", cfg, encoder=enc, question=r.get("question"))
            for r in rows]
