"""The HTTP layer of ``claw serve``: OpenAI's chat API plus the kit's status, sessions and timeline (API.md).

FastAPI on uvicorn. Every request is checked here, before it reaches the model: a malformed one gets a 4xx
JSON error in OpenAI's shape, ``{"error": {"message": ..., "type": "invalid_request_error", "code": ...}}``,
with a message that names the problem. Generation runs in a worker thread, so the event loop keeps answering
(status, sessions, the page) while the model writes.
"""
from __future__ import annotations

import re
import time
import uuid
from pathlib import Path
from typing import Optional

from ..prompts import message_text
from .matching import main_looking
from .sampling import ParamError, sampling_params
from .system import ChatTurn, LiveSystem
from .versions import version_name

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
    version = _version(body.get("model"), system)
    cfg = system.cfg
    msgs = _messages(body, cfg.max_message_chars, cfg.max_messages)
    sid = headers.get("x-session-id") or body.get("session_id")
    if sid is not None and (not isinstance(sid, str) or not sid.strip() or len(sid) > 200):
        raise ApiError(400, "the session id must be a non-empty string of at most 200 characters", "bad_session")
    given = headers.get("x-turn-type") or body.get("turn_type")
    tt = given or ("main" if sid else "side")
    if tt not in ("main", "side"):
        raise ApiError(400, f"X-Turn-Type must be 'main' or 'side', got {tt!r}", "bad_turn_type")
    if tt == "main" and not sid:
        raise ApiError(400, "a main-line turn needs a session id (header X-Session-Id or body field session_id)",
                       "missing_session")
    if tt == "main" and msgs[-1]["role"] not in ("user", "tool"):
        raise ApiError(400, "a main-line turn must end with a user or tool message (it is the previous turn's next "
                       "state)", "bad_last_message")
    done = _flag(headers.get("x-session-done", body.get("session_done", False)), "X-Session-Done")
    try:
        params = sampling_params(body, system.ppo.temperature, system.ppo.max_new_tokens, cfg.max_tokens_limit)
    except ParamError as e:
        raise ApiError(400, str(e), f"bad_{e.param}")
    return ChatTurn(msgs, sid, tt, done, params.temperature, params.max_tokens, params, version=version,
                    no_session=main_looking(sid, given, msgs))


def _version(model, system: LiveSystem) -> Optional[int]:
    """The kept published version a request's ``model`` names (``claw-v3``: serve.versions), None for the served
    model's own id or none given (the live version); 404 naming it for any other."""
    if model is None or model == system.model_id:
        return None
    version = system.versions.resolve(model)
    if version is None:
        served = ", ".join(repr(m) for m in [system.model_id] + system.versions.names())
        raise ApiError(404, f"model {model!r} is not served here; this server serves {served}", "model_not_found")
    return version


def model_field(system: LiveSystem, req: ChatTurn) -> str:
    """The ``model`` of an answer: the version named in the request, else the served model's id."""
    return system.model_id if req.version is None else version_name(req.version)


def completion(system: LiveSystem, served, turn: Optional[int], req: ChatTurn, logprobs: bool) -> dict:
    """The ``chat.completion`` answer: one choice per served choice (``n``), with the kit's ``claw`` field."""
    choices = [{"index": k, "message": {"role": "assistant", "content": s.text}, "finish_reason": s.finish_reason,
                "logprobs": {"content": logprob_entries(system.engine.tokenizer, s.tokens, s.rollout_log_probs,
                                                        s.top_logprobs)} if logprobs else None}
               for k, s in enumerate([served] + served.alternatives)]
    return {"id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion", "created": int(time.time()),
            "model": model_field(system, req), "choices": choices, "usage": usage(served), "claw": claw_field(served, turn, req)}


def usage(served) -> dict:
    """OpenAI's ``usage`` of an answer and its other choices (completion tokens of all choices)."""
    n_p = len(served.prompt_ids)
    n_r = sum(len(s.response_ids) for s in [served] + served.alternatives)
    return {"prompt_tokens": n_p, "completion_tokens": n_r, "total_tokens": n_p + n_r}


def claw_field(served, turn: Optional[int], req: ChatTurn) -> dict:
    return {"session_id": req.session_id, "turn": turn, "turn_type": req.turn_type, "policy_version": served.version}


def logprob_entries(tokenizer, tokens, logprobs, tops) -> list:
    """OpenAI's ``logprobs.content``: per token its text, log-prob, UTF-8 bytes and ``top_logprobs`` (the k most
    likely tokens at that position, each as its own text; [] when not asked)."""
    tops = list(tops) or [[]] * len(tokens)
    return [logprob_entry(tokenizer, t, lp, top) for t, lp, top in zip(tokens, logprobs, tops)]


def logprob_entry(tokenizer, token: str, logprob: float, top) -> dict:
    def one(text, lp):
        return {"token": text, "logprob": float(lp), "bytes": list(text.encode("utf-8"))}

    return {**one(token, logprob), "top_logprobs": [one(tokenizer.decode([int(i)]), lp) for i, lp in top]}
