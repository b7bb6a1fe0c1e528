"""Contextual word vectors: shapes, layers, mean pooling over sub-tokens, context, long texts."""
import numpy as np
import pytest

from claw_lib.alignment.costs import cosine_cost
from claw_lib.text.tokens import tokenize


def test_e5_has_no_unk_on_chinese_but_minilm_does(e5, minilm):
    assert e5.unk_fraction("法国的首都是伦敦。不对，巴黎。") == 0.0
    assert minilm.unk_fraction("法国的首都是伦敦。") > 0.3


def test_word_vectors_shape_and_layer(e5):
    we = e5.embed_words("法国的首都是伦敦。")
    assert [t.text for t in we.tokens] == ["法国", "的", "首都", "是", "伦敦", "。"]
    assert we.vectors.shape == (6, 384) and we.vectors.dtype == np.float32
    last = e5.embed_words("法国的首都是伦敦。", layer=12).vectors
    assert not np.allclose(last, we.vectors)
    assert np.allclose(e5.embed_words("法国的首都是伦敦。", layer=-5).vectors, we.vectors)  # 8 of 12
    with pytest.raises(ValueError, match="layer"):
        e5.embed_words("x", layer=13)


def test_word_vector_is_mean_of_its_subtokens(e5):
    text = "The capital of France is London."
    subs, pieces, H = e5.subtoken_states(text)
    we = e5.embed_words(text)
    k = pieces.index("▁London")
    assert np.allclose(we.vectors[5], H[k], atol=1e-6)


def test_contextual_vs_isolated(e5):
    """银行 by the river vs at the bank: identical alone, different in context."""
    a = e5.embed_words("他坐在河边的银行旁边钓鱼。")
    b = e5.embed_words("他去银行存钱。")
    ia = [t.text for t in a.tokens].index("银行")
    ib = [t.text for t in b.tokens].index("银行")
    ctx = cosine_cost(a.vectors[[ia]], b.vectors[[ib]])[0, 0]
    iso = e5.embed_isolated(["银行", "银行"])
    assert cosine_cost(iso[:1], iso[1:])[0, 0] < 1e-6
    assert ctx > 0.02


def test_long_text_is_windowed_with_a_warning(e5):
    text = "法国的首都是巴黎，英国的首都是伦敦。" * 280  # ~5,000 characters, ~2,500 sub-tokens
    assert len(text) >= 5000
    with pytest.warns(UserWarning, match="windows"):
        we = e5.embed_words(text)
    assert we.vectors.shape[0] == len(tokenize(text))
    assert np.all(np.linalg.norm(we.vectors, axis=1) > 0)


def test_batched_truncated_states_equal_one_text_at_a_time(e5):
    """prefetch embeds texts in padded, length-sorted batches and stops at the layer used; the states
    equal the whole model run on one text at a time (float noise aside), repeated texts are embedded
    once, and the per-text path reads them from the cache."""
    import torch

    texts = ["法国的首都是伦敦。", "不对，法国的首都是巴黎。", "The capital of France is London.", "a", "",
             "No, the capital of France is Paris. Also, nice weather today.", "不对，法国的首都是巴黎。"]

    def whole_model(ids):
        x = torch.tensor([e5._prefix + list(ids) + e5._suffix])
        with torch.no_grad():
            h = e5.model(input_ids=x, attention_mask=torch.ones_like(x), output_hidden_states=True).hidden_states[e5.layer][0]
        return h[len(e5._prefix):h.shape[0] - len(e5._suffix)].numpy()

    e5._cache.clear()
    e5.prefetch(texts)
    assert len(e5._cache) == len(set(texts))
    for t in texts:
        ids = e5.tokenizer(t, add_special_tokens=False)["input_ids"]
        got = e5.subtoken_states(t)[2]
        assert got.shape == (len(ids), e5.model.config.hidden_size)
        if ids:
            assert np.abs(got - whole_model(ids)).max() < 1e-4, t
