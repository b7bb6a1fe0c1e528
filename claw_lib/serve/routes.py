"""The routes of ``claw serve`` (API.md), on FastAPI (no ``from __future__ import annotations`` here: FastAPI reads
the parameters' annotations at run time)."""

import json

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, StreamingResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from .app import ApiError, completion, parse_chat, sse_chunks, STATIC

__all__ = ["create_app", "add_routes"]


def _error(status: int, message: str, code: str):
    return JSONResponse({"error": {"message": message, "type": "invalid_request_error", "code": code}},
                        status_code=status)


def create_app(system):
    """The FastAPI application of ``system`` (routes in API.md; the request checks and OpenAI's shapes are
    :mod:`claw_lib.serve.app`'s)."""
    return add_routes(system)


def add_routes(system):
    """A FastAPI app serving ``system``."""
    from .sessions import SessionFinishedError
    from .engine import PromptTooLongError

    app = FastAPI(title="claw serve", docs_url=None, redoc_url=None)

    @app.exception_handler(ApiError)
    async def _api_error(request, e: ApiError):
        return _error(e.status, e.message, e.code)

    @app.exception_handler(HTTPException)
    async def _http_error(request, e: HTTPException):
        return _error(e.status_code, f"{request.method} {request.url.path}: {e.detail}", "not_found"
                      if e.status_code == 404 else "http_error")

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        try:
            body = json.loads(await request.body() or b"null")
        except (ValueError, UnicodeDecodeError) as e:
            raise ApiError(400, f"the body is not valid JSON ({str(e).splitlines()[0][:120]})", "bad_json")
        req = parse_chat(body, request.headers, system)
        try:
            served, turn = await run_in_threadpool(system.serve, req)
        except SessionFinishedError as e:
            raise ApiError(409, str(e), "session_finished")
        except PromptTooLongError as e:
            raise ApiError(413, str(e), "prompt_too_long")
        answer = completion(system, served, turn, req, bool(body.get("logprobs")))
        if body.get("stream"):
            return StreamingResponse(sse_chunks(answer, served.tokens), media_type="text/event-stream")
        return answer

    _claw_routes(app, system)
    return app


def _claw_routes(app, system) -> None:
    """The models list, the kit's status / sessions / events / metrics, and the page."""

    @app.get("/v1/models")
    async def models():
        return {"object": "list", "data": [{"id": system.model_id, "object": "model", "owned_by": "claw-kit"}]}

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
        from fastapi.staticfiles import StaticFiles

        app.mount("/static", StaticFiles(directory=STATIC), name="static")
