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
