"""The probe sets: loader validation, the metrics against a count by hand, and the quality gates."""
import hashlib
import json

import numpy as np
import pytest

from claw_lib.signals.rewards import TokenRewards
from claw_lib.text.tokens import tokenize
from claw_lib.toy.probe import PROBE_V2, load_probe_set, probe_metrics, quality_table, split_of


def test_probe_set_quality_gate(e5):
    rows = load_probe_set()
    assert len(rows) >= 40 and {r["lang"] for r in rows} == {"zh", "en"}
    assert {"no_error", "noisy", "negation"} <= {r["kind"] for r in rows}
    for strategy in ("binary", "continuous"):
        m = probe_metrics(rows, strategy, encoder=e5)
        assert m["hit_rate"] >= 0.9, (strategy, m["hit_rate"])
        assert m["mean_inside"] < 0 < m["mean_outside"]
        assert m["no_error_ok"] == 1.0


def test_probe_v2_is_valid_and_split_once():
    """200 new pairs beside the 45: spans inside the output and holding the labelled text, styles,
    languages and kinds as the data card says, the split as the recorded hash rule gives it."""
    rows = load_probe_set(PROBE_V2)
    old_ids = {r["id"] for r in load_probe_set()}
    assert len(rows) >= 150 and not old_ids & {r["id"] for r in rows} and len({r["id"] for r in rows}) == len(rows)
    for r in rows:
        assert [r["output"][s:e] for s, e in r["rejected"]] == r["rejected_text"]
        assert all(0 <= s < e <= len(r["output"]) for s, e in r["rejected"])
        assert (r["kind"] == "no_error") == (not r["rejected"])
        assert r["split"] == ("test" if int(hashlib.sha256(r["id"].encode()).hexdigest(), 16) % 2 else "dev")
        assert r["split"] == split_of(r["id"])
    for key, values in (("lang", {"zh", "en"}), ("style", {"restate", "free"}), ("split", {"dev", "test"})):
        counts = {v: sum(r[key] == v for r in rows) for v in values}
        assert set(counts) == values and min(counts.values()) >= 0.4 * len(rows), (key, counts)
    assert {"paraphrase", "reorder", "partial", "negation", "number", "date", "formula", "unit", "two_claims",
            "aside", "entity", "rewrite", "no_error"} <= {r["kind"] for r in rows}
    dev, test = load_probe_set(PROBE_V2, "dev"), load_probe_set(PROBE_V2, "test")
    assert len(dev) + len(test) == len(rows) and {r["split"] for r in dev} == {"dev"}
    assert any(r["kind"] == "no_error" for r in dev) and any(r["kind"] == "no_error" for r in test)


def test_loader_refuses_bad_rows(tmp_path):
    good = {"id": "x", "lang": "en", "kind": "fact", "output": "It is Rome.", "correction": "Paris.",
            "rejected": [[6, 10]], "rejected_text": ["Rome"]}
    for bad, msg in [({"rejected": [[6, 20]]}, "outside"), ({"rejected_text": ["Rom"]}, "labelled"),
                     ({"style": "loose"}, "style"), ({"split": "test" if split_of("x") == "dev" else "dev"}, "rule")]:
        p = tmp_path / "p.jsonl"
        p.write_text(json.dumps({**good, **bad}) + "\n", encoding="utf-8")
        with pytest.raises(ValueError, match=msg):
            load_probe_set(p)
    with pytest.raises(ValueError, match="split"):
        load_probe_set(split="train")


def _fixed(rewards_by_output):
    def strategy(output, correction):
        toks = tokenize(output)
        r = np.asarray(rewards_by_output[output], float)
        return TokenRewards(output, "fixed", toks, r, r < 0)
    return strategy


def test_metrics_against_a_count_by_hand():
    rows = [  # tokens: It / is / Rome / .   and   It / is / Paris / .
        {"id": "a", "lang": "en", "kind": "fact", "style": "free", "output": "It is Rome.", "correction": "",
         "rejected": [[6, 10]]},
        {"id": "b", "lang": "en", "kind": "fact", "style": "restate", "output": "It is Paris.", "correction": "",
         "rejected": [[6, 11]]},
        {"id": "c", "lang": "zh", "kind": "no_error", "style": "free", "output": "It is Paris.", "correction": "x",
         "rejected": []},
    ]
    fixed = {"It is Rome.": [0.0, -1.0, -1.0, 0.5], "It is Paris.": [0.5, 0.5, 0.0, 0.5]}
    m = probe_metrics(rows[:2], _fixed(fixed))
    # row a: minima "is" and "Rome" tie, one inside -> 0.5; row b: minimum "Paris" (0.0) inside -> 1.0
    assert m["hit_rate"] == 0.75
    # negatives: is (out), Rome (in) -> tp 1, fp 1; inside tokens: Rome, Paris -> fn 1 (Paris at 0)
    assert (m["tp"], m["fp"], m["fn"]) == (1, 1, 1) and m["precision"] == 0.5 and m["recall"] == 0.5
    assert m["groups"]["style"]["free"]["hit_rate"] == 0.5 and m["groups"]["style"]["restate"]["recall"] == 0.0
    assert np.isnan(m["groups"]["style"]["restate"]["precision"])  # no negative token: undefined
    fixed["It is Paris."] = [0.5, -0.2, 0.5, 0.5]
    m = probe_metrics(rows, _fixed(fixed))
    assert m["no_error_ok"] == 0.0 and m["groups"]["lang"]["zh"]["fp"] == 1 and m["fp"] == 3
    table = quality_table({"fixed": m}, "lang")
    assert table.splitlines()[0] == "| | all | en | zh |" and "| fixed | 0.25 / 0.25 / 0.50 |" in table  # row b now lowest at "is"


@pytest.mark.parametrize("strategy", ["binary", "continuous"])
def test_probe_v2_dev_gate(e5, strategy):
    """The defaults were chosen on the dev split (notebook 10): keep them there."""
    m = probe_metrics(load_probe_set(PROBE_V2, "dev"), strategy, encoder=e5)
    assert m["hit_rate"] >= 0.8 and m["precision"] >= 0.85 and m["recall"] >= 0.8, m
    assert m["no_error_ok"] == 1.0


def test_judge_can_read_a_row_within_its_context(tiny):
    """judge_can_read: a short row fits the tiny GPT's 160 positions, a row of a few hundred characters does not
    (the judge's measurement leaves it out instead of failing)."""
    from claw_lib.toy.probe import judge_can_read

    short = {"output": "法国的首都是伦敦。", "correction": "不对，法国的首都是巴黎。", "question": "法国的首都是哪里？"}
    long = dict(short, output="法国的首都是伦敦。" * 40)
    assert judge_can_read(short, tiny) and not judge_can_read(long, tiny)
