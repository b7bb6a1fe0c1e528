"""A scripted judge behind a real OpenAI-compatible HTTP endpoint (FastAPI on uvicorn, a free localhost port), for
tests of ``claw train --judge URL`` and the live server's ``--judge URL``.

``reply(messages) -> text`` writes each completion; the default reads the judge prompt as OpenClaw-RL's judges do,
with a rule in place of a model: a next state with a correction marker is \\boxed{-1} and, for the hint prompt, the
next state itself becomes the hint (\\boxed{1}); anything else is \\boxed{1} / \\boxed{-1} without a hint. ``n``
choices per request, as the API says; ``requests`` keeps every request body, ``models_asked`` counts ``GET /v1/models``.
"""
import threading
import time
from typing import Callable, List, Optional

#: what the default script reads as a correction in the next state
CORRECTION_MARKERS = ("不对", "No,", "not ", "请", "Please", "应该", "should")


def next_state_of(messages: List[dict]) -> str:
    """The next state inside a judge prompt (the text after its "## Next state" heading, before the closing line)."""
    user = messages[-1]["content"]
    text = user.split("## Next state", 1)[1].split("\n", 1)[1]
    return text.rsplit("\n\n", 1)[0].strip()


def rule_reply(messages: List[dict]) -> str:
    """The default script: a correction -> -1 and the next state as the hint; otherwise +1 and no hint."""
    hint_prompt = "HINT_START" in messages[0]["content"]
    state = next_state_of(messages)
    corrected = any(m in state for m in CORRECTION_MARKERS)
    if hint_prompt:
        return f"[HINT_START]{state}[HINT_END] \\boxed{{1}}" if corrected else "nothing to learn \\boxed{-1}"
    return "a correction: \\boxed{-1}" if corrected else "progress: \\boxed{1}"


class ScriptedJudge:
    """Use as ``with ScriptedJudge() as url: ...``; ``url`` is ``http://127.0.0.1:PORT``. logprobs: ``messages ->`` the
    choice's ``logprobs`` object (None: none), for clients that read the first token's top log-probs (the reviser's
    gate, tests/signals/test_reviser.py)."""

    def __init__(self, reply: Optional[Callable[[List[dict]], str]] = None,
                 logprobs: Optional[Callable[[List[dict]], Optional[dict]]] = None):
        import uvicorn
        from fastapi import FastAPI

        app, self.requests, self.reply, self.models_asked = FastAPI(), [], reply or rule_reply, 0
        self.logprobs = logprobs or (lambda messages: None)

        @app.get("/v1/models")
        async def models():
            self.models_asked += 1
            return {"object": "list", "data": [{"id": "scripted-judge", "object": "model", "owned_by": "tests"}]}

        @app.post("/v1/chat/completions")
        async def chat(body: dict):
            self.requests.append(body)
            return {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                    "choices": [{"index": k, "message": {"role": "assistant", "content": self.reply(body["messages"])},
                                 "finish_reason": "stop", "logprobs": self.logprobs(body["messages"])}
                                for k in range(body.get("n", 1))]}

        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        while not self.server.started:
            time.sleep(0.02)
        return f"http://127.0.0.1:{self.server.servers[0].sockets[0].getsockname()[1]}"

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(10)
