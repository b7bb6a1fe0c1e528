"""What an environment is (the bottom of ``toy/``; notebooks 05a and 08): a task, the feedback on a response, the
:class:`Env` protocol the loop and the evaluation drive, and the two questions they ask of a batch of tasks.

* :class:`Task` (a question: its fact, prompt and prompt form; the stages read its ``question``, ``lang`` and
  ``teacher_prompt(hint, tokenizer)``, :class:`~claw_lib.rl.driver.TaskView`) and :class:`Feedback` (the next state and its score);
* :class:`Env`: ``reset(seed)``, ``sample(n)`` tasks, ``step(task, response)`` -> :class:`Feedback`, and the
  ``users`` whose random state the evaluation leaves as it found it;
* :func:`evaluate` (the evaluation's score of a batch, and each persona's own where the tasks have several) and
  :func:`step_rewards` (a reward per step where one episode spans several tasks, else None): each task class
  answers both for its batch (``Task.evaluate``, ``Task.step_rewards``), so neither the loop nor the evaluation
  asks which kind of environment it holds. The factory that builds an environment from a config
  (:func:`claw_lib.toy.envs.make_env`) sits at the top of ``toy/``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Protocol, Sequence

import numpy as np

from ..prompts import teacher_prompt

__all__ = ["Feedback", "Task", "Env", "evaluate", "step_rewards"]


@dataclass
class Feedback:
    """next_state: the user's reply or the tool's output (what OpenClaw-RL calls s_{t+1}); score in
    [0, 1]; kind: "thanks", "correction", "vague", "style", "tool_result" or "tool_error"; checks: the
    named checks behind the score; role: who wrote the next state, "user" or "tool"."""

    next_state: str
    score: float
    kind: str
    checks: dict = field(default_factory=dict)
    role: str = "user"


@dataclass
class Task:
    """One question for the policy: the fact, the prompt text it is asked with, and that prompt's
    surface form (:data:`claw_lib.prompts.PROMPT_FORMS`; the teacher's prompt uses the same)."""

    fact: object
    prompt: str
    form: str = "kit"

    @property
    def question(self) -> str:
        """The question inside the prompt (the fact's, in the fact's language)."""
        return self.fact.question()

    @property
    def lang(self) -> str:
        """The question's language ("zh" or "en")."""
        return self.fact.lang

    def teacher_prompt(self, hint: str, tokenizer) -> str:
        """The hinted teacher's prompt: the question with the hint, in this prompt's form
        (:func:`~claw_lib.prompts.teacher_prompt`; the stages read it through :class:`~claw_lib.rl.driver.TaskView`)."""
        return teacher_prompt(self.fact.question(), hint, self.fact.lang, tokenizer=tokenizer, form=self.form)

    @classmethod
    def evaluate(cls, tasks: Sequence["Task"], scores: Sequence[float]) -> Dict[str, float]:
        """The evaluation's score of a batch of these tasks: {"all": the mean score}."""
        return {"all": float(np.mean(scores))}

    @classmethod
    def step_rewards(cls, tasks: Sequence["Task"], scores: Sequence[float], votes: Sequence[int],
                     how: str) -> Optional[np.ndarray]:
        """A reward per task where an episode spans several tasks (``how``: ``task.chain_reward``); None: each task
        is its own episode and the strategy's signal is used as it is."""
        return None


class Env(Protocol):
    """What the loop (:mod:`claw_lib.rl.run`) and the evaluation (:mod:`claw_lib.toy.evaluation`) drive."""

    users: List[object]
    """the simulated users answering (their ``rng`` is saved and restored around an evaluation)"""

    def reset(self, seed: int) -> None:
        """Re-seed the sampling of tasks (the loop: once per step)."""

    def sample(self, n: int) -> List[Task]:
        """``n`` tasks."""

    def step(self, task: Task, response: str) -> Feedback:
        """The next state of ``response`` to ``task`` and its score."""


def evaluate(tasks: Sequence[Task], scores: Sequence[float]) -> Dict[str, float]:
    """The evaluation's scores of a batch ({"all": ..., and one per persona where the tasks have several}), as the
    batch's task class answers it (:meth:`Task.evaluate`)."""
    ask = getattr(type(tasks[0]), "evaluate", None) if tasks else None
    return ask(tasks, scores) if ask is not None else {"all": float(np.mean(scores))}


def step_rewards(tasks: Sequence[Task], scores: Sequence[float], votes: Sequence[int],
                 how: str) -> Optional[np.ndarray]:
    """Each task's reward where an episode spans several tasks, as the batch's task class answers it
    (:meth:`Task.step_rewards`); None for any other batch."""
    ask = getattr(type(tasks[0]), "step_rewards", None) if tasks else None
    return ask(tasks, scores, votes, how) if ask is not None else None
