"""The routes of ``claw serve`` (API.md), on FastAPI (no ``from __future__ import annotations`` here: FastAPI reads
the parameters' annotations at run time)."""

import json
from typing import Optional

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect

from .app import ApiError, completion, parse_chat, STATIC
from .config import max_body_bytes
from .engine import PromptTooLongError
from .records import RecordWriteError
from .sessions import SessionFinishedError
from .streaming import stream_answer
from .versions import UnknownVersionError

__all__ = ["create_app", "add_routes"]


def _error(status: int, message: str, code: str):
    return JSONResponse({"error": {"message": message, "type": "invalid_request_error", "code": code}},
                        status_code=status)


async def read_json(request: Request, limit: int):
    """The request's JSON body, checked before it is parsed: ``application/json`` only (a ``text/plain`` POST from
    any web page needs no CORS preflight, so it could queue a false correction: R4-S1), at most ``limit`` bytes
    (R4-28), nesting the parser can read (R4-01); a client that hangs up is answered with nothing (R4-06)."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/json":
        raise ApiError(415, f"the body must be sent as Content-Type: application/json, got {kind or 'none'!r}",
                       "unsupported_media_type")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise ApiError(413, f"the body is {int(declared)} bytes; the server accepts at most {limit}", "body_too_large")
    raw = bytearray()
    try:
        async for chunk in request.stream():
            raw += chunk
            if len(raw) > limit:
                raise ApiError(413, f"the body is over {limit} bytes, the most the server accepts", "body_too_large")
    except ClientDisconnect:
        raise ClientGone() from None
    try:
        return json.loads(bytes(raw) or b"null")
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise ApiError(400, f"the body is not valid JSON ({str(e).splitlines()[0][:120]})", "bad_json") from None


def _model_object(system) -> dict:
    """OpenAI's model object of the served model (``created``: when this server started, unix seconds)."""
    return {"id": system.model_id, "object": "model", "created": int(system.t0), "owned_by": "claw-kit"}


class ClientGone(Exception):
    """The client closed the connection before its request was read: nobody is left to answer."""


def allowed_hosts(host: str) -> Optional[set]:
    """The Host header values a server bound to ``host`` accepts (None: any, for a server bound to every address,
    which :func:`~claw_lib.serve.server.serve_forever` warns about). Refusing the others stops a DNS-rebinding page
    from reading the sessions through a name that resolves to 127.0.0.1 (R4-S2)."""
    if host in ("0.0.0.0", "::", ""):
        return None
    return {host.strip("[]").lower(), "localhost", "127.0.0.1", "::1"}


def _host_of(header: str) -> str:
    h = header.strip().lower()
    if h.startswith("["):
        return h[1:h.find("]")] if "]" in h else h
    return h.rsplit(":", 1)[0] if h.count(":") == 1 else h


class HostGuard:
    """ASGI middleware: an HTTP request whose Host header is not one of ``hosts`` (None: any) gets a 421 JSON error
    (a page reached through another name, DNS rebinding). Plain ASGI rather than ``@app.middleware("http")``, whose
    per-request task and memory stream cost latency: with it, the tiny GPT's p50 over HTTP was about 10% higher at 1
    and at 16 concurrent sessions (three paired runs, 2026-12-07)."""

    def __init__(self, app, hosts):
        self.app, self.hosts = app, hosts

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and self.hosts is not None:
            host = _host_of(Headers(scope=scope).get("host", ""))
            if host not in self.hosts:
                refused = _error(421, f"Host {host!r} is not this server's address ({', '.join(sorted(self.hosts))}); "
                                 "a page reached through another name is refused", "bad_host")
                return await refused(scope, receive, send)
        return await self.app(scope, receive, send)


def create_app(system, host: str = "127.0.0.1"):
    """The FastAPI application of ``system`` bound to ``host`` (routes in API.md; the request checks and OpenAI's
    shapes are :mod:`claw_lib.serve.app`'s)."""
    return add_routes(system, host)


