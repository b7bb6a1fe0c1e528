"""The output side of the serving engine: one sequence being decoded, token by token.

A :class:`Sequence` is one choice of one request. The scheduler (:mod:`claw_lib.serve.batcher`) hands it each
token it samples with the token's log-prob and, if asked, the k most likely alternatives; the sequence decides
when it is finished (a stop token, ``max_tokens``, or a stop string in its text) and, when streaming, sends the
text each token adds as soon as it is safe (text that could still turn out to be the start of a stop string, or
half of a character split over byte tokens, is held back until it is not).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Callable, List, Optional, Tuple

import torch

from .sampling import SamplingParams

__all__ = ["Sequence", "TokenTexts", "token_strings"]


class TokenTexts:
    """Display strings of a growing list of token ids: the text each token adds to the decoded response (a
    character split over two byte tokens shows on the second, the first is ""), special tokens by their name."""

    def __init__(self, tokenizer):
        self.tok = tokenizer
        self.special = set(getattr(tokenizer, "all_special_ids", []) or [])
        self.kept: List[int] = []
        self.prev = ""

    def add(self, i: int) -> str:
        if i in self.special:
            return self.tok.convert_ids_to_tokens(int(i))
        self.kept.append(int(i))
        text = self.tok.decode(self.kept, skip_special_tokens=True)
        out = text[len(self.prev):] if text.startswith(self.prev) else text
        self.prev = text
        return out


def token_strings(tokenizer, ids: List[int]) -> List[str]:
    """One display string per token id (:class:`TokenTexts`)."""
    texts = TokenTexts(tokenizer)
    return [texts.add(i) for i in ids]


@dataclass
class Sequence:
    """One choice being decoded.

    prompt_ids: the prompt's token ids; params: the request's sampling settings; stops: the token ids that end a
    response (kept in ``ids`` as the last action); decode: response ids -> the text a user reads;
    generator: the choice's own random generator (None: greedy or torch's global one); index: the choice's index;
    sink: called with one event dict per decoded token while streaming (None: no stream).
    Filled while decoding: ``version`` (the weights' version that wrote every token), ``ids``, ``logprobs``
    (nats, one per id), ``top`` (per id, the alternatives as (id, log-prob) pairs, most likely first), ``text``
    (the answer, stop string excluded), ``finish_reason`` ("stop" or "length").
    """

    prompt_ids: List[int]
    params: SamplingParams
    stops: Tuple[int, ...]
    decode: Callable[[List[int]], str]
    texts: TokenTexts
    generator: Optional[torch.Generator] = None
    index: int = 0
    sink: Optional[Callable[[dict], None]] = None
    version: int = -1
    ids: List[int] = field(default_factory=list)
    logprobs: List[float] = field(default_factory=list)
    top: List[List[Tuple[int, float]]] = field(default_factory=list)
    tokens: List[str] = field(default_factory=list)
    text: str = ""
    finish_reason: Optional[str] = None
    error: Optional[BaseException] = None
    sent: str = ""
    done: threading.Event = field(default_factory=threading.Event)

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None

    def add(self, token: int, logprob: float, top: List[Tuple[int, float]]) -> None:
        """One decoded token: recorded, the finish checked, the safe new text streamed. The text is decoded at
        each token only where it is needed then (stop strings, a stream), else once at the end."""
        self.ids.append(int(token))
        self.logprobs.append(float(logprob))
        self.top.append(top)
        if self.sink is not None:
            self.tokens.append(self.texts.add(int(token)))
        cut = None
        if self.params.stop or self.sink is not None:
            self.text = self.decode(self.ids)
            cut = _first_stop(self.text, self.params.stop)
        if cut is not None:
            self.text, self.finish_reason = self.text[:cut].rstrip(), "stop"
        elif token in self.stops:
            self.finish_reason = "stop"
        elif len(self.ids) >= self.params.max_tokens:
            self.finish_reason = "length"
        if self.finished:
            self.text = self.text if cut is not None else self.decode(self.ids)
            self.tokens += [self.texts.add(i) for i in self.ids[len(self.tokens):]]
        if self.sink is not None:
            self._stream()

    def _stream(self) -> None:
        """Send the text that can no longer change, and this token's log-prob."""
        safe = self.text if self.finished else _settled(self.text, self.params.stop)
        delta = safe[len(self.sent):] if safe.startswith(self.sent) else ""
        self.sent += delta
        try:
            self.sink({"index": self.index, "content": delta, "token": self.tokens[-1], "logprob": self.logprobs[-1],
                       "top": self.top[-1], "finish_reason": self.finish_reason})
        except RuntimeError:  # the listener is gone (its event loop closed): decoding goes on unstreamed
            self.sink = None

    def fail(self, error: BaseException) -> None:
        self.error = error
        self.done.set()


def _first_stop(text: str, stops) -> Optional[int]:
    """Where the earliest stop string starts in ``text`` (None: nowhere)."""
    hits = [i for i in (text.find(s) for s in stops) if i >= 0]
    return min(hits) if hits else None


def _settled(text: str, stops) -> str:
    """``text`` less any tail that could still change: an unfinished character (U+FFFD from half a byte sequence)
    or the beginning of a stop string."""
    end = len(text)
    while end and text[end - 1] == "\ufffd":
        end -= 1
    hold = max((k for s in stops for k in range(1, min(len(s), end) + 1) if text[end - k:end] == s[:k]), default=0)
    return text[:end - hold]
