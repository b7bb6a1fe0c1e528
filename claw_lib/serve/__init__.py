"""The live system (notebook 14, docs/serve.md): a model that learns while it serves.

``claw serve`` answers OpenAI-compatible chat requests with the policy and, in background loops, turns each
session's next message into a judged sample and batches of samples into updates whose weights are swapped
into the server (:mod:`claw_lib.serve.system`). ``claw simulate`` drives it with the simulated users.

Modules: config (ServeConfig), sessions (the next-state rule), matching (requests without a session id),
records (append-only JSONL), engine (the
serving / trainer / teacher copies), system (the shared state and serving), loops (judge and trainer),
resume (commit points and restart), app / routes (HTTP), server
(LiveServer, serve_forever), simulate (the simulated users through the openai client). The judge, a URL judge
included, comes from the kit's one judge factory (:func:`claw_lib.signals.judges.make_judge`).
"""
from .config import SERVE_STRATEGIES, ServeConfig
from .server import LiveServer, serve_forever

__all__ = ["ServeConfig", "LiveServer", "serve_forever", "SERVE_STRATEGIES"]
