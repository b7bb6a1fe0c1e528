"""LoRA adapters on real models through PEFT, the library users know (docs/real_model.md).

The kit's own :mod:`claw_lib.models.lora` is the teaching version (the formula in 20 lines, notebook 12b); a run on
a real model gets its adapters from PEFT, so that what it trains can be taken elsewhere:
``PeftModel.from_pretrained(base, RUN/adapter)``, TRL (``peft_config``), a vLLM server's adapter-loading endpoint.
The maths is the same (tests/models/test_peft_lora.py: the same A, B, alpha and r give the same logits)::

    y = W x + b + (alpha / r) * B (A x)        A: (r, in), B: (out, r); B starts at 0

* :func:`lora_config` -- the ``LoraConfig`` of the kit's targets (:data:`~claw_lib.models.lora.LORA_TARGETS`
  present in the model; GPT-2's ``Conv1D`` layers with ``fan_in_fan_out``), no dropout, alpha 2 r by default;
* :func:`add_peft_lora` puts PEFT's adapters on a model **in place** (the model object stays the one the run holds;
  its :class:`~peft.PeftModel` is kept on it, :func:`peft_model_of`), A drawn from a seed without touching torch's
  global random state; :func:`add_adapters` is the run's choice between the two implementations
  (``PPOConfig.lora_impl``);
* the frozen teacher is the same model with its adapters off (:class:`~claw_lib.models.lora.AdapterDisabled`,
  PEFT's ``disable_adapter()``): no second copy of the weights;
* :func:`save_adapter` writes PEFT's format (``adapter_config.json``, ``adapter_model.safetensors``) whole or not at
  all; :func:`load_adapter` reads it back onto a base model; :func:`kit_to_peft` turns the kit's adapters into
  PEFT's, same weights, so a run of the teaching version can be saved in PEFT's format too.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Dict, Optional, Sequence

import torch
from torch import nn

from .lora import LORA_TARGETS, LoRALinear, add_lora, count_parameters
from ..config import LORA_IMPLS, SMALL_MODEL_PARAMS, model_defaults

__all__ = ["LORA_IMPLS", "uses_peft", "lora_config", "add_peft_lora", "add_adapters", "peft_model_of",
           "save_adapter", "save_run_adapter", "load_adapter", "kit_to_peft", "trl_peft_config", "ADAPTER_DIR"]

#: the folder a run writes its PEFT adapter into (next to checkpoint.pt)
ADAPTER_DIR = "adapter"


def uses_peft(impl: str, n_params: int) -> bool:
    """Whether ``lora_impl`` ``impl`` means PEFT for a model of ``n_params`` parameters ("auto": above
    :data:`~claw_lib.config.SMALL_MODEL_PARAMS`)."""
    if impl not in LORA_IMPLS:
        raise ValueError(f"lora_impl must be one of {', '.join(LORA_IMPLS)}, got {impl!r}")
    return impl == "peft" or (impl == "auto" and n_params > SMALL_MODEL_PARAMS)


def _target_names(model: nn.Module, targets: Sequence[str]):
    """(the target names present in ``model``, whether they are GPT-2 ``Conv1D`` layers)."""
    # lazy: transformers (seconds to import) loads only for GPT-2 Conv1D layers
    from transformers.pytorch_utils import Conv1D

    found = {}
    for full, mod in model.named_modules():
        name = full.rsplit(".", 1)[-1]
        if name in targets and isinstance(mod, (nn.Linear, Conv1D)):
            found.setdefault(name, isinstance(mod, Conv1D))
    if not found:
        raise ValueError(f"no linear layer named {', '.join(targets)} to put an adapter on")
    if len(set(found.values())) > 1:
        raise ValueError("the target layers mix nn.Linear and GPT-2's Conv1D; name targets of one kind")
    return sorted(found), next(iter(found.values()))


def lora_config(model: nn.Module, r: int = 16, alpha: Optional[float] = None, targets: Sequence[str] = LORA_TARGETS):
    """PEFT's ``LoraConfig`` for ``model``: rank ``r``, ``lora_alpha`` (default 2 r, as the kit's), the targets of
    :data:`~claw_lib.models.lora.LORA_TARGETS` it has, no dropout, no bias, a causal LM task."""
    from peft import LoraConfig  # lazy: peft loads only for lora_impl='peft'

    if r < 1:
        raise ValueError(f"the LoRA rank must be >= 1, got {r}")
    names, conv1d = _target_names(model, targets)
    return LoraConfig(r=int(r), lora_alpha=float(2 * r if alpha is None else alpha), target_modules=names,
                      lora_dropout=0.0, bias="none", fan_in_fan_out=conv1d, task_type="CAUSAL_LM")


def add_peft_lora(model: nn.Module, r: int = 16, alpha: Optional[float] = None,
                  targets: Sequence[str] = LORA_TARGETS, seed: Optional[int] = None):
    """PEFT adapters of rank ``r`` on ``model``, in place (everything else frozen); returns the ``PeftModel`` (also
    :func:`peft_model_of` ``(model)``). ``model`` itself keeps working as the adapted model: its layers are PEFT's.
    seed: A is drawn from torch's CPU generator seeded with it, inside ``torch.random.fork_rng`` (the global random
    state is left as it was; the same seed gives the same adapters); None: from the global state."""
    from peft import get_peft_model  # lazy: peft loads only for lora_impl='peft'

    cfg = lora_config(model, r, alpha, targets)
    if seed is None:
        pm = get_peft_model(model, cfg)
    else:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(seed))
            pm = get_peft_model(model, cfg)
    model.__dict__["claw_peft"] = pm  # a plain attribute, not a sub-module (the PeftModel holds the model)
    model.claw_lora = {"r": int(r), "alpha": float(cfg.lora_alpha), "impl": "peft",
                       "layers": sum(1 for m in model.modules() if hasattr(m, "lora_A") and "default" in m.lora_A)}
    return pm


def peft_model_of(model):
    """The ``PeftModel`` of a model with PEFT adapters (``model`` itself when it is one), else None."""
    if hasattr(model, "disable_adapter") and hasattr(model, "peft_config"):
        return model
    return model.__dict__.get("claw_peft") if isinstance(model, nn.Module) else None


def add_adapters(model: nn.Module, r: int, impl: str = "auto", seed: Optional[int] = None) -> str:
    """The run's adapters of rank ``r`` on ``model`` in place, by ``impl`` (:func:`uses_peft`); returns "peft" or
    "kit", the implementation used."""
    if uses_peft(impl, count_parameters(model)):
        add_peft_lora(model, r, seed=seed)
        return "peft"
    add_lora(model, r, seed=seed)
    return "kit"


def save_adapter(model, folder, files: Optional[Dict[str, str]] = None) -> Path:
    """Write ``model``'s PEFT adapter in PEFT's format into ``folder`` (``adapter_config.json``,
    ``adapter_model.safetensors``), whole or not at all: written beside it, then renamed over the old one.
    files: more text files written into the folder before the rename (name -> UTF-8 text; a record of the adapter).
    ValueError for a model without PEFT adapters (the kit's: :func:`kit_to_peft` first)."""
    pm = peft_model_of(model)
    if pm is None:
        raise ValueError("this model has no PEFT adapter to save (the kit's own adapters: kit_to_peft(model) first)")
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    # the temporary folder is named as utils.atomic_write names its files, so a run folder treats a killed
    # writer's leftover as its own stale temporary, not as a user's file
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", suffix=".tmp", dir=folder.parent))
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o777 & ~umask)  # mkdtemp's folder is private; the adapter folder is an ordinary one
    try:
        pm.save_pretrained(str(tmp))
        for name, text in (files or {}).items():
            (tmp / name).write_text(text, encoding="utf-8")
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


