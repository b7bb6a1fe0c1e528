"""The HTTP layer of ``claw serve``: OpenAI's chat API plus the kit's status, sessions and timeline (API.md).

FastAPI on uvicorn. Every request is checked here, before it reaches the model: a malformed one gets a 4xx
JSON error in OpenAI's shape, ``{"error": {"message": ..., "type": "invalid_request_error", "code": ...}}``,
with a message that names the problem. Generation runs in a worker thread, so the event loop keeps answering
(status, sessions, the page) while the model writes.
"""
from __future__ import annotations

import json
import math
import re
import time
import uuid
from pathlib import Path
from typing import Optional

from .system import ChatTurn, LiveSystem

__all__ = ["ApiError", "parse_chat"]

STATIC = Path(__file__).parent / "static"
ROLES = ("system", "developer", "user", "assistant", "tool")
_SURROGATE = re.compile("[\ud800-\udfff]")


class ApiError(Exception):
    """An HTTP error with a one-line message (status 4xx)."""

    def __init__(self, status: int, message: str, code: str = "invalid_request"):
        super().__init__(message)
        self.status, self.message, self.code = status, message, code


def _flag(value, name: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "1", "yes", "false", "0", "no", ""):
        return value.strip().lower() in ("true", "1", "yes")
    raise ApiError(400, f"{name} must be true or false, got {value!r}", "bad_header")


def _number(body: dict, name: str, default, lo, hi, kind=float):
    v = body.get(name, default)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (kind is int and not float(v).is_integer()) \
            or not math.isfinite(v) or not lo <= v <= hi:
        raise ApiError(400, f"{name} must be {'an integer' if kind is int else 'a number'} in [{lo}, {hi}], got {v!r}",
                       f"bad_{name}")
    return kind(v)


def check_strings(body) -> None:
    """:class:`ApiError` 400 naming the first string of a parsed JSON body (a key or a value, at any depth) that is
    not valid Unicode: a lone surrogate (``"\\ud800"``), which JSON allows and UTF-8 cannot hold. Checked before
    anything is served or recorded (R4-04, R4-05)."""
    stack = [("", body)]
    while stack:  # iterative: a body may nest as deep as the JSON parser allowed
        path, v = stack.pop()
        if isinstance(v, dict):
            for k, x in v.items():
                name = f"{path}.{k}" if path else str(k)
                if _SURROGATE.search(k):
                    raise ApiError(400, f"the key {name!r} is not valid Unicode (it holds a lone surrogate)",
                                   "bad_unicode")
                stack.append((name, x))
        elif isinstance(v, list):
            stack.extend((f"{path}[{i}]", x) for i, x in enumerate(v))
        elif isinstance(v, str) and _SURROGATE.search(v):
            raise ApiError(400, f"{path or 'the body'} is not valid Unicode (it holds a lone surrogate such as "
                           "\\ud800)", "bad_unicode")


def _content(c, k: int) -> str:
    """A message's content as text; 400 for a part that is not ``{"type": ..., ...}`` or a text part whose text is
    not a string (R4-02, R4-12). Parts of other types (images, audio) are dropped, as API.md says."""
    from ..prompts import message_text

    if c is not None and not isinstance(c, (str, list)):
        raise ApiError(400, f"messages[{k}].content must be a string or a list of parts", "bad_content")
    for i, part in enumerate(c if isinstance(c, list) else []):
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise ApiError(400, f"messages[{k}].content[{i}] must be an object with a type, such as "
                           f"{{\"type\": \"text\", \"text\": \"...\"}}, got {str(part)[:60]!r}", "bad_content")
        if part["type"] == "text" and not isinstance(part.get("text"), str):
            raise ApiError(400, f"messages[{k}].content[{i}].text must be a string, got {part.get('text')!r:.60}",
                           "bad_content")
    return message_text(c)


def _messages(body: dict, limit: int, most: int) -> list:
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise ApiError(400, "messages must be a non-empty list of {role, content} objects", "bad_messages")
    if len(msgs) > most:
        raise ApiError(413, f"the conversation has {len(msgs)} messages; the server accepts at most {most}",
                       "too_many_messages")
    out = []
    for k, m in enumerate(msgs):
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            role = m.get("role") if isinstance(m, dict) else None
            raise ApiError(400, f"messages[{k}].role must be one of {list(ROLES)}, got {role!r}", "bad_role")
        text = _content(m.get("content"), k)
        if len(text) > limit:
            raise ApiError(413, f"messages[{k}] is {len(text)} characters; the server accepts at most {limit}",
                           "message_too_long")
        out.append({"role": m["role"], "content": text})
    return out


