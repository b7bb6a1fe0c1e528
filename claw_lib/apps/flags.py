"""The command line's flags, taken from the config tree: every flag that changes a setting names its dotted
PPOConfig path, and its default, help (the field's docstring), choices (:data:`claw_lib.config.CHOICES`) and range
(:data:`claw_lib.config.LIMITS`) come from there, for every command (``claw train``, ``serve``, ``align``,
``rewards``, ``opd``). A new setting is one field, one ``LIMITS`` entry and one line in a table here.

Also the parser's one-line errors (:class:`CLIError`, :class:`Parser`) and the finite-number type
(:func:`number`). Building a parser imports no torch (``claw --help`` answers at once).
"""
from __future__ import annotations

import argparse
import math
import sys
from typing import Callable, Dict, Optional

from ..config import CHOICES, LIMITS, PER_MODEL, PPOConfig, field_docs, flatten

__all__ = ["CLIError", "Parser", "number", "TRAIN_FLAGS", "ALIGN_FLAGS", "REWARD_FLAGS", "OPD_FLAGS", "add_flags",
           "add_train_args", "flag_message", "setting_type"]


class CLIError(Exception):
    """A problem with what the user asked for: printed as one line, exit code 2."""


class Parser(argparse.ArgumentParser):
    """argparse with a one-line error ("claw train: argument --steps: ..."), no usage dump."""

    def error(self, message: str):
        print(f"{self.prog}: {message}", file=sys.stderr)
        raise SystemExit(2)


def number(kind: type, lo: Optional[float] = None, hi: Optional[float] = None, lo_open: bool = False,
           hi_open: bool = False) -> Callable:
    """An argparse type: a finite ``kind`` (int or float) in [lo, hi] (lo excluded with ``lo_open``, hi with
    ``hi_open``)."""
    def parse(text: str):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, got {text!r}")
        if not math.isfinite(v):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
        if lo is not None and (v < lo or (lo_open and v == lo)):
            raise argparse.ArgumentTypeError(f"must be {'>' if lo_open else '>='} {lo}, got {text}")
        if hi is not None and (v > hi or (hi_open and v == hi)):
            raise argparse.ArgumentTypeError(f"must be {'<' if hi_open else '<='} {hi}, got {text}")
        return v
    parse.__name__ = kind.__name__
    return parse


#: ``claw train`` options: flag -> the PPOConfig setting it changes (defaults and help come from there)
TRAIN_FLAGS = {
    "--strategy": "strategy", "--user": "task.user", "--questions": "task.questions",
    "--misconception-share": "task.misconception_share", "--p-vague": "task.p_vague",
    "--w-rl-negative": "opd.w_rl_negative", "--steps": "steps", "--seed": "seed", "--lr": "lr",
    "--batch-size": "batch_size", "--advantage": "advantage", "--subtokens": "subtokens", "--kl-coef": "loss.kl_coef",
    "--save-every": "save_every", "--model": "model", "--device": "device", "--temperature": "temperature",
    "--opd-clip": "opd.clip", "--loss-agg": "loss.loss_agg", "--eps-high": "loss.eps_high",
    "--opd-contrast": "opd.contrast", "--opd-skip-first": "opd.skip_first",
    "--teacher-temperature": "opd.teacher_temperature",
    "--dtype": "dtype", "--threads": "threads", "--max-new-tokens": "max_new_tokens", "--eval-size": "eval_prompts",
    "--eval-every": "eval_every", "--lora-rank": "lora_rank", "--task": "task.world", "--eval-split": "task.eval_split",
    "--chain-reward": "task.chain_reward",
    "--lora-impl": "lora_impl", "--judge": "opd.judge", "--judge-model": "opd.judge_model", "--judge-votes": "opd.m",
    "--hint-prompt": "opd.hint_prompt",
    "--distill": "loss.distill", "--reviser": "reward.reviser.model", "--localiser": "reward.localiser",
    "--micro-batch": "micro_batch", "--epochs": "epochs",
}
#: ``claw align`` and ``claw rewards``: the alignment's settings (``PPOConfig.reward.align``, an AlignConfig)
ALIGN_FLAGS = {
    "--encoder": "reward.align.encoder", "--layer": "reward.align.layer",
    "--lexical-weight": "reward.align.lexical_weight", "--insert-cost": "reward.align.insert_cost",
    "--delete-cost": "reward.align.delete_cost", "--threshold": "reward.align.match_threshold",
    "--max-chars": "reward.align.max_chars", "--max-words": "reward.align.max_words", "--device": "reward.align.device",
}
#: ``claw rewards``: the token rewards' settings beyond the alignment's (a RewardConfig)
REWARD_FLAGS = {"--judge-weight": "reward.judge_weight", "--reviser": "reward.reviser.model",
                "--reviser-model-name": "reward.reviser.remote_model", "--reviser-scope": "reward.reviser.scope",
                "--reviser-gate": "reward.reviser.gate", "--reviser-samples": "reward.reviser.samples",
                "--reviser-min-similarity": "reward.reviser.min_similarity", "--reviser-combine": "reward.reviser.combine",
                "--localiser": "reward.localiser"}
