import os

import pytest

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def e5():
    from claw_lib.alignment.encoders import load_encoder

    return load_encoder("e5")


@pytest.fixture(scope="session")
def minilm():
    from claw_lib.alignment.encoders import load_encoder

    return load_encoder("minilm")


@pytest.fixture(scope="session")
def tiny():
    """The kit's shipped tiny GPT and its tokenizer (loaded once per test session)."""
    from claw_lib.models.lm import load_causal_lm

    return load_causal_lm("tiny")
