"""Offline loading: a model that is not on disk is one clear error."""
import pytest

from claw_lib.alignment.encoders import load_encoder
from claw_lib.models.loading import ModelNotAvailableError


def test_missing_model_is_one_clear_error():
    with pytest.raises(ModelNotAvailableError, match="never downloads"):
        load_encoder("no-such-org/no-such-encoder-xyz")
    with pytest.raises(ModelNotAvailableError, match="not available"):
        load_encoder("/nonexistent/folder/for/claw")
