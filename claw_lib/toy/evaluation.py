"""How good is a policy in the toy world, and how good is its hinted teacher (notebooks 08-10)?

* :func:`evaluate_policy` -- the user's mean score of greedy answers to a fixed set of prompts
  (the ``eval/score`` of every training run);
* :func:`hinted_teacher_score` -- the same with each reply's hint in the context: what OPD and
  distillation pull the student towards, so it bounds what they can reach.

Both leave the user's random state as it was, so evaluating does not change a run.
"""
from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

import numpy as np

from ..models.lm import Generation, generate
from ..prompts import teacher_prompt
from ..signals.opd import judge_turn
from .env import evaluate
from .users import Feedback, Task

__all__ = ["greedy_feedback", "evaluate_policy", "evaluate_by_user", "hinted_teacher_score", "EVAL_MAX_NEW_TOKENS"]

#: longest greedy answer in evaluation, in tokens
EVAL_MAX_NEW_TOKENS = 40


def greedy_feedback(model, tok, env, tasks: Sequence[Task],
                    max_new_tokens: int = EVAL_MAX_NEW_TOKENS) -> Tuple[List[Generation], List[Feedback]]:
    """Greedy answers to ``tasks`` (at most ``max_new_tokens`` tokens each) and the user's feedback on each; the
    user's RNG is left as it was."""
    gens = generate(model, tok, [t.prompt for t in tasks], max_new_tokens=max_new_tokens, greedy=True) \
        if tasks else []
    users = getattr(env, "users", None) or [env.user]  # a JointEnv has several
    states = [u.rng.getstate() for u in users]
    fbs = [env.step(t, g.text.strip()) for t, g in zip(tasks, gens)]
    for u, state in zip(users, states):
        u.rng.setstate(state)
    return gens, fbs


def evaluate_policy(model, tok, env, tasks: Sequence[Task], max_new_tokens: int = EVAL_MAX_NEW_TOKENS) -> float:
    """Mean user score in [0, 1] of greedy answers to ``tasks`` (no state change in the user's RNG); for the steps
    of multi-step episodes (:class:`~claw_lib.toy.chains.ChainStep`), the share of episodes with every step right."""
    return evaluate_by_user(model, tok, env, tasks, max_new_tokens)["all"]


def evaluate_by_user(model, tok, env, tasks: Sequence[Task], max_new_tokens: int = EVAL_MAX_NEW_TOKENS) -> Dict[str, float]:
    """:func:`evaluate_policy` as {"all": score}, plus each persona's own mean score when the tasks come from a
    :class:`~claw_lib.toy.users.JointEnv` ({"all", "teacher", "student"}); one greedy pass."""
    scores = [f.score for f in greedy_feedback(model, tok, env, tasks, max_new_tokens)[1]]
    return evaluate(tasks, scores)  # the tasks' own answer: per persona, per episode (claw_lib.toy.env)


def hinted_teacher_score(model, tok, env, n: int = 40) -> Dict:
    """How good OPD's teacher is for ``env``'s user: the user's mean score of the model's greedy
    answers to ``n`` sampled questions ("base"), and of its greedy answers with each resulting hint
    in the teacher context ("teacher", over the ``n_hinted`` turns whose reply held a hint).

    OPD and distillation pull the student towards this teacher, so "teacher" bounds what they can
    reach (notebook 09b). The user's RNG is left as it was.
    """
    tasks = env.sample(n)
    gens, fbs = greedy_feedback(model, tok, env, tasks)
    hinted = [Task(t.fact, teacher_prompt(t.fact.question(), sig.hint, t.fact.lang, tokenizer=env.tokenizer,
                                          form=env.form))
              for t, g, fb in zip(tasks, gens, fbs) if (sig := judge_turn(g.text.strip(), fb.next_state, role=fb.role)).hint]
    _, t_fbs = greedy_feedback(model, tok, env, hinted)
    return {"n": n, "base": float(np.mean([f.score for f in fbs])), "n_hinted": len(hinted),
            "teacher": float(np.mean([f.score for f in t_fbs])) if t_fbs else float("nan")}
