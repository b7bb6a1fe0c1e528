"""OpenAI's sampling parameters, checked in one place (``POST /v1/chat/completions``; API.md).

:func:`sampling_params` reads a request body into a :class:`SamplingParams` or raises :class:`ParamError`
naming the first parameter it cannot honour (the HTTP layer answers 400 with that name as the code's suffix).
Everything the body may say about sampling is read here: what the kit honours (temperature, max_tokens /
max_completion_tokens, n, top_p, seed, stop, logprobs + top_logprobs, stream + stream_options.include_usage) and
what it refuses rather than ignores (tools, a non-text response_format, penalties, logit_bias).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Optional, Tuple

__all__ = ["SamplingParams", "ParamError", "sampling_params", "GREEDY_BELOW", "MAX_N", "MAX_TOP_LOGPROBS",
           "MAX_STOP"]

#: a temperature below this decodes greedily, as 0 does (1e-45 would overflow the scaled logits: R4-03)
GREEDY_BELOW = 1e-6
#: the most choices one request may ask for (``n``)
MAX_N = 8
#: OpenAI's range of ``top_logprobs``
MAX_TOP_LOGPROBS = 20
#: OpenAI's limit on the number of stop strings
MAX_STOP = 4


class ParamError(ValueError):
    """A parameter the server cannot honour: ``param`` names it, the message says why in one line."""

    def __init__(self, param: str, message: str):
        super().__init__(message)
        self.param = param


@dataclass(frozen=True)
class SamplingParams:
    """How one request is decoded.

    temperature: divides the logits (0: greedy; anything below :data:`GREEDY_BELOW` is stored as 0);
    max_tokens: new tokens at most per choice; n: choices; top_p: nucleus mass kept (1: all);
    seed: the choice's sampling generator seed (None: the server's own counter); stop: strings that end a choice
    (not included in its text); logprobs / top_logprobs: per-token log-probs and the k most likely alternatives
    (under the trainer's temperature, as the recorded rollout log-probs); stream / include_usage: server-sent
    events, with a last chunk carrying ``usage``; sink: where each decoded token goes as it is decoded (set by
    the HTTP layer for a stream; not a sampling setting, so not compared).
    """

    temperature: float = 1.0
    max_tokens: int = 32
    n: int = 1
    top_p: float = 1.0
    seed: Optional[int] = None
    stop: Tuple[str, ...] = ()
    logprobs: bool = False
    top_logprobs: int = 0
    stream: bool = False
    include_usage: bool = False
    sink: Optional[Callable[[dict], None]] = field(default=None, compare=False, repr=False)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


def _bool(body: dict, name: str, default: bool = False) -> bool:
    v = body.get(name)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise ParamError(name, f"{name} must be true or false, got {v!r}")
    return v


def _number(body: dict, name: str, default, lo, hi, integer: bool = False):
    v = body.get(name)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (integer and not float(v).is_integer()) \
            or not math.isfinite(v) or not lo <= v <= hi:
        kind = "an integer" if integer else "a number"
        raise ParamError(name, f"{name} must be {kind} in [{lo}, {hi}], got {v!r}")
    return int(v) if integer else float(v)


def _stop(body: dict) -> Tuple[str, ...]:
    v = body.get("stop")
    if v is None:
        return ()
    items = [v] if isinstance(v, str) else v
    if not isinstance(items, list) or not 1 <= len(items) <= MAX_STOP or \
            not all(isinstance(s, str) and s for s in items):
        raise ParamError("stop", f"stop must be a non-empty string or a list of 1 to {MAX_STOP} non-empty strings, "
                         f"got {v!r}")
    return tuple(items)


def _max_tokens(body: dict, default: int, limit: int) -> int:
    """max_completion_tokens (OpenAI's current name) over max_tokens; each one given is checked, so a null
    max_completion_tokens does not hide a bad max_tokens (R4-14)."""
    old = _number(body, "max_tokens", None, 1, limit, integer=True)
    new = _number(body, "max_completion_tokens", None, 1, limit, integer=True)
    return new if new is not None else old if old is not None else default


def _refused(body: dict) -> None:
    """What the kit cannot honour: a 400 naming it rather than silence."""
    if body.get("tools") not in (None, []):
        raise ParamError("tools", "tools are not supported by this server (the model does not call tools)")
    if body.get("functions") not in (None, []):
        raise ParamError("functions", "functions are not supported by this server (the model does not call tools)")
    if body.get("tool_choice") not in (None, "none"):
        raise ParamError("tool_choice", "tool_choice must be 'none' or absent: this server does not call tools")
    fmt = body.get("response_format")
    if fmt is not None and fmt != {"type": "text"}:
        raise ParamError("response_format", f"response_format must be {{'type': 'text'}} or absent; this server does "
                         f"not constrain its output, got {fmt!r}")
    for name in ("presence_penalty", "frequency_penalty"):
        if _number(body, name, 0.0, -2.0, 2.0) != 0.0:
            raise ParamError(name, f"{name} is not supported by this server (only 0)")
    if body.get("logit_bias") not in (None, {}):
        raise ParamError("logit_bias", "logit_bias is not supported by this server")


def _stream(body: dict) -> Tuple[bool, bool]:
    stream = _bool(body, "stream")
    opts = body.get("stream_options")
    if opts is None:
        return stream, False
    if not stream:
        raise ParamError("stream_options", "stream_options is only allowed when stream is true")
    if not isinstance(opts, dict):
        raise ParamError("stream_options", f"stream_options must be an object, got {opts!r}")
    return stream, _bool(opts, "include_usage")


def sampling_params(body: dict, temperature: float, max_tokens: int, max_tokens_limit: int) -> SamplingParams:
    """The checked :class:`SamplingParams` of a chat request ``body`` (a dict); ``temperature`` and ``max_tokens``
    are the server's defaults, ``max_tokens_limit`` the largest max_tokens accepted. Raises :class:`ParamError`."""
    _refused(body)
    temp = _number(body, "temperature", float(temperature), 0.0, 2.0)
    logprobs = _bool(body, "logprobs")
    top = _number(body, "top_logprobs", 0, 0, MAX_TOP_LOGPROBS, integer=True)
    if top and not logprobs:
        raise ParamError("top_logprobs", "top_logprobs needs logprobs set to true")
    seed = _number(body, "seed", None, -2 ** 63, 2 ** 63 - 1, integer=True)
    stream, usage = _stream(body)
    return SamplingParams(temperature=0.0 if temp < GREEDY_BELOW else temp,
                          max_tokens=_max_tokens(body, max_tokens, max_tokens_limit),
                          n=_number(body, "n", 1, 1, MAX_N, integer=True),
                          top_p=_number(body, "top_p", 1.0, 0.0, 1.0), seed=seed, stop=_stop(body),
                          logprobs=logprobs, top_logprobs=top, stream=stream, include_usage=usage)
