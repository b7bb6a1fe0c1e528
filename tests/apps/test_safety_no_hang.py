"""Promise 5: nothing hangs. A pair within the default limits aligns in a few seconds on a laptop CPU (measured in
``benchmarks/bench_lengths.py``, ``results/bench_lengths.md``: never asserted here, tests do not time things); a
longer one is refused at once naming ``--max-words``; every size option has an upper bound (a batch of 5,000,000
prompts is refused, not started). Each test names the review ids it covers.
"""
import json

import pytest

from claw_lib.config import LIMITS, AlignConfig, PPOConfig, flatten

from .safety import message, run


def test_a_pair_of_ten_thousand_words_is_refused_at_once_T21(tmp_path, capsys):
    """T21: 9,999 words in 19,997 characters (under the old --max-chars 20000) ran past 180 s. Now that line is an
    error record naming --max-chars (the limit is 4,000), a pair of 1,999 words in 3,997 characters one naming
    --max-words (500), and the other lines are done."""
    big, many = " ".join(["a"] * 9999), " ".join(["a"] * 1999)
    f, out = tmp_path / "many.jsonl", tmp_path / "m.out"
    f.write_text("".join(json.dumps(r) + "\n" for r in ({"output": big, "correction": big},
                                                        {"output": many, "correction": many},
                                                        {"output": "a b", "correction": "a c"})))
    rc, _, err = run(["rewards", "--input", str(f), "--out", str(out)], capsys)
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert rc == 1 and "2 of 3 lines failed" in message(err)
    assert lines[0]["line"] == 1 and "19997 characters" in lines[0]["error"] and "--max-chars" in lines[0]["error"]
    assert lines[1]["line"] == 2 and "1999 words, more than the limit of 500" in lines[1]["error"]
    assert "--max-words" in lines[1]["error"] and len(many) < AlignConfig().max_chars and len(lines[2]["tokens"]) == 2


def test_the_word_limit_is_checked_before_the_encoder_runs_T21(monkeypatch):
    """T21 (library): align_texts refuses a text over max_words before any embedding."""
    from claw_lib.alignment.texts import align_texts

    class NoEncoder:
        def embed_words(self, *a, **k):
            raise AssertionError("embedded before the word limit was checked")

    with pytest.raises(ValueError, match="the correction has 11 words, more than the limit of 10"):
        align_texts("a b", " ".join("abcdefghijk"), AlignConfig(max_words=10), encoder=NoEncoder())


@pytest.mark.parametrize("value", ["5000000", "100000000000000000000"])
def test_an_enormous_batch_is_refused_at_once_NT15_NT16(value, tmp_path, capsys):
    """NT16 (5,000,000) and NT15 (10^20): refused naming --batch-size and its bound, before the model loads."""
    rc, _, err = run(["train", "--steps", "1", "--batch-size", value, "--out", str(tmp_path / "r")], capsys)
    assert rc == 2 and "--batch-size must be in [1, 4096]" in message(err) and not (tmp_path / "r").exists()


def test_every_size_setting_has_an_upper_bound_NT15_NT16():
    """NT15 / NT16 for every size: each integer setting of PPOConfig with a lower bound of 0 or 1 has a finite upper
    bound in config.LIMITS (steps, batch_size, eval_prompts, max_new_tokens, epochs, minibatches, ...)."""
    flat = flatten(PPOConfig())
    sizes = [k for k, v in flat.items() if isinstance(v, int) and not isinstance(v, bool) and k in LIMITS]
    assert {"steps", "batch_size", "eval_prompts", "max_new_tokens", "epochs", "minibatches", "seed",
            "reward.align.max_chars", "reward.align.max_words"} <= set(sizes)
    assert all(LIMITS[k][1] is not None for k in sizes), [k for k in sizes if LIMITS[k][1] is None]
