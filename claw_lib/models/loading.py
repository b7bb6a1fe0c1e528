"""Loading models with nothing downloaded (notebooks 00 and 05a).

Every loader in the kit goes through :func:`from_pretrained_offline`: a local folder, or a Hugging
Face name already in the local cache, else one :class:`ModelNotAvailableError` that says what to
do. The two offline encoders' names are resolved by :mod:`claw_lib.models.offline`.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path
from typing import Optional

from ..utils import ModelNotAvailableError  # defined at the bottom layer (utils.script_main reads it)
from ..utils import atomic_write

__all__ = ["ModelNotAvailableError", "from_pretrained_offline", "package_dir", "file_sha256", "verify_manifest",
           "check_causal_lm_folder", "write_manifest"]


def package_dir(name: str) -> Optional[Path]:
    """Folder of an installed package, found without importing it."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def from_pretrained_offline(cls, name_or_path, **kw):
    """``cls.from_pretrained`` with local files only, and one clear error when the model is absent
    or its folder cannot be read."""
    local = Path(str(name_or_path)).is_dir()
    try:
        return cls.from_pretrained(str(name_or_path), local_files_only=True, **kw)
    except Exception as e:  # noqa: BLE001 -- a damaged folder fails in many ways (SafetensorError, TypeError, ...)
        if not local and not isinstance(e, (OSError, ValueError, RuntimeError)):
            raise
        detail = f"[{type(e).__name__}: {(str(e).splitlines() or [''])[0][:200]}]"
        if local:
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
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


#: files a model folder's manifest must list when the folder has them (a manifest listing no weights checks nothing)
_ESSENTIAL = ("config.json", "tokenizer.json")
_WEIGHTS = (".safetensors", ".bin")


def _manifest_unreadable(folder: Path, why: str) -> ModelNotAvailableError:
    return ModelNotAvailableError(f"{folder}/manifest.json is missing or unreadable ({why}): the checkpoint cannot be "
                                  "checked; restore the folder (`git checkout data/tiny-gpt`) or re-create it")


def verify_manifest(folder) -> None:
    """Check every file that ``folder/manifest.json`` lists against its SHA-256; raise
    :class:`ModelNotAvailableError` naming the first file that is missing or differs. The manifest must be
    a JSON object whose ``files`` maps names to digests and lists the folder's essential files (config.json,
    every weights file, tokenizer.json): a manifest edited to list nothing checks nothing, and is refused."""
    folder = Path(folder)
    try:
        m = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        files = m["files"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise _manifest_unreadable(folder, type(e).__name__) from None
    if not isinstance(files, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        raise _manifest_unreadable(folder, "its 'files' is not a map of file names to SHA-256 digests")
    present = sorted(f.name for f in folder.iterdir() if f.is_file())
    needed = [n for n in present if n in _ESSENTIAL or n.endswith(_WEIGHTS)] or ["config.json"]
    unlisted = [n for n in needed if n not in files]
    if unlisted:
        raise ModelNotAvailableError(
            f"{folder}/manifest.json does not list {unlisted[0]}: a manifest must cover the model's config, weights and "
            "tokenizer, or it checks nothing; restore the folder or re-create it with `claw pretrain --out <folder> --force`")
    for name, digest in files.items():
        f = folder / name
        if "/" in name or not f.is_file() or file_sha256(f) != digest:
            raise ModelNotAvailableError(
                f"{f} does not match {folder}/manifest.json (changed, truncated or missing): the checkpoint is not "
                "the one its manifest describes; restore it (`git checkout data/tiny-gpt`) or re-create it with "
                "`claw pretrain --out <folder> --force`")


def write_manifest(folder, manifest: dict) -> dict:
    """``manifest`` with ``files`` set to the SHA-256 of every file in ``folder`` (manifest.json aside), written
    to ``folder/manifest.json`` whole (:func:`claw_lib.utils.atomic_write`). Returns it."""
    folder = Path(folder)
    manifest["files"] = {f.name: file_sha256(f) for f in sorted(folder.iterdir())
                         if f.is_file() and f.name != "manifest.json" and not f.name.startswith(".")}
    with atomic_write(folder / "manifest.json") as f:
        f.write(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
    return manifest


#: model types that are encoders only (no causal LM head): refused as a policy or a judge
_ENCODER_TYPES = {"bert", "roberta", "xlm-roberta", "distilbert", "electra", "albert", "deberta", "deberta-v2", "mpnet",
                  "camembert", "ernie", "nomic_bert", "modernbert"}
_CAUSAL_SUFFIXES = ("ForCausalLM", "LMHeadModel", "ForConditionalGeneration")
#: file names of a tokenizer (any of them)
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "vocab.txt", "tokenizer.model",
                    "spiece.model", "merges.txt", "sentencepiece.bpe.model")


def check_causal_lm_folder(folder, what: str = "model", verify: bool = True) -> None:
    """Before a local folder is loaded as a causal LM (a policy, a teacher, a perplexity judge): verify it
    against its manifest.json when it has one (:func:`verify_manifest`), and refuse, with one
    :class:`ModelNotAvailableError`, a folder without tokenizer files (transformers would build an empty
    tokenizer) and a model that is not a decoder (a BERT encoder loads through ``AutoModelForCausalLM`` with a
    freshly initialised LM head and gives garbage log-probs)."""
    folder = Path(str(folder))
    if not folder.is_dir():
        return
    if verify and (folder / "manifest.json").exists():
        verify_manifest(folder)
    if not any((folder / n).is_file() for n in _TOKENIZER_FILES):
        raise ModelNotAvailableError(f"the {what} folder {folder} has no tokenizer files ({', '.join(_TOKENIZER_FILES[:3])}, "
                                     "...); copy the model's tokenizer into it")
    try:
        c = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # from_pretrained says what is wrong with it
    if not isinstance(c, dict):
        raise ModelNotAvailableError(f"the {what} folder {folder} cannot be loaded: its config.json is not a JSON object")
    archs = c.get("architectures") or []
    causal = any(isinstance(a, str) and a.endswith(_CAUSAL_SUFFIXES) for a in archs) if archs \
        else c.get("model_type") not in _ENCODER_TYPES or bool(c.get("is_decoder"))
    if not causal:
        kind = ", ".join(map(str, archs)) or c.get("model_type")
        raise ModelNotAvailableError(
            f"the {what} folder {folder} holds {kind}, not a causal language model: it has no trained LM head, so its "
            "log-probs would be noise; give a decoder model ('tiny', or a *ForCausalLM checkpoint)")