def save_run_adapter(model, out) -> Optional[Path]:
    """A run's PEFT adapter into ``out/adapter`` (:data:`ADAPTER_DIR`), when the model has one; else nothing (None)."""
    return save_adapter(model, Path(out) / ADAPTER_DIR) if peft_model_of(model) is not None else None


def trl_peft_config(cfg, model):
    """The ``LoraConfig`` the TRL engine passes to TRL for ``cfg`` (a PPOConfig) on ``model``, when the run's adapters
    are PEFT's (:func:`uses_peft` of ``cfg.lora_impl``; rank ``cfg.lora_rank``, or the model's default when None);
    None for full fine-tuning or the kit's own adapters."""
    n = count_parameters(model)
    rank = cfg.lora_rank if cfg.lora_rank is not None else model_defaults(n)["lora_rank"]
    return lora_config(model, rank) if rank and uses_peft(cfg.lora_impl, n) else None


def load_adapter(base: nn.Module, folder, trainable: bool = False):
    """``PeftModel.from_pretrained(base, folder)``: a saved adapter on a base model (``trainable``: to train on)."""
    from peft import PeftModel  # lazy: peft loads only for lora_impl='peft'

    return PeftModel.from_pretrained(base, str(folder), is_trainable=trainable)


@torch.no_grad()
def kit_to_peft(model: nn.Module):
    """Replace the kit's adapters (:class:`~claw_lib.models.lora.LoRALinear`) on ``model`` by PEFT's with the same
    A, B, r and alpha, in place; returns the ``PeftModel``. The outputs stay the same to rounding."""
    kit = {full: m for full, m in model.named_modules() if isinstance(m, LoRALinear)}
    if not kit:
        raise ValueError("this model has no kit adapters (claw_lib.models.lora.add_lora)")
    ranks = {(m.r, m.scale * m.r) for m in kit.values()}
    if len(ranks) > 1:
        raise ValueError("the kit's adapters differ in rank or alpha; PEFT's config holds one of each")
    (r, alpha), = ranks
    for full, m in kit.items():  # the base layers back in place
        parent, _, child = full.rpartition(".")
        setattr(model.get_submodule(parent) if parent else model, child, m.base)
    names = sorted({full.rsplit(".", 1)[-1] for full in kit})
    pm = add_peft_lora(model, r, alpha, names)
    for full, m in kit.items():
        layer = model.get_submodule(full)
        layer.lora_A["default"].weight.copy_(m.lora_A)
        layer.lora_B["default"].weight.copy_(m.lora_B)
    return pm
