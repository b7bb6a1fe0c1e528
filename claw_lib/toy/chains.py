"""A multi-step tool task: several lookups for one report, one outcome (notebook 09c section 1).

OpenClaw-RL's long-horizon tracks (tool calls, terminal, GUI, SWE) give a trajectory of several actions one
outcome reward, and add a **process reward**: a judge (the PRM) votes on each action's next state, and the step's
reward is its vote plus the outcome (upstream ``toolcall-rl/generate_with_retool.py``: R_j = p_j + o; the digest's
"integrated reward" lifts tool-call accuracy from 0.17 to 0.30). The kit's version, scaled down to the fact world:

* an **episode** asks for a report on one country that needs 2 to 4 lookups of the tool (:mod:`claw_lib.toy.tools`),
  one relation each, in a fixed order (:class:`ToolChain`); every step is one call, and its next state is the tool's
  output: a result, or an error (a planted wrong name, a malformed call) that names what went wrong;
* the **outcome** o is +1 when every call of the episode returned the fact it asked for, else -1;
* the **process vote** p_j is the rule judge's vote on step j's next state (+1 a result, -1 an error; a call that
  works but looks up another relation or country is progress for the judge, p_j = +1, and wrong for the outcome);
* ``TaskConfig.chain_reward``: "outcome" gives every step R_j = o; "outcome+prm" gives R_j = o + p_j
  (:func:`chain_rewards`). Both go into the clipped surrogate as Binary RL's broadcast (``strategy="binary_rl"``).

What is scaled down, and says so: the tiny GPT was pre-trained on single calls, not on transcripts (with earlier
calls and outputs in its prompt it copies pieces of them: notebook 09c shows it), so each step's prompt holds its own
question only. The steps depend on each other through the outcome (a report is right only if every lookup is), not
through the context; the steps of all episodes are sampled in one batch. Upstream also z-scores R_j per (task, step)
over 8 rollouts of a task; the kit samples one rollout per task and uses R_j as it is.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import List, Sequence, Tuple

import numpy as np

from ..config import CHAIN_REWARDS
from ..prompts import build_prompt
from .tools import TOOL_ALIASES, ToolFact
from .users import FactEnv, Task
from .world import RELATIONS, Fact

__all__ = ["ToolChain", "ChainStep", "ChainEnv", "chain_rewards", "episode_outcomes", "episode_success", "CHAIN_REWARDS", "CHAIN_LENGTHS"]

#: how many lookups an episode needs (drawn uniformly)
CHAIN_LENGTHS = (2, 3, 4)


@dataclass(frozen=True)
class ToolChain:
    """One episode: the lookups (one :class:`~claw_lib.toy.tools.ToolFact` per step, one country) a report needs."""

    steps: Tuple[ToolFact, ...]

    def __post_init__(self):
        if not 1 <= len(self.steps) <= len(RELATIONS) or len({s.subject for s in self.steps}) != 1:
            raise ValueError(f"a chain has 1 to {len(RELATIONS)} lookups about one country, got {len(self.steps)} "
                             f"about {sorted({s.subject for s in self.steps})}")


@dataclass
class ChainStep(Task):
    """A step of an episode: its task (the step's tool question), the episode's index in the batch and the step's."""

    episode: int = 0
    index: int = 0

    @classmethod
    def evaluate(cls, tasks, scores):
        """{"all": the share of episodes with every step right}."""
        return {"all": episode_success(tasks, scores)}

    @classmethod
    def step_rewards(cls, tasks, scores, votes, how):
        """Each step's reward: its episode's outcome plus (``how`` "outcome+prm") the judge's vote on its next state."""
        return chain_rewards(episode_outcomes(tasks, scores), votes, how)


class ChainEnv(FactEnv):
    """Episodes of 2-4 lookups about one country (:data:`CHAIN_LENGTHS`); ``sample(n)`` returns the steps of ``n``
    episodes, flattened in order (so a batch of n episodes has about 3n samples). A share ``misconception_share``
    of the episodes is about a country the tiny GPT calls by a planted wrong name (:data:`TOOL_ALIASES`)."""

    def __init__(self, world=None, misconception_share: float = 0.5, seed: int = 0, tokenizer=None, form: str = "kit",
                 langs=("zh", "en")):
        super().__init__(world, user="tool", relations=tuple(RELATIONS), langs=langs,
                         misconception_share=misconception_share, seed=seed, tokenizer=tokenizer, form=form)
        self.countries_mis = [c for c in self.world.known if c.zh in TOOL_ALIASES]
        self.countries = list(self.world.known)

    def episode(self) -> ToolChain:
        """One episode drawn with the env's random state."""
        rng: random.Random = self.rng
        country = rng.choice(self.countries_mis if rng.random() < self.misconception_share else self.countries)
        lang = rng.choice(self.langs)
        relations = rng.sample(list(RELATIONS), rng.choice(CHAIN_LENGTHS))
        return ToolChain(tuple(ToolFact(Fact(country, r, lang)) for r in relations))

    def sample(self, n: int) -> List[ChainStep]:
        out: List[ChainStep] = []
        for e in range(n):
            for j, step in enumerate(self.episode().steps):
                out.append(ChainStep(step, build_prompt(step.question(), step.lang, tokenizer=self.tokenizer,
                                                        form=self.form), self.form, e, j))
        return out


def episode_outcomes(tasks: Sequence[ChainStep], scores: Sequence[float]) -> np.ndarray:
    """The outcome of each step's episode, per step (shape (n_steps,)): +1 when every step of the episode scored 1
    (the call returned the fact asked for), else -1."""
    if len(tasks) != len(scores):
        raise ValueError(f"{len(tasks)} steps but {len(scores)} scores")
    right: dict = {}
    for t, s in zip(tasks, scores):
        right[t.episode] = right.get(t.episode, True) and s == 1.0
    return np.array([1.0 if right[t.episode] else -1.0 for t in tasks])


def chain_rewards(outcomes: Sequence[float], votes: Sequence[int], how: str = "outcome+prm") -> np.ndarray:
    """Each step's reward R_j (shape (n_steps,)): the episode's outcome o (+1 / -1) for ``how="outcome"``; o plus the
    judge's vote p_j on the step's next state (+1 / -1, 0 without a valid vote) for "outcome+prm" (upstream's
    R_j = p_j + o, in [-2, 2]). An episode that failed still gives 0 to a step whose call worked."""
    if how not in CHAIN_REWARDS:
        raise ValueError(f"chain_reward must be one of {CHAIN_REWARDS}, got {how!r}")
    o = np.asarray(outcomes, dtype=float)
    if how == "outcome":
        return o
    p = np.asarray(votes, dtype=float)
    if p.shape != o.shape:
        raise ValueError(f"{len(o)} outcomes but {len(p)} votes")
    return o + p


def episode_success(tasks: Sequence[ChainStep], scores: Sequence[float]) -> float:
    """The share of episodes in ``tasks`` whose every step scored 1 (each episode counts once, whatever its length);
    NaN when there is no episode, as the kit's other empty means (K01: it was 0.0, a score no run had)."""
    o = episode_outcomes(tasks, scores)
    first = {}
    for t, v in zip(tasks, o):
        first.setdefault(t.episode, v)
    return float(np.mean([v > 0 for v in first.values()])) if first else float("nan")