#: ``claw opd``: the policy (also the teacher) and the OPD signal's settings (an OPDConfig)
OPD_FLAGS = {"--model": "model", "--device": "device", "--dtype": "dtype", "--clip": "opd.clip",
             "--kappa": "opd.kappa", "--w-rl": "opd.w_rl", "--w-opd": "opd.w_opd"}
#: types of the settings whose default is None
_NONE_DEFAULT_TYPES = {"loss.loss_agg": str, "lr": float, "max_new_tokens": int, "eval_prompts": int, "lora_rank": int,
                       "micro_batch": int,
                       "reward.align.layer": int}


def _declaring_class(path: str):
    """The config dataclass that declares the setting ``path`` of PPOConfig, and the field's name."""
    obj = PPOConfig()
    *parents, name = path.split(".")
    for part in parents:
        obj = getattr(obj, part)
    return type(obj), name


def _kind(path: str, default, ranges: bool):
    """The argparse type of the setting ``path``: a finite number (with ``ranges``, in its :data:`LIMITS` range;
    an integer above an open bound ``lo`` is at least ``lo + 1``), or the kind of its default."""
    typ = type(default) if default is not None else _NONE_DEFAULT_TYPES.get(path, float)
    if typ not in (int, float):
        return typ
    if not ranges:
        return number(typ)
    lo, hi, lo_in, hi_in = LIMITS.get(path, (None, None, True, True))
    if typ is int and lo is not None and not lo_in:
        lo, lo_in = math.floor(lo) + 1, True
    return number(typ, lo, hi, lo_open=not lo_in, hi_open=not hi_in)


def setting_type(path: str) -> Callable:
    """The argparse type of the PPOConfig setting ``path`` with its :data:`LIMITS` range, for a flag that takes it in
    another shape (``claw reproduce --seeds 0 1 2``: several seeds, each in ``seed``'s range)."""
    return _kind(path, flatten(PPOConfig())[path], True)


def add_flags(p: argparse.ArgumentParser, flags: Dict[str, str], ranges: bool = True,
              help: Optional[Dict[str, str]] = None) -> None:
    """Add ``flags`` (flag -> dotted PPOConfig setting) to ``p``: dest the setting's path, default its PPOConfig
    default (None for the per-model settings), help its field docstring (or ``help[flag]``), choices from
    :data:`CHOICES`; with ``ranges``, a number outside its :data:`LIMITS` range is refused by the parser (without,
    by :func:`claw_lib.config.validate`, whose message :func:`flag_message` turns into the flag's)."""
    defaults = flatten(PPOConfig())
    for flag, path in flags.items():
        cls, name = _declaring_class(path)
        default = None if path in PER_MODEL else defaults[path]  # per model: resolved once the model is loaded
        doc = (help or {}).get(flag) or field_docs(cls).get(name, "")
        choices = tuple(c for c in CHOICES[path] if c is not None) if path in CHOICES else None
        p.add_argument(flag, dest=path, type=_kind(path, default, ranges), default=default, choices=choices,
                       metavar=None if choices else flag.lstrip("-").upper().replace("-", "_"),
                       help=f"{doc} (default: {'per model' if path in PER_MODEL else default})".replace("%", "%%"))


def add_train_args(p: argparse.ArgumentParser) -> None:
    """``claw train``'s settings (:data:`TRAIN_FLAGS`); ranges are checked by ``validate`` with the flag named."""
    add_flags(p, TRAIN_FLAGS, ranges=False)


def flag_message(msg: str, flags: Dict[str, str]) -> str:
    """A ``validate`` message that starts with a setting's path, starting with its flag instead."""
    for flag, path in sorted(flags.items(), key=lambda kv: -len(kv[1])):
        if msg.startswith(path + " "):
            return flag + msg[len(path):]
    return msg
