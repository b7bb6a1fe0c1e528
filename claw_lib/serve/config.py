"""The live server's settings (``claw serve``; notebook 14).

One dataclass, nested like the rest of the kit: what training does is a :class:`~claw_lib.config.PPOConfig`
(``ppo``: strategy, model, learning rate, sampling temperature, the OPD and loss settings), the same tree
``claw train`` reads; the fields here say how the server runs it.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Optional

from ..config import PPOConfig, flatten, from_dict, judge_kind, validate
from ..rl.strategies import JUDGED_STRATEGIES, plan

__all__ = ["ServeConfig", "SERVE_STRATEGIES", "CONTEXTS", "SERVING_FORMATS", "check_serve_config", "default_ppo",
           "max_body_bytes"]

#: the strategies the live server trains: the ones whose signal comes from the next state alone
SERVE_STRATEGIES = JUDGED_STRATEGIES
#: what the policy reads of a conversation: "last" (the last user or tool message, in the kit's prompt form: the
#: tiny GPT was pre-trained on single turns), "all" (every message through the tokenizer's chat template), "auto"
#: ("all" when the tokenizer has a chat template, else "last")
CONTEXTS = ("auto", "last", "all")
#: the weights the server decodes from (:mod:`claw_lib.serve.serving_copy`): "full" (the trainer's precision),
#: "bf16" (a bfloat16 copy: a GPU's format), "int8" (int8 weights, dynamic quantisation: a CPU's fastest)
SERVING_FORMATS = ("full", "bf16", "int8")


def default_ppo() -> PPOConfig:
    return PPOConfig(strategy="combined", batch_size=4, progress=False)


@dataclass
class ServeConfig:
    """How ``claw serve`` serves, judges and trains (defaults: the tiny GPT on a laptop CPU)."""

    ppo: PPOConfig = field(default_factory=default_ppo)
    """the training settings (``ppo.batch_size``: scored samples per update; ``ppo.strategy``: one of
    SERVE_STRATEGIES; ``ppo.temperature``: the default sampling temperature of served answers)"""
    train: bool = True
    """run the trainer loop; False: serve and judge only (the baseline of benchmarks/bench_serve.py)"""
    judge: str = "rule"
    """the next-state judge: "rule" (the toy world's rule judge), a local instruct model (name or path), or an
    OpenAI-compatible URL (http://... serving /v1/chat/completions)"""
    judge_model: str = ""
    """the model name sent to a judge URL (empty: the first model its /v1/models lists)"""
    context: str = "auto"
    """what the policy reads of a conversation: one of CONTEXTS"""
    tis_cap: float = 2.0
    """truncated importance sampling: each token's weight is min(exp(log pi_old - log pi_serve), tis_cap), the
    correction for the serving weights' lag behind the trainer's (slime's TIS; 0 turns it off)"""
    session_timeout_s: float = 600.0
    """a session silent for longer than this gives no sample for its open turn"""
    max_message_chars: int = 4000
    """longest message accepted (HTTP 413 beyond)"""
    max_messages: int = 256
    """most messages one request may hold (HTTP 413 beyond); with ``max_message_chars`` it bounds a request's
    body (:func:`max_body_bytes`) and what one turn writes to ``turns.jsonl``"""
    max_tokens_limit: int = 256
    """largest ``max_tokens`` a request may ask for"""
    train_delay_s: float = 0.0
    """seconds the trainer waits after each update (0: none; for demonstrations of the lag)"""
    max_batch: int = 16
    """sequences decoded together at most (continuous batching, :mod:`claw_lib.serve.batcher`); 1 decodes one
    sequence at a time (the baseline of benchmarks/bench_serve_batching.py)"""
    prefix_cache_tokens: int = 8192
    """tokens of keys and values the serving engine keeps for the prompts that start with them (a repeated question,
    the next turn of a conversation; :mod:`claw_lib.serve.prefix_cache`), emptied at each weight swap; 0: off"""
    serving_format: str = "full"
    """the weights requests are decoded from: one of SERVING_FORMATS (rebuilt from the full-precision serving copy
    at each weight swap; the recorded rollout log-probs are this copy's)"""
    match_sessions: bool = False
    """a request without a session id that looks like a main-line turn joins the session whose transcript it
    extends, or starts a new one (:mod:`claw_lib.serve.matching`); False: it is a side turn, as upstream's rule says"""
    keep_versions: int = 3
    """published versions kept (with PEFT adapters: their folders OUT/adapters/v{N} and their names claw-v{N} in a
    request's model field, claw_lib.serve.versions); older ones are deleted"""
    publish_gate: str = ""
    """a JSONL probe set ({"prompt", "expected"} a line, claw_lib.serve.gate) scored before each publication: a
    candidate that scores worse than the live version is not published (empty: no gate)"""
    anchor: str = ""
    """a JSONL file of prompts (the publish gate's format, claw_lib.serve.anchoring) whose answers each update keeps
    near the initial model's: after each optimizer step, a gradient step on KL(initial || policy) over the initial
    model's greedy answers to them, halved until that KL does not rise (InstructGPT's PPO-ptx term applied as its
    own step, claw_lib.rl.anchor); empty: no anchor"""
    anchor_coef: float = 100.0
    """the anchor step's size in learning rates (w -= lr * anchor_coef * grad KL, then halved as needed; 0: no
    step; read only with an anchor file)"""
    anchor_steps: int = 1
    """anchor steps after each optimizer step, each searched on its own (read only with an anchor file)"""


def check_serve_config(cfg: ServeConfig) -> ServeConfig:
    """The library refuses what the command line refuses: a one-line ValueError naming the setting."""
    if cfg.ppo.strategy not in SERVE_STRATEGIES:
        raise ValueError(f"the live server trains strategy one of {SERVE_STRATEGIES}, got {cfg.ppo.strategy!r}")
    if cfg.ppo.opd.judge != "rule":
        raise ValueError(f"ppo.opd.judge is the training loops' judge; the live server reads its own judge setting "
                         f"(ServeConfig.judge, claw serve --judge), got ppo.opd.judge={cfg.ppo.opd.judge!r}")
    if cfg.context not in CONTEXTS:
        raise ValueError(f"context must be one of {CONTEXTS}, got {cfg.context!r}")
    if cfg.serving_format not in SERVING_FORMATS:
        raise ValueError(f"serving_format must be one of {SERVING_FORMATS}, got {cfg.serving_format!r}")
    # lazy: serve.serving_copy imports torch (claw --help reads this module)
    from .serving_copy import check_serving_format

    check_serving_format(cfg.serving_format, str(cfg.ppo.device))  # "auto" on a GPU is caught at load
    for name, lo in (("tis_cap", 0.0), ("session_timeout_s", 1e-3), ("train_delay_s", 0.0), ("anchor_coef", 0.0)):
        v = getattr(cfg, name)
        if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= lo):
            raise ValueError(f"{name} must be a finite number >= {lo:g}, got {v!r}")
    for name, lo, hi in (("max_message_chars", 1, 1_000_000), ("max_tokens_limit", 1, 100_000),
                         ("max_messages", 1, 100_000), ("max_batch", 1, 1024), ("keep_versions", 1, 1000),
                         ("prefix_cache_tokens", 0, 10_000_000), ("anchor_steps", 1, 100)):
        v = getattr(cfg, name)
        if not (isinstance(v, int) and lo <= v <= hi):
            raise ValueError(f"{name} must be an integer in [{lo}, {hi}], got {v!r}")
    if not isinstance(cfg.match_sessions, bool):
        raise ValueError(f"match_sessions must be true or false, got {cfg.match_sessions!r}")
    if cfg.publish_gate:
        from .gate import load_gate  # lazy: serve.config stays torch-free (claw --help, claw simulate)

        load_gate(cfg.publish_gate)
    if cfg.anchor:
        from .anchoring import load_anchor  # lazy: serve.config stays torch-free, as for the gate

        load_anchor(cfg.anchor)
    plan(cfg.ppo, "serve")  # what the server cannot supply (rl.strategies.DRIVERS): no user's score, reference, top-k
    # a judge URL that does not answer is refused when the system builds its judge, at the start (R4-10)
    if cfg.judge_model and judge_kind(cfg.judge, "judge") != "url":  # R4-16
        raise ValueError(f"judge_model names the model of a URL judge (--judge http://...); the judge here is "
                         f"{cfg.judge!r}, which does not read it")
    validate(cfg.ppo)
    return cfg


def serve_config_dict(cfg: ServeConfig) -> dict:
    """The settings as JSON (config.json of the run folder)."""
    return dataclasses.asdict(cfg)


def serve_config_from_dict(d: dict) -> ServeConfig:
    """The inverse of :func:`serve_config_dict` (unknown fields: TypeError)."""
    return ServeConfig(**{**d, "ppo": from_dict(d["ppo"])})


#: settings a resumed run may change (they do not change what is trained)
RESUMABLE = ("train_delay_s", "session_timeout_s", "max_tokens_limit", "max_message_chars", "max_messages",
             "max_batch", "prefix_cache_tokens", "serving_format", "match_sessions", "keep_versions", "publish_gate")


def max_body_bytes(cfg: ServeConfig) -> int:
    """The largest request body accepted (HTTP 413 beyond): every message at its longest, each character
    escaped as JSON's ``\\uXXXX\\uXXXX`` (12 bytes), plus 64 KiB for the rest of the body."""
    return cfg.max_messages * cfg.max_message_chars * 12 + 65536


def differing(saved: ServeConfig, new: ServeConfig) -> Optional[str]:
    """A one-line list of the settings in which two runs differ (the resumable ones aside), or None."""
    a = {**flatten(saved.ppo), **{k: v for k, v in serve_config_dict(saved).items() if k != "ppo"}}
    b = {**flatten(new.ppo), **{k: v for k, v in serve_config_dict(new).items() if k != "ppo"}}
    skip = set(RESUMABLE) | {"progress", "device", "steps", "micro_batch"}  # micro_batch: memory, not the update
    diff = [f"{k} {a.get(k)!r} (saved) vs {b[k]!r}" for k in b if k not in skip and a.get(k) != b[k]]
    return "; ".join(diff[:4]) if diff else None
