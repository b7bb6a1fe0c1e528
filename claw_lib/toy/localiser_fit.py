"""Training the learned localiser (:mod:`claw_lib.signals.localiser`) on generated pairs, and choosing its
threshold on the probe sets' dev splits (``tools/train_localiser.py`` runs it; ``tools/probe_report.py`` retrains it
for the ablation of the training data).

1. :func:`training_data`: ``pairs`` labelled pairs (seeded), decontaminated against every probe set's texts;
2. :func:`~claw_lib.signals.localiser.pair_features` reads each (the "rules" feature set also runs the rules engine,
   with the encoder, on each);
3. :func:`~claw_lib.signals.localiser.train` fits the network (seeded, one thread: the same checkpoint every time);
4. :func:`choose_threshold`: the threshold on p with the best mean of hit rate, precision and recall over the dev
   splits of v2, the long set and the real-output set (binary rewards). The test splits are never read here.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

import numpy as np

from ..config import RewardConfig
from ..signals.localiser import Localiser, localise, pair_features, rewards_from, rules_readings, train, word_labels
from .localiser_data import STYLES, training_pairs
from .probe import PROBE_LONG, PROBE_REAL, PROBE_SET, PROBE_V2, load_probe_set, probe_metrics

__all__ = ["FitSettings", "fit_localiser", "choose_threshold", "dev_sets", "training_data", "THRESHOLDS"]

#: the thresholds :func:`choose_threshold` tries
THRESHOLDS = (0.3, 0.4, 0.5, 0.6, 0.7)


@dataclass
class FitSettings:
    """What a localiser is trained on and how (the checkpoint's ``meta`` records them)."""

    pairs: int = 6000
    """generated training pairs"""
    seed: int = 0
    """seed of the pairs and of the network"""
    styles: Sequence[str] = field(default_factory=lambda: tuple(STYLES))
    """the reply styles the pairs are drawn from (the ablation leaves some out)"""
    features: str = "lexical"
    """"lexical" (no encoder: fast) or "rules" (also the rules engine's reading of every word)"""
    epochs: int = 8
    """passes over the pairs (8: 12 scored no better on dev)"""
    hidden: int = 32
    """width of the network"""


def dev_sets() -> Dict[str, List[dict]]:
    """The probe sets' dev splits, by name: v2, long, real."""
    return {"v2": load_probe_set(PROBE_V2, "dev"), "long": load_probe_set(PROBE_LONG, "dev"),
            "real": load_probe_set(PROBE_REAL, "dev")}


def _criterion(ms: Sequence[dict]) -> float:
    """The mean of hit rate, precision and recall over the sets (nan-safe), the reviser's criterion."""
    return float(np.nanmean([[m[k] for k in ("hit_rate", "precision", "recall")] for m in ms]))


def choose_threshold(loc: Localiser, sets: Dict[str, List[dict]], encoder=None) -> Dict[float, float]:
    """Set ``loc.threshold`` to the best of :data:`THRESHOLDS` on ``sets`` (the dev splits; a tie goes to the lower
    threshold); returns {threshold: criterion}. The network reads each set once."""
    probs = {name: localise(rows, encoder=encoder, localiser=loc) for name, rows in sets.items()}
    scores = {}
    for t in THRESHOLDS:
        scores[t] = _criterion([probe_metrics(rows, "binary", results=[
            rewards_from(r["output"], tokens, p, "binary", threshold=t) for r, (tokens, p) in zip(rows, probs[name])])
            for name, rows in sets.items()])
    loc.threshold = max(THRESHOLDS, key=lambda t: (round(scores[t], 6), -t))
    return scores


def training_data(settings: Optional["FitSettings"] = None) -> List[dict]:
    """The pairs a localiser is trained on (:func:`~claw_lib.toy.localiser_data.training_pairs` as ``settings``
    say), decontaminated: no output containing, and no correction equal to, a text of any probe set's dev or test
    split (v1, v2, the long set, the real-output set)."""
    st = settings or FitSettings()
    probe = [r for p in (PROBE_SET, PROBE_V2, PROBE_LONG, PROBE_REAL) for r in load_probe_set(p)]
    return training_pairs(st.pairs, st.seed, st.styles,
                          exclude=([r["output"] for r in probe], [r["correction"] for r in probe]))


def fit_localiser(settings: Optional[FitSettings] = None, encoder=None, sets: Optional[Dict[str, list]] = None
                  ) -> Localiser:
    """A localiser trained as :class:`FitSettings` says, its threshold chosen on the dev splits (``sets``, default
    :func:`dev_sets`); ``meta`` records the settings, the dev criterion of every threshold and the label counts."""
    import torch  # lazy: torch loads only to fit the net

    st = settings or FitSettings()
    torch.manual_seed(st.seed)
    rows = training_data(st)
    readings = _readings(rows, st.features, encoder)
    feats = [pair_features(r["output"], r["correction"], r.get("question"), None, rd) for r, rd in zip(rows, readings)]
    labels = [word_labels(r, tokens) for r, (tokens, _) in zip(rows, feats)]
    loc = train([X for _, X in feats], labels, st.features, st.epochs, st.hidden, seed=st.seed)
    scores = choose_threshold(loc, sets if sets is not None else dev_sets(), encoder)
    loc.meta = {"pairs": st.pairs, "seed": st.seed, "styles": list(st.styles), "features": st.features,
                "epochs": st.epochs, "hidden": st.hidden, "dev_criterion": {str(k): round(v, 4) for k, v in scores.items()},
                "positive_words": int(sum(y.sum() for y, _ in labels)), "words": int(sum(len(y) for y, _ in labels))}
    return loc


def _readings(rows, features: str, encoder) -> list:
    if features != "rules":
        return [None] * len(rows)
    return rules_readings(rows, RewardConfig(), encoder)
