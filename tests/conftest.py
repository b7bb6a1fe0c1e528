import os

import pytest

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def e5():
    from claw_lib.encoders import load_encoder

    return load_encoder("e5")


@pytest.fixture(scope="session")
def minilm():
    from claw_lib.encoders import load_encoder

    return load_encoder("minilm")
