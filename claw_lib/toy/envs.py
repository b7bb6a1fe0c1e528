"""The factory at the top of ``toy/``: the environment a :class:`~claw_lib.config.TaskConfig` asks for (notebook 08).

It imports every kind of environment (the fact world's users, the joint personas, the tool chains, the real-world
questions); none of them imports it, so ``toy/`` has no import circle. What an environment is:
:mod:`claw_lib.toy.env`.
"""
from __future__ import annotations

from ..prompts import has_chat_template
from .chains import ChainEnv
from .real_tasks import RealTaskEnv, env_splits
from .users import FactEnv, JointEnv

__all__ = ["make_env"]


def make_env(task, seed: int, tokenizer=None, world=None, evaluation: bool = False):
    """The environment of a :class:`~claw_lib.config.TaskConfig` ``task``: a :class:`~claw_lib.toy.users.FactEnv` of the fact world
    (``task.world == "fact"``) or a :class:`~claw_lib.toy.real_tasks.RealTaskEnv` of the real-world questions
    ("real"; ``evaluation``: the questions ``task.eval_split`` names, :func:`~claw_lib.toy.real_tasks.env_splits`).
    tokenizer: passed on when it has a chat template; world: the first env's ``world`` to share it."""
    tok = tokenizer if has_chat_template(tokenizer) else None
    if task.world == "real":
        split, each_once = env_splits(task.eval_split, evaluation)
        return RealTaskEnv(world, user=task.user, split=split, misconception_share=task.misconception_share,
                           seed=seed, tokenizer=tok, p_vague=task.p_vague, form=task.prompt_form, each_once=each_once)
    if task.user == "joint":
        return JointEnv(world, misconception_share=task.misconception_share, seed=seed, tokenizer=tok,
                        p_vague=task.p_vague, form=task.prompt_form)
    if task.user == "tool-chain":
        return ChainEnv(world, misconception_share=task.misconception_share, seed=seed, tokenizer=tok,
                        form=task.prompt_form)
    return FactEnv(world, user=task.user, relations=task.relations, misconception_share=task.misconception_share,
                   seed=seed, tokenizer=tok, questions=task.questions, p_vague=task.p_vague, form=task.prompt_form)
