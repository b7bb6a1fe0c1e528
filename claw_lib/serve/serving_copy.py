"""The copy of the weights that decodes (``ServeConfig.serving_format``), rebuilt at each weight swap.

The engine keeps its full-precision serving copy (what a checkpoint and the tests read) and decodes from
:func:`serving_copy` of it: the same module for "full"; a bfloat16 copy for "bf16" (a GPU's fast format); for "int8"
a copy whose ``nn.Linear`` layers hold int8 weights and quantise their activations on the fly (torchao's
``Int8DynamicActivationInt8WeightConfig``, the maintained successor of ``torch.ao.quantization.quantize_dynamic``;
decoding on a CPU is bound by reading the weights, so a quarter of the bytes is where the time is). The training
weights stay full precision; the recorded rollout log-probs are the serving copy's, and the trainer logs their gap
to its own and the importance ratio per update (``tis/rollout_logprob_abs_diff``, ``tis/ratio_mean``).

torchao is not among the kit's dependencies: version 0.18 on torch 2.13.0+cpu prints four lines about GPU kernels it
cannot load when imported, and transformers 5.24 imports it whenever it is installed, so every command's error
output would carry them. Install it (``pip install torchao``) where "int8" is wanted.

The kit's tiny GPT is a GPT-2, whose attention and MLP layers are ``Conv1D`` rather than ``nn.Linear``: there
"int8" quantises the output layer only. Hugging Face models such as Qwen2.5 are ``nn.Linear`` throughout.
"""
from __future__ import annotations

import contextlib
import copy
import io
import warnings

import torch

__all__ = ["serving_copy", "check_serving_format"]


def _int8_config():
    """torchao's int8 config, imported quietly (its import reports the GPU kernels it could not load); None when
    torchao is not installed."""
    with contextlib.redirect_stderr(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            # lazy: torchao is optional (serving_format int8 only)
            from torchao.quantization import Int8DynamicActivationInt8WeightConfig, quantize_
        except ImportError:
            return None
    return quantize_, Int8DynamicActivationInt8WeightConfig


def check_serving_format(fmt: str) -> None:
    """ValueError (one line) for a format this machine cannot build: "int8" without torchao."""
    if fmt == "int8" and _int8_config() is None:
        raise ValueError("serving_format 'int8' needs torchao (pip install torchao); use 'full' or 'bf16'")


def serving_copy(model, fmt: str):
    """The module that decodes for ``model`` (frozen, eval mode) in ``fmt``: one of
    :data:`~claw_lib.serve.config.SERVING_FORMATS` ("full": ``model`` itself, no copy)."""
    if fmt == "full":
        return model
    out = copy.deepcopy(model)
    if fmt == "bf16":
        return out.to(torch.bfloat16)
    found = _int8_config()
    if found is None:
        check_serving_format(fmt)
    quantize_, config = found
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        quantize_(out, config())
    return out
