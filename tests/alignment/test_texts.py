"""Text in, alignment out: the article's example and odd inputs give a full alignment."""
import numpy as np
import pytest

from claw_lib.alignment.texts import align_texts


def test_seed_example_alignment_default_encoder():
    ta = align_texts("法国的首都是伦敦。", "不对，法国的首都是巴黎。")
    ops = [(o.op, ta.output_tokens[o.i].text if o.i is not None else None,
            ta.correction_tokens[o.j].text if o.j is not None else None) for o in ta.alignment.ops]
    assert ("replace", "伦敦", "巴黎") in ops
    assert [o for o in ops if o[0] == "match"] == [("match", w, w) for w in ["法国", "的", "首都", "是", "。"]]
    ta = align_texts("The capital of France is London.", "No, the capital of France is Paris.")
    rep = [(ta.output_tokens[o.i].text, ta.correction_tokens[o.j].text) for o in ta.alignment.ops if o.op == "replace"]
    assert rep == [("London", "Paris")]


@pytest.mark.parametrize("output,correction", [
    ("", "不对，是巴黎。"), ("   ", "\t"), ("法国的首都是伦敦。", ""), ("👍🏽👍🏽", "🙂 ok"),
    ("Paris是法国的capital。", "不对，Paris is the capital of 法国!"),
])
def test_bad_input_gives_a_full_alignment(e5, output, correction):
    ta = align_texts(output, correction, encoder=e5)
    assert ta.cost.shape == (len(ta.output_tokens), len(ta.correction_tokens))
    assert np.all(np.isfinite(ta.cost))
    assert [o.i for o in ta.alignment.ops if o.i is not None] == list(range(len(ta.output_tokens)))
