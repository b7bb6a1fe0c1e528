"""A small LoRA (low-rank adapters) for the kit's loop, without the ``peft`` package (docs/real_model.md).

Full fine-tuning a real model with AdamW holds the weights, their gradients and two moments of AdamW: four
copies of every parameter, plus a frozen copy as OPD's teacher. An adapter trains only two small matrices per
linear layer and keeps the base weights frozen::

    y = W x + b + (alpha / r) * B (A x)        A: (r, in), B: (out, r); B starts at 0

so the adapted model starts as exactly the base model, and **the frozen teacher is the same model with its
adapters switched off** (:class:`AdapterDisabled`): no second copy of the weights, as PEFT's
``disable_adapter()`` in TRL (docs/trl.md). The adapters are kept in float32 whatever the base's dtype, so a
bfloat16 base still takes small updates exactly.

* :func:`add_lora` puts adapters on the linear layers of a causal LM (``nn.Linear`` and GPT-2's ``Conv1D``;
  the attention and MLP projections, not the embeddings or the LM head) and freezes everything else;
* :func:`adapters_disabled` is a context manager, :class:`AdapterDisabled` a model-like view for the teacher;
* :func:`trainable_state_dict` is what a checkpoint needs (the adapters; the base is the model on disk).

This is the teaching version: runs on a real model get PEFT's adapters (:mod:`claw_lib.models.peft_lora`,
``PPOConfig.lora_impl``), which give the same outputs on the same A, B, r and alpha (tests/models/test_peft_lora.py)
and are saved in a format other tools load.
"""
from __future__ import annotations

import contextlib
import math
from typing import Dict, Iterator, Optional, Sequence

import torch
from torch import nn

__all__ = ["LoRALinear", "add_lora", "has_lora", "adapters_disabled", "AdapterDisabled", "trainable_state_dict",
           "count_parameters", "LORA_TARGETS"]

#: module names (the last part of the dotted name) that get adapters: Qwen2 / Llama attention and MLP
#: projections, GPT-2's fused attention, its output and MLP projections
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj",
                "c_attn", "c_proj", "c_fc")


