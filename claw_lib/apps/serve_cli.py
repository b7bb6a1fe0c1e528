"""``claw serve`` and ``claw simulate``: the live system's commands (docs/serve.md, notebook 14).

The training options are the ones ``claw train`` takes, read from the same config tree (defaults, help and
ranges from :class:`~claw_lib.config.PPOConfig`); the serving options from
:class:`~claw_lib.serve.config.ServeConfig`.
"""
from __future__ import annotations

import argparse

from ..config import field_docs, override
from ..serve import homework_sim, simulate
from ..serve.config import CONTEXTS, SERVE_STRATEGIES, SERVING_FORMATS, ServeConfig, check_serve_config, default_ppo
from ..serve.server import serve_forever
from .flags import TRAIN_FLAGS, add_train_args, number

__all__ = ["add_serve_args", "cmd_serve", "add_simulate_args", "cmd_simulate", "serve_config"]

#: ``claw serve`` training options: flag -> the PPOConfig setting (a subset of ``claw train``'s)
SERVE_TRAIN_FLAGS = ("--model", "--strategy", "--seed", "--lr", "--batch-size", "--temperature", "--max-new-tokens",
                     "--device", "--dtype", "--lora-rank", "--lora-impl", "--w-rl-negative", "--opd-clip", "--threads",
                     "--micro-batch", "--hint-prompt", "--epochs")
#: ``claw serve`` serving options: flag -> ServeConfig field
SERVE_FLAGS = {"--judge": "judge", "--judge-model": "judge_model", "--context": "context", "--tis-cap": "tis_cap",
               "--session-timeout": "session_timeout_s", "--train-delay": "train_delay_s",
               "--max-message-chars": "max_message_chars", "--max-messages": "max_messages",
               "--max-tokens-limit": "max_tokens_limit", "--max-batch": "max_batch",
               "--serving-format": "serving_format", "--keep-versions": "keep_versions",
               "--publish-gate": "publish_gate", "--prefix-cache-tokens": "prefix_cache_tokens",
               "--anchor": "anchor", "--anchor-coef": "anchor_coef", "--anchor-steps": "anchor_steps"}


def add_serve_args(p: argparse.ArgumentParser) -> None:
    """The flags of ``claw serve`` (the ``claw`` parser registers the command: claw_lib.apps.cli.COMMANDS)."""
    tmp = argparse.ArgumentParser(add_help=False)
    add_train_args(tmp)  # the same flags, defaults and help as claw train; the subset below is kept
    for action in tmp._actions:
        if action.option_strings and action.option_strings[0] in SERVE_TRAIN_FLAGS:
            p._add_action(action)
    base = default_ppo()
    p.set_defaults(**{TRAIN_FLAGS["--strategy"]: base.strategy, TRAIN_FLAGS["--batch-size"]: base.batch_size})
    for action in p._actions:
        if action.dest == "strategy":
            action.choices = SERVE_STRATEGIES
            action.help = f"the training signal: one of {', '.join(SERVE_STRATEGIES)} (default: {base.strategy})"
        if action.dest == "batch_size":
            action.help = f"scored samples per update (default: {base.batch_size})"
    docs, d = field_docs(ServeConfig), ServeConfig()
    kinds = {"tis_cap": number(float, 0), "session_timeout_s": number(float, 0, lo_open=True),
             "train_delay_s": number(float, 0), "max_message_chars": number(int, 1, 1_000_000),
             "max_tokens_limit": number(int, 1, 100_000), "max_messages": number(int, 1, 100_000),
             "max_batch": number(int, 1, 1024), "keep_versions": number(int, 1, 1000),
             "prefix_cache_tokens": number(int, 0, 10_000_000), "anchor_coef": number(float, 0),
             "anchor_steps": number(int, 1, 100)}
    for flag, name in SERVE_FLAGS.items():
        p.add_argument(flag, dest=name, default=getattr(d, name), type=kinds.get(name, str),
                       choices={"context": CONTEXTS, "serving_format": SERVING_FORMATS}.get(name),
                       help=f"{docs.get(name, '')} (default: {getattr(d, name)!r})".replace("%", "%%"))
    p.add_argument("--no-train", action="store_true", help="serve and judge only, never update the weights")
    p.add_argument("--match-sessions", action="store_true",
                   help="a request without a session id whose last message is a user's or a tool's joins the session "
                        "whose transcript it extends, or starts a new one (default: it is a side turn, never trained; "
                        "docs/serve.md, 'Requests without a session id')")
    p.add_argument("--out", default=None, help="run folder for every record (turns, judge and OPD records, samples, "
                                               "metrics, checkpoint); the same command resumes it")
    p.add_argument("--force", action="store_true", help="start over in --out (only the files claw wrote there)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1, this machine only)")
    p.add_argument("--port", type=number(int, 0, 65535), default=8000, help="port (0: a free one; default 8000)")


def serve_config(a):
    """The ServeConfig of parsed ``claw serve`` arguments (checked: one-line ValueError naming the flag)."""
    paths = {TRAIN_FLAGS[f]: getattr(a, TRAIN_FLAGS[f]) for f in SERVE_TRAIN_FLAGS}
    ppo = override(default_ppo(), paths)
    cfg = ServeConfig(ppo=ppo, train=not a.no_train, match_sessions=a.match_sessions,
                      **{name: getattr(a, name) for name in SERVE_FLAGS.values()})
    try:
        return check_serve_config(cfg)
    except ValueError as e:
        msg = str(e)
        for flag in SERVE_TRAIN_FLAGS:
            if msg.startswith(TRAIN_FLAGS[flag] + " "):
                msg = flag + msg[len(TRAIN_FLAGS[flag]):]
        for flag, name in SERVE_FLAGS.items():
            if msg.startswith(name + " "):
                msg = flag + msg[len(name):]
        raise ValueError(msg) from None


def cmd_serve(a) -> int:
    """``claw serve``: the live system until Ctrl-C (:func:`claw_lib.serve.server.serve_forever`)."""
    if a.out is not None and not str(a.out).strip():
        raise ValueError("--out is empty; give a folder (or leave --out out: records stay in memory)")
    return serve_forever(serve_config(a), a.host, a.port, out=a.out, force=a.force)


def add_simulate_args(p: argparse.ArgumentParser) -> None:
    """The flags of ``claw simulate``: the simulated users drive a running server (claw_lib.serve.simulate)."""
    simulate.add_arguments(p)
    homework_sim.add_arguments(p)


def cmd_simulate(a) -> int:
    """``claw simulate``: the fact-world users (:func:`claw_lib.serve.simulate.run_from_args`) or, with
    ``--stream gsm8k``, the personal-agent stream (:func:`claw_lib.serve.homework_sim.run_from_args`)."""
    if a.stream == "gsm8k":
        return homework_sim.run_from_args(a)
    moved = [f for f, v in (("--split", a.split != "stream"), ("--gsm8k", a.gsm8k), ("--problems", a.problems),
                            ("--lang", a.lang != "en"), ("--concurrency", a.concurrency != 4),
                            ("--max-turns", a.max_turns != homework_sim.MAX_TURNS)) if v]
    if moved:
        raise ValueError(f"{', '.join(moved)} belong to --stream gsm8k; the fact-world users read none of them")
    return simulate.run_from_args(a)
