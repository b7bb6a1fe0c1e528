"""The localiser's training pairs (claw_lib.toy.localiser_data, issue 47): labelled by construction, deterministic,
every style made, and nothing from any probe set's test split."""
import re

import pytest

from claw_lib.toy.localiser_data import NO_ERROR_STYLES, STYLES, training_pairs
from claw_lib.toy.localiser_fit import FitSettings, training_data
from claw_lib.toy.probe import PROBE_LONG, PROBE_REAL, PROBE_V2, load_probe_set


@pytest.fixture(scope="module")
def rows():
    return training_data(FitSettings())  # exactly what the shipped checkpoint was trained on


def _norm(t: str) -> str:
    return re.sub(r"\s+", " ", t).strip().casefold()


def test_no_test_split_text_is_in_the_training_data(rows):
    test = [r for p in (PROBE_V2, PROBE_LONG, PROBE_REAL) for r in load_probe_set(p, "test")]
    assert len(test) > 250
    outputs = {_norm(r["output"]) for r in rows}
    corrections = {_norm(r["correction"]) for r in rows}
    joined = "\n".join(outputs)
    for r in test:
        assert _norm(r["output"]) not in joined, r["id"]  # no test output, whole or inside a longer one
        assert _norm(r["correction"]) not in corrections, r["id"]


def test_labels_are_the_planted_values(rows):
    for r in rows:
        for a, b in r["rejected"] + r["unaddressed"]:
            assert 0 <= a < b <= len(r["output"])
        if r["style"] in NO_ERROR_STYLES:
            assert r["kind"] == "no_error" and not r["rejected"] and not r["unaddressed"]
        else:
            assert r["rejected"], r
        if r["style"] == "swap":  # two values, each where the other belongs
            (a1, b1), (a2, b2) = r["rejected"]
            assert r["output"][a1:b1] != r["output"][a2:b2]


def test_every_style_language_and_source_is_made(rows):
    assert {r["style"] for r in rows} == set(STYLES)
    assert {r["lang"] for r in rows} == {"zh", "en"}
    assert {r["source"] for r in rows} == {"bank", "real", "world"}
    assert max(len(re.findall(r"[。.!?？！]", r["output"])) for r in rows) >= 4  # multi-sentence outputs


def test_deterministic_and_styles_restrict():
    assert training_pairs(50, 3) == training_pairs(50, 3)
    assert training_pairs(50, 3) != training_pairs(50, 4)
    assert {r["style"] for r in training_pairs(40, 0, ("swap", "confirm"))} == {"swap", "confirm"}
    with pytest.raises(ValueError, match="styles"):
        training_pairs(5, 0, ("nonsense",))


def test_the_threshold_is_the_best_on_the_sets_given():
    """choose_threshold picks the threshold whose criterion (mean hit / precision / recall, probe_metrics) is highest,
    recomputed here threshold by threshold; the ties go to the lower one."""
    import numpy as np

    from claw_lib.signals import localiser as L
    from claw_lib.toy.localiser_fit import THRESHOLDS, choose_threshold
    from claw_lib.toy.probe import probe_metrics

    rows = training_pairs(40, 5)
    feats = [L.pair_features(r["output"], r["correction"], r["question"]) for r in rows]
    loc = L.train([X for _, X in feats], [L.word_labels(r, t) for r, (t, _) in zip(rows, feats)], epochs=2, hidden=8)
    sets = {"a": training_pairs(15, 6), "b": training_pairs(15, 7)}
    scores = choose_threshold(loc, sets)
    assert set(scores) == set(THRESHOLDS)
    for t in THRESHOLDS:
        loc_t = L.Localiser(loc.net, loc.mu, loc.sd, threshold=t)
        ms = [probe_metrics(rs, "binary", results=L.learned_rewards(rs, "binary", localiser=loc_t)) for rs in sets.values()]
        want = float(np.nanmean([[m[k] for k in ("hit_rate", "precision", "recall")] for m in ms]))
        assert abs(scores[t] - want) < 1e-12
    best = max(round(v, 6) for v in scores.values())
    assert loc.threshold == min(t for t in THRESHOLDS if round(scores[t], 6) == best)


def test_train_localiser_never_overwrites_a_checkpoint(tmp_path, capsys):
    from tests.tool_module import load_tool

    out = tmp_path / "loc.pt"
    out.write_bytes(b"mine")
    with pytest.raises(SystemExit, match="error: .*exists"):
        load_tool("train_localiser").main(["--out", str(out), "--pairs", "10"])
    assert out.read_bytes() == b"mine"