class LoRALinear(nn.Module):
    """``base(x) + (alpha / r) * B(A(dropout(x)))`` around a frozen linear layer.

    base: an ``nn.Linear`` (weight (out, in)) or GPT-2's ``Conv1D`` (weight (in, out)); r: the rank; alpha:
    the scale's numerator. A is initialised as PEFT does (Kaiming uniform), B at zero, both float32.
    ``enabled = False`` gives the base layer's output exactly. generator: the CPU generator A is drawn from
    (torch's global one when None); A is drawn on the CPU and moved, so a seed gives the same A on any device."""

    def __init__(self, base: nn.Module, r: int, alpha: float, generator: Optional[torch.Generator] = None):
        super().__init__()
        if r < 1:
            raise ValueError(f"the LoRA rank must be >= 1, got {r}")
        w = base.weight
        fan_in, fan_out = (w.shape[1], w.shape[0]) if isinstance(base, nn.Linear) else (w.shape[0], w.shape[1])
        self.base, self.r, self.scale, self.enabled = base, r, alpha / r, True
        a = torch.empty(r, fan_in, dtype=torch.float32)
        nn.init.kaiming_uniform_(a, a=math.sqrt(5), generator=generator)
        self.lora_A = nn.Parameter(a.to(w.device))
        self.lora_B = nn.Parameter(torch.zeros(fan_out, r, device=w.device, dtype=torch.float32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (..., in) -> (..., out)
        y = self.base(x)
        if not self.enabled:
            return y
        delta = (x.to(self.lora_A.dtype) @ self.lora_A.T) @ self.lora_B.T
        return y + (self.scale * delta).to(y.dtype)


def _targets(model: nn.Module, names: Sequence[str]):
    # lazy: transformers (seconds to import) loads only for GPT-2 Conv1D layers
    from transformers.pytorch_utils import Conv1D

    for full, mod in model.named_modules():
        if full.rsplit(".", 1)[-1] in names and isinstance(mod, (nn.Linear, Conv1D)):
            yield full, mod


def add_lora(model: nn.Module, r: int = 16, alpha: Optional[float] = None,
             targets: Sequence[str] = LORA_TARGETS, seed: Optional[int] = None) -> nn.Module:
    """Freeze ``model`` and wrap each target linear layer in a :class:`LoRALinear` of rank ``r`` (``alpha``:
    default ``2 r``), in place; returns the model. Raises ValueError when no layer matches ``targets``.
    seed: the adapters' A matrices are drawn from a generator of this seed, so the same seed gives the same
    adapters in every process and torch's global random state is left as it was (LR01); None: from the
    global generator."""
    alpha = float(2 * r if alpha is None else alpha)
    for p in model.parameters():
        p.requires_grad_(False)
    found = list(_targets(model, targets))
    if not found:
        raise ValueError(f"no linear layer named {', '.join(targets)} to put an adapter on")
    gen = None if seed is None else torch.Generator().manual_seed(int(seed))
    for full, mod in found:
        parent_name, _, child = full.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, LoRALinear(mod, r, alpha, gen))
    model.claw_lora = {"r": r, "alpha": alpha, "layers": len(found)}
    return model


def _lora_layers(model) -> Iterator[LoRALinear]:
    return (m for m in model.modules() if isinstance(m, LoRALinear))


def _peft_model(model):
    """The ``PeftModel`` of ``model`` (itself, or the one :func:`claw_lib.models.peft_lora.add_peft_lora` keeps on
    it), else None."""
    if hasattr(model, "disable_adapter") and hasattr(model, "peft_config"):
        return model
    return getattr(model, "__dict__", {}).get("claw_peft")


def has_lora(model) -> bool:
    """Whether ``model`` carries adapters: the kit's, or PEFT's put on by the kit's runs
    (:mod:`claw_lib.models.peft_lora`)."""
    return _peft_model(model) is not None or any(True for _ in _lora_layers(model))


@contextlib.contextmanager
def adapters_disabled(model):
    """Inside the block every adapter of ``model`` is off: the model is its base (restored after). PEFT's adapters
    (a ``PeftModel``, or a model the kit put PEFT adapters on) through PEFT's own ``disable_adapter()``."""
    pm = _peft_model(model)
    if pm is not None:
        with pm.disable_adapter():
            yield model
        return
    layers = list(_lora_layers(model))
    before = [m.enabled for m in layers]
    for m in layers:
        m.enabled = False
    try:
        yield model
    finally:
        for m, b in zip(layers, before):
            m.enabled = b


class AdapterDisabled:
    """A model with adapters, seen with them switched off for each forward: the base model. For fresh adapters
    (B = 0) that is exactly the initial policy, so it serves as the frozen teacher (and KL reference) without a
    second copy of the weights. Works for the kit's adapters and for a PEFT model (``disable_adapter()``); has
    what the kit's log-prob helpers use (``config``, ``parameters``, ``eval``, a call)."""

    def __init__(self, model):
        self.model = model

    @property
    def config(self):
        return self.model.config

    def parameters(self):
        return self.model.parameters()

    def eval(self):
        return self

    def _off(self):
        return adapters_disabled(self.model)

    def __call__(self, *args, **kwargs):
        with self._off():
            return self.model(*args, **kwargs)


def trainable_state_dict(model: nn.Module) -> Dict[str, torch.Tensor]:
    """The parameters that train (``requires_grad``), by name: all of them when fine-tuning fully, the adapters
    only with LoRA (a few MB instead of the whole model in a checkpoint)."""
    return {n: p.detach() for n, p in model.named_parameters() if p.requires_grad}


def count_parameters(model: nn.Module, trainable: bool = False) -> int:
    """Number of parameters (shared tensors, e.g. tied embeddings, counted once); ``trainable``: only those
    with ``requires_grad``."""
    seen, n = set(), 0
    for p in model.parameters():
        if id(p) in seen or (trainable and not p.requires_grad):
            continue
        seen.add(id(p))
        n += p.numel()
    return n
