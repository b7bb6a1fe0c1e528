"""Opt-in: ``claw rewards --reviser`` on a real instruct LM that you have on disk (issue 35; the pattern of
tests/test_real_model.py)::

    CLAW_REAL_MODEL=/path/to/Qwen2.5-0.5B-Instruct python -m pytest tests/signals/test_reviser_real_model.py -m real_model

Skipped, saying why, when ``CLAW_REAL_MODEL`` is not set (CI has no real model). The ``claw`` command runs in its own
process, as a user would: one pair in each language and a batch of two, the model loaded once per command. What is
asserted is what the reviser promises whatever the model writes: one reward per output word, the path that gave them
(source), the revision beside it, and where the path is the revision, a negative word only where the revision
differs. Measured with Qwen2.5-Coder-0.5B-Instruct on a shared 2-core CPU (one thread): about a minute per command
(loading the model included); its quality on the probe sets is in results/probe_sets.md.
"""
import json

from tests.test_real_model import claw, DEVICE, MODEL, pytestmark  # noqa: F401 (the same opt-in and command)


def _check(d, output):
    from claw_lib.text.tokens import tokenize

    assert [t["text"] for t in d["tokens"]] == [t.text for t in tokenize(output)]
    assert d["source"] in ("revision", "rules") and "revision" in d
    if d["source"] == "revision" and d["revision"] == output:
        assert all(t["reward"] >= 0 for t in d["tokens"])


def test_claw_rewards_with_a_real_reviser_single_pair_and_batch(tmp_path):
    r = claw("rewards", "法国的首都是伦敦。", "不对，法国的首都是巴黎。", "--reviser", MODEL, "--device", DEVICE,
             "--question", "法国的首都是哪里？", "--json")
    d = json.loads(r.stdout)
    _check(d, "法国的首都是伦敦。")
    assert min(d["tokens"], key=lambda t: t["reward"])["text"] == "伦敦"
    rows = [{"output": "The capital of France is London. It is famous for its museums.", "correction": "Paris.",
             "question": "What is the capital of France?"},
            {"output": "Water boils at 100 degrees Celsius at sea level.", "correction": "Thanks, that helps!"}]
    f = tmp_path / "pairs.jsonl"
    f.write_text("".join(json.dumps(x) + "\n" for x in rows), encoding="utf-8")
    r = claw("rewards", "--input", f, "--reviser", MODEL, "--device", DEVICE)
    out = [json.loads(line) for line in r.stdout.splitlines()]
    assert r.returncode == 0 and len(out) == 2
    for d, row in zip(out, rows):
        _check(d, row["output"])
    assert all(t["reward"] >= 0 for t in out[1]["tokens"])  # thanks correct nothing