def parse_chat(body, headers, system: LiveSystem) -> ChatTurn:
    """A checked :class:`~claw_lib.serve.system.ChatTurn` from a request body and its headers; :class:`ApiError`
    naming the first problem."""
    if not isinstance(body, dict):
        raise ApiError(400, "the body must be a JSON object", "bad_body")
    check_strings(body)
    model = body.get("model")
    if model is not None and model != system.model_id:
        raise ApiError(404, f"model {model!r} is not served here; this server serves {system.model_id!r}",
                       "model_not_found")
    cfg = system.cfg
    msgs = _messages(body, cfg.max_message_chars, cfg.max_messages)
    sid = headers.get("x-session-id") or body.get("session_id")
    if sid is not None and (not isinstance(sid, str) or not sid.strip() or len(sid) > 200):
        raise ApiError(400, "the session id must be a non-empty string of at most 200 characters", "bad_session")
    tt = (headers.get("x-turn-type") or body.get("turn_type") or ("main" if sid else "side"))
    if tt not in ("main", "side"):
        raise ApiError(400, f"X-Turn-Type must be 'main' or 'side', got {tt!r}", "bad_turn_type")
    if tt == "main" and not sid:
        raise ApiError(400, "a main-line turn needs a session id (header X-Session-Id or body field session_id)",
                       "missing_session")
    if tt == "main" and msgs[-1]["role"] not in ("user", "tool"):
        raise ApiError(400, "a main-line turn must end with a user or tool message (it is the previous turn's next "
                       "state)", "bad_last_message")
    done = _flag(headers.get("x-session-done", body.get("session_done", False)), "X-Session-Done")
    limit = cfg.max_tokens_limit
    default = system.ppo.max_new_tokens
    mt = body.get("max_completion_tokens", body.get("max_tokens"))
    max_tokens = _number({"max_tokens": mt}, "max_tokens", default, 1, limit, int)
    temp = _number(body, "temperature", system.ppo.temperature, 0.0, 2.0)
    return ChatTurn(msgs, sid, tt, done, temp, max_tokens)


def completion(system: LiveSystem, served, turn: Optional[int], req: ChatTurn, logprobs: bool) -> dict:
    """The ``chat.completion`` answer (with the kit's ``claw`` field)."""
    choice = {"index": 0, "message": {"role": "assistant", "content": served.text},
              "finish_reason": "stop" if served.finished else "length", "logprobs": None}
    if logprobs:
        choice["logprobs"] = {"content": [{"token": t, "logprob": lp, "bytes": list(t.encode("utf-8")),
                                           "top_logprobs": []}
                                          for t, lp in zip(served.tokens, served.rollout_log_probs)]}
    n_p, n_r = len(served.prompt_ids), len(served.response_ids)
    return {"id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion", "created": int(time.time()),
            "model": system.model_id, "choices": [choice],
            "usage": {"prompt_tokens": n_p, "completion_tokens": n_r, "total_tokens": n_p + n_r},
            "claw": {"session_id": req.session_id, "turn": turn, "turn_type": req.turn_type,
                     "policy_version": served.version}}


def sse_chunks(answer: dict, tokens: list):
    """The same answer as a stream of ``chat.completion.chunk`` events (upstream's proxy also asks the engine for
    the whole answer and streams it back): a role chunk, one chunk per token, a finish chunk, ``[DONE]``."""
    base = {"id": answer["id"], "object": "chat.completion.chunk", "created": answer["created"],
            "model": answer["model"], "claw": answer["claw"]}
    choice = answer["choices"][0]

    def event(delta, finish=None, lp=None):
        c = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": lp}
        return "data: " + json.dumps({**base, "choices": [c]}, ensure_ascii=False) + "\n\n"

    yield event({"role": "assistant", "content": ""})
    content = choice["message"]["content"]
    pieces = stream_pieces(tokens, content)
    lps = choice["logprobs"]["content"] if choice["logprobs"] else [None] * len(pieces)
    for piece, lp in zip(pieces, lps):
        yield event({"content": piece}, lp={"content": [lp]} if lp else None)
    yield event({}, choice["finish_reason"])
    yield "data: [DONE]\n\n"


def stream_pieces(tokens, content: str) -> list:
    """One piece of text per response token whose concatenation is exactly ``content`` (the served text, which
    drops special tokens and surrounding whitespace); a token that adds nothing gets "". Falls back to the whole
    content in the first piece when the tokens' texts do not add up to it."""
    pieces = ["" if (t.startswith("<|") and t.endswith("|>")) else t for t in tokens] or [content]
    joined = "".join(pieces)
    lead = len(joined) - len(joined.lstrip())
    if joined.strip() != content:
        return [content] + [""] * (len(pieces) - 1)
    out, pos, end = [], 0, lead + len(content)
    for p in pieces:  # cut each piece to the part inside [lead, end)
        a, b = max(pos, lead), min(pos + len(p), end)
        out.append(joined[a:b] if b > a else "")
        pos += len(p)
    return out