def add_routes(system, host: str = "127.0.0.1"):
    """A FastAPI app serving ``system`` on ``host`` (its Host header check: :func:`allowed_hosts`)."""
    app = FastAPI(title="claw serve", docs_url=None, redoc_url=None)
    hosts = allowed_hosts(host)

    app.add_middleware(HostGuard, hosts=hosts)

    @app.exception_handler(ClientGone)
    async def _gone(request, e: ClientGone):
        return Response(status_code=400)

    @app.exception_handler(ApiError)
    async def _api_error(request, e: ApiError):
        return _error(e.status, e.message, e.code)

    @app.exception_handler(HTTPException)
    async def _http_error(request, e: HTTPException):
        return _error(e.status_code, f"{request.method} {request.url.path}: {e.detail}", "not_found"
                      if e.status_code == 404 else "http_error")

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request, e: RequestValidationError):  # FastAPI's own shape would break API.md (R4-29)
        first = (e.errors() or [{}])[0]
        where = ".".join(str(x) for x in first.get("loc", ())[1:]) or "the request"
        return _error(400, f"{where}: {first.get('msg', 'invalid')} (got {first.get('input')!r:.60})", "bad_request")

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        body = await read_json(request, max_body_bytes(system.cfg))
        req = parse_chat(body, request.headers, system)

        async def serve(req):
            try:
                return await run_in_threadpool(system.serve, req)
            except SessionFinishedError as e:
                raise ApiError(409, str(e), "session_finished")
            except PromptTooLongError as e:
                raise ApiError(413, str(e), "prompt_too_long")
            except UnknownVersionError as e:  # expired while the request waited
                raise ApiError(404, str(e), "model_not_found")
            except RecordWriteError as e:  # nothing was recorded, nothing is answered (R4-27)
                raise ApiError(507, f"the turn was not recorded, so it is not answered: {e.strerror}",
                               "insufficient_storage")

        if req.params.stream:  # tokens sent as they are decoded
            return StreamingResponse(await stream_answer(system, req, serve), media_type="text/event-stream")
        served, turn = await serve(req)
        return completion(system, served, turn, req, req.params.logprobs)

    _claw_routes(app, system)
    return app


def _claw_routes(app, system) -> None:
    """The models list, the kit's status / sessions / events / metrics, and the page."""

    @app.get("/v1/models")
    async def models():  # the served model, then its kept published versions (serve.versions)
        return {"object": "list", "data": [_model_object(system)] + system.versions.model_objects(system.model_id)}

    @app.get("/v1/models/{model_id:path}")
    async def model(model_id: str):
        found = [m for m in (await models())["data"] if m["id"] == model_id]
        if not found:
            served = ", ".join(repr(m["id"]) for m in (await models())["data"])
            raise ApiError(404, f"model {model_id!r} is not served here; this server serves {served}",
                           "model_not_found")
        return found[0]

    @app.get("/v1/claw/status")
    async def status():
        return system.status()

    @app.get("/v1/claw/sessions/{session_id}")
    async def session(session_id: str):
        view = system.session_view(session_id)
        if view is None:
            raise ApiError(404, f"no session {session_id!r} on this server", "session_not_found")
        return view

    @app.get("/v1/claw/events")
    async def events(since: int = 0):
        with system.cond:
            ev = system.events[max(since, 0):]
            return {"events": ev, "next": len(system.events)}

    @app.get("/v1/claw/metrics")
    async def metrics():
        with system.cond:
            return {"rows": list(system.metrics)}

    @app.get("/")
    async def page():
        index = STATIC / "index.html"
        if index.exists():
            return FileResponse(index, media_type="text/html")
        return HTMLResponse("<!doctype html><title>claw serve</title><p>claw serve is running; the chat page is "
                            "not installed.</p>")

    if STATIC.is_dir():
        from fastapi.staticfiles import StaticFiles  # lazy: the chat page's files, when the package ships them

        app.mount("/static", StaticFiles(directory=STATIC), name="static")
