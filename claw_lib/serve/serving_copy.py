"""The copy of the weights that decodes (``ServeConfig.serving_format``), rebuilt at each weight swap.

The engine keeps its full-precision serving copy (what a checkpoint and the tests read) and decodes from
:func:`serving_copy` of it: the same module for "full"; a bfloat16 copy for "bf16" (a GPU's fast format); for "int8"
a copy whose ``nn.Linear`` layers hold int8 weights and quantise their activations on the fly (PyTorch's dynamic
quantisation, ``torch.ao.quantization.quantize_dynamic``, whose CPU kernels ship with torch). Decoding on a CPU is
bound by reading the weights, so a quarter of the bytes is where the time is. The training weights stay full
precision; the recorded rollout log-probs are the serving copy's, and the trainer logs their gap to its own and the
importance ratio per update (``tis/rollout_logprob_abs_diff``, ``tis/ratio_mean``).

Why not torchao, the maintained successor: measured on this kind of machine (Qwen2.5-Coder-0.5B-Instruct, 2 shared
CPU cores, one thread, greedy, 24 new tokens), torchao 0.18 on torch 2.13.0+cpu has no fast CPU kernel for
``Int8DynamicActivationInt8WeightConfig`` or ``Int8WeightOnlyConfig``: both decoded at about 0.2 tokens/s, against
9.4 tokens/s for ``quantize_dynamic`` one sequence at a time and 29 tokens/s for 8 sequences together (fp32: 4.1 and
10.4; ``benchmarks/bench_serve_batching.py --model`` measures the kit's engine). ``quantize_dynamic`` is deprecated
in favour of torchao and warns once; the warning is silenced here.

The kit's tiny GPT is a GPT-2, whose attention and MLP layers are ``Conv1D`` rather than ``nn.Linear``: there
"int8" quantises the output layer only. LoRA adapters stay in full precision beside their int8 base layers. Hugging Face models such as Qwen2.5 are ``nn.Linear`` throughout. The
dynamic int8 kernels are CPU kernels: "int8" is refused for a model on a GPU (use "bf16"). They take float32
activations: the int8 copy of a bfloat16 model is made from a float32 copy of it (its embeddings and norms in float32).
"""
from __future__ import annotations

import copy
import warnings
from typing import Dict, Optional

import torch

__all__ = ["serving_copy", "check_serving_format"]


def check_serving_format(fmt: str, device: str = "cpu") -> None:
    """ValueError (one line) for a format this device cannot decode: "int8" on a GPU."""
    if fmt == "int8" and str(device).startswith("cuda"):
        raise ValueError(f"serving_format 'int8' is a CPU format (dynamic int8 kernels); on {device} use 'bf16'")


def serving_copy(model, fmt: str, shared: Optional[Dict[int, torch.nn.Parameter]] = None):
    """The module that decodes for ``model`` (frozen, eval mode) in ``fmt``: one of
    :data:`~claw_lib.serve.config.SERVING_FORMATS` ("full": ``model`` itself, no copy). ``shared`` (id -> parameter,
    :func:`~claw_lib.serve.engine.shared_base`): parameters the "int8" copy shares instead of copying (the base
    weights under adapters: its int8 layers are made from them, its embeddings and norms are theirs)."""
    if fmt == "full":
        return model
    if fmt == "bf16":
        return copy.deepcopy(model).to(torch.bfloat16)
    check_serving_format(fmt, str(next(model.parameters()).device))
    # the int8 kernels take float32 activations: a model with any other parameters (bfloat16 from ``--dtype auto`` on
    # a CPU with AMX) is copied into float32 first, sharing nothing (a shared parameter converted in place would
    # change the training weights)
    full = all(p.dtype == torch.float32 for p in model.parameters())
    base = copy.deepcopy(model, dict(shared or {})) if full else copy.deepcopy(model).float()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # quantize_dynamic's deprecation note (module docstring)
        return torch.ao.quantization.quantize_dynamic(base, base_linears(model), dtype=torch.qint8, inplace=True)


def base_linears(model) -> set:
    """The names of ``model``'s ``nn.Linear`` layers that are not LoRA adapters' own (PEFT's ``lora_A`` /
    ``lora_B``, the kit's): those are quantised, the adapters stay in full precision beside their int8 base (they
    are small, and PEFT reads their weight's dtype)."""
    return {name for name, m in model.named_modules()
            if type(m) is torch.nn.Linear and not any(part.startswith("lora_") for part in name.split("."))}
