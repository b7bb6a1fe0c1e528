"""Streaming answers (``"stream": true``): server-sent ``chat.completion.chunk`` events sent as tokens are decoded.

The request is served as any other (:meth:`~claw_lib.serve.system.LiveSystem.serve` in a worker thread), with a
sink in its :class:`~claw_lib.serve.sampling.SamplingParams` that the decoding thread calls once per token
(:class:`~claw_lib.serve.sequence.Sequence`); the events reach the event loop through a queue. A request refused
before decoding (a finished session, a prompt too long) still gets its HTTP error, not a stream. The events:
a role chunk per choice, one chunk per decoded token (the text it settles, possibly "", and with ``logprobs``
its log-prob entry), a finish chunk per choice carrying the kit's ``claw`` field, a ``usage`` chunk with no
choices when ``stream_options.include_usage`` is set, then ``data: [DONE]``.
"""
from __future__ import annotations

import asyncio
import dataclasses
import json
import time
import uuid

from .app import claw_field, logprob_entry, model_field, usage

__all__ = ["stream_answer"]


async def stream_answer(system, req, serve):
    """Start serving ``req`` with ``serve`` (an async callable: req -> (Served, turn), raising the HTTP errors);
    returns an async iterator of SSE lines once the first token is decoded, or raises what ``serve`` raised
    before any token."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue()
    req.params = dataclasses.replace(req.params, sink=lambda ev: loop.call_soon_threadsafe(queue.put_nowait, ev))
    task = asyncio.ensure_future(serve(req))
    first = asyncio.ensure_future(queue.get())
    await asyncio.wait({task, first}, return_when=asyncio.FIRST_COMPLETED)
    if not first.done() and task.exception() is not None:
        first.cancel()
        task.result()  # raises
    return _events(system, req, queue, first, task)


async def _events(system, req, queue, pending, task):
    base = {"id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion.chunk", "created": int(time.time()),
            "model": model_field(system, req)}
    tok = system.engine.tokenizer

    def chunk(choices, **extra):
        return "data: " + json.dumps({**base, "choices": choices, **extra}, ensure_ascii=False) + "\n\n"

    sent = {}  # choice index -> the text streamed so far

    def token(ev):
        sent[ev["index"]] = sent.get(ev["index"], "") + ev["content"]
        lp = {"content": [logprob_entry(tok, ev["token"], ev["logprob"], ev["top"])]} if req.params.logprobs else None
        return chunk([{"index": ev["index"], "delta": {"content": ev["content"]}, "finish_reason": None,
                       "logprobs": lp}])

    yield chunk([{"index": k, "delta": {"role": "assistant", "content": ""}, "finish_reason": None, "logprobs": None}
                 for k in range(req.params.n)])
    while True:
        done, _ = await asyncio.wait({pending, task}, return_when=asyncio.FIRST_COMPLETED)
        if pending not in done:
            break
        yield token(pending.result())
        pending = asyncio.ensure_future(queue.get())
    pending.cancel()
    while not queue.empty():
        yield token(queue.get_nowait())
    if task.exception() is not None:
        e = task.exception()
        yield chunk([], error={"message": str(e) or type(e).__name__, "type": "server_error"})
        return
    served, turn = task.result()
    claw = claw_field(served, turn, req)
    for k, s in enumerate([served] + served.alternatives):
        rest = s.text[len(sent.get(k, "")):] if s.text.startswith(sent.get(k, "")) else ""
        if rest:  # not decoded here (a retried turn answered from the records): the text in one chunk
            yield chunk([{"index": k, "delta": {"content": rest}, "finish_reason": None, "logprobs": None}])
        yield chunk([{"index": k, "delta": {}, "finish_reason": s.finish_reason, "logprobs": None}], claw=claw)
    if req.params.include_usage:
        yield chunk([], usage=usage(served), claw=claw)
    yield "data: [DONE]\n\n"
