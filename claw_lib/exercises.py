"""Self-checks for the notebooks' exercises (notebooks 02, 03, 04, 05b, 06, 07, 08, 09): ``exercise("<name>")``
prints the task and the signature of the function to write; ``check("<name>", your_function)`` runs it on cases you
have not seen, compares it with the kit's own implementation, and says right, or shows the first case that differs;
from the second wrong try on it adds a hint (a nudge, not the answer). Nothing is graded or stored.

    >>> from claw_lib.exercises import check, reset
    >>> reset()
    >>> check("reward_to_go", lambda r, gamma: r)        # forgets the future rewards
    not yet: reward_to_go([0.5, -1.0, 0.5], gamma=1.0) gave [0.5, -1.0, 0.5], expected [0.0, -0.5, 0.5]. Look at that case and try again (a hint comes with the second wrong try).
    False

Each exercise (:data:`EXERCISES`) names the signature your function takes, a one-line task, the notebook that
teaches it, and the hint shown from the second wrong answer on.
"""
from __future__ import annotations

from typing import Callable, Dict, List, NamedTuple, Tuple

import numpy as np

from .alignment.dp import align
from .config import RewardConfig
from .rl.ablation import paired
from .text.tokens import Token, subtokens_to_words

__all__ = ["check", "exercise", "reset", "EXERCISES", "Exercise"]


class Exercise(NamedTuple):
    """signature: what your function takes and returns; notebook: where it is taught; hint: shown from the second
    wrong answer on; cases: () -> list of (args, kwargs); reference: the kit's own answer for (args, kwargs); task:
    the one-line task printed with the exercise."""

    signature: str
    notebook: str
    hint: str
    cases: Callable[[], List[Tuple[tuple, dict]]]
    reference: Callable
    task: str = ""


#: wrong tries per exercise since the last right answer (the hint comes with the second)
_WRONG: Dict[str, int] = {}


def _rng():
    return np.random.default_rng(1234)


def _dp_cases():
    g = _rng()
    return [((g.uniform(0, 1, (n, m)),), {"insert_cost": ins, "delete_cost": dele})
            for n, m, ins, dele in [(1, 1, 1.0, 1.0), (3, 4, 0.5, 0.5), (5, 2, 1.0, 0.3), (0, 3, 0.5, 0.5), (4, 4, 0.2, 0.9)]]


def _dp_reference(cost, insert_cost, delete_cost):
    return align(cost, insert_cost, delete_cost).total_cost


def _continuous_cases():
    return [((c,), {}) for c in (0.0, 0.1, 0.25, 0.3, 0.5, 0.75, 0.9, 1.6)]


def _continuous_reference(cost):
    rc = RewardConfig()
    return float(np.clip(rc.a - rc.b * cost, rc.lo, rc.hi))


def _opd_cases():
    g = _rng()
    return [((g.normal(-2, 1.5, n), g.normal(-2, 1.5, n)), {}) for n in (1, 4, 9)]


def _opd_reference(teacher_logprobs, student_logprobs):
    from .signals.opd import opd_advantages  # lazy: signals.opd imports torch: only the exercises that use it load it

    return opd_advantages(teacher_logprobs, student_logprobs)


def _whiten_cases():
    g = _rng()
    out = []
    for b, t in ((2, 3), (4, 6), (3, 5)):
        x = g.normal(0, 1, (b, t))
        mask = g.uniform(size=(b, t)) < 0.7
        mask[0, 0] = mask[0, 1] = True  # at least two tokens
        out.append(((x, mask), {}))
    return out


def _whiten_reference(rewards, mask):
    import torch  # lazy: only the exercises that use torch load it

    from .ops import masked_whiten  # lazy: ops imports torch

    r, m = torch.as_tensor(rewards, dtype=torch.float64), torch.as_tensor(mask)
    return (masked_whiten(r, m) * m).numpy()


def _rtg_cases():
    return [(([0.5, -1.0, 0.5],), {"gamma": 1.0}), (([0.5, 0.5, 0.5, 0.5, 0.5, 0.5, -1.0, -1.0, 0.5, 0.0],),
                                                    {"gamma": 0.5}), (([1.0],), {"gamma": 0.9}),
            (([0.0, 0.0, 1.0],), {"gamma": 0.0})]


def _rtg_reference(rewards, gamma):
    import torch  # lazy: only the exercises that use torch load it

    from .rl.core import reward_to_go  # lazy: rl.core imports torch

    r = torch.as_tensor(np.asarray(rewards, dtype=np.float64)).reshape(1, -1)
    return reward_to_go(r, torch.ones_like(r, dtype=torch.bool), gamma)[0].numpy()


def _evidence_cases():
    return [((["match", "replace", "match", "delete"], [False, True, False, False]), {}),
            ((["match", "match", "replace"], [False, False, False]), {}),
            ((["delete", "replace"], [True, True]), {}), ((["match"], [False]), {})]


def _evidence_reference(ops, contradicted):
    rc = RewardConfig()
    return [rc.match if op == "match" else (rc.reject if bad else rc.absent) for op, bad in zip(ops, contradicted)]


def _words_cases():
    g = _rng()
    return [((-np.abs(g.normal(2, 1, len(w))), w), {}) for w in ([0, 0, 1, 2, 2, 2], [0, 1, 1], [0], [0, 0, 0, 1])]


def _words_reference(subtoken_logprobs, word_of):
    word_of = [int(w) for w in word_of]
    words = [Token(str(w), w, w + 1) for w in range(max(word_of) + 1)]
    subs = [Token(str(w), w, w + 1) for w in word_of]
    return subtokens_to_words(subtoken_logprobs, words, subs, mode="sum")


def _paired_cases():
    return [(({0: 0.9, 1: 0.8, 2: 0.7, 3: 0.95}, {0: 0.6, 1: 0.8, 2: 0.5}), {}),
            (({0: 0.5, 1: 0.6}, {0: 0.4, 1: 0.6, 2: 0.1}), {}),
            (({k: 0.1 * k for k in range(10)}, {k: 0.05 * k + 0.2 for k in range(10)}), {})]


def _paired_reference(a, b):
    rows = [{"user": "u", "strategy": s, "seed": k, "final_score": v} for s, d in (("a", a), ("b", b))
            for k, v in d.items()]
    p = paired(rows, "u", "a", "b")
    return [p["mean"], p["se"]]


#: name -> the exercise
EXERCISES: Dict[str, Exercise] = {
    "dp_total_cost": Exercise(
        "f(cost (n, m) array, insert_cost, delete_cost) -> the minimal total cost of the alignment", "02",
        "a table D[i, j] = the cheapest way to align the first i output words with the first j correction words: "
        "the last move is a match / replace, a delete or an insert, and D[i, 0], D[0, j] are all deletes / inserts",
        _dp_cases, _dp_reference,
        "return the minimal total cost of aligning the output (rows) with the correction (columns) by dynamic "
        "programming, as align() does"),
    "continuous_reward": Exercise(
        "f(cost) -> the continuous reward of a substituted word", "04",
        "the formula is right in the middle of the range; what should a cost of 0 or of 0.9 give? RewardConfig has "
        "the bounds lo and hi",
        _continuous_cases, _continuous_reference,
        "return the reward a - b * cost of RewardConfig (a = 0.5, b = 2), kept inside its range"),
    "opd_advantage": Exercise(
        "f(teacher_logprobs (T,), student_logprobs (T,)) -> A (T,)", "06",
        "a token that the hinted teacher finds more likely than the student did should get a positive advantage: "
        "which log-prob comes first?",
        _opd_cases, _opd_reference,
        "return OPD's per-token advantage from the hinted teacher's and the student's log-probs of the student's tokens"),
    "masked_whiten": Exercise(
        "f(rewards (B, T), mask (B, T) bool) -> whitened rewards, 0 where the mask is False", "07",
        "the padding is not data: which entries may enter the mean and the standard deviation (with Bessel's "
        "correction), and what goes where the mask is False?",
        _whiten_cases, _whiten_reference,
        "return the rewards whitened over the real tokens of the batch (mean 0, std 1 over the mask), 0 elsewhere"),
    "reward_to_go": Exercise(
        "f(rewards (T,), gamma) -> G (T,), G_t = sum over k >= t of gamma^(k - t) r_k", "08",
        "start at the last token, whose return is its own reward, and walk backwards: each return is the token's "
        "reward plus gamma times the next return",
        _rtg_cases, _rtg_reference,
        "return each token's discounted sum of the rewards at and after it (the article's remedy for pitfall 4)"),
    "evidence_reward": Exercise(
        "f(ops list of 'match' / 'replace' / 'delete', contradicted list of bool) -> rewards list, one per output word",
        "03", "the kit charges a word only when the correction contradicts it: a replace or delete without that "
        "evidence is neither confirmed nor rejected (RewardConfig.absent)",
        _evidence_cases, _evidence_reference,
        "return the binary reward of each output word under the evidence rule: match -> RewardConfig.match, "
        "contradicted -> RewardConfig.reject, otherwise RewardConfig.absent"),
    "sum_to_words": Exercise(
        "f(subtoken_logprobs (n_sub,), word_of (n_sub,) int: the word each sub-token belongs to) -> (n_words,)",
        "05b", "a word's log-prob is the log of the product of its sub-tokens' probabilities: which operation on "
        "the log-probs is that?",
        _words_cases, _words_reference,
        "return each word's log-prob from its sub-tokens' log-probs, as the perplexity reward pools them"),
    "paired_difference": Exercise(
        "f(a dict seed -> score, b dict seed -> score) -> (mean, s.e.) of a - b",
        "09", "pair first: only the seeds both ran, the difference seed by seed; then the mean of those "
        "differences and their standard error (std with ddof 1, over sqrt n)",
        _paired_cases, _paired_reference,
        "return the paired difference a - b over the seeds both ran, its mean and standard error, as "
        "claw_lib.rl.ablation.paired does"),
}


def _show(x) -> str:
    if isinstance(x, dict):
        return "{" + ", ".join(f"{k}: {_show(v)}" for k, v in x.items()) + "}"
    if isinstance(x, (list, tuple)) and x and all(isinstance(v, (bool, np.bool_)) for v in x):
        return repr([bool(v) for v in x])
    try:
        a = np.asarray(x, dtype=float)
    except (TypeError, ValueError):  # words, op names: as written
        return repr(list(x)) if isinstance(x, (list, tuple)) else repr(x)
    return str(np.round(a, 3).tolist()) if a.ndim else f"{float(a):.3f}"


def _call_text(name: str, args: tuple, kwargs: dict) -> str:
    shown = [_show(a) for a in args] + [f"{k}={v}" for k, v in kwargs.items()]
    return f"{name}({', '.join(shown)})"


def exercise(name: str) -> None:
    """Print the exercise's task, the signature of the function to write and how to check it."""
    if name not in EXERCISES:
        raise ValueError(f"no exercise {name!r}; choose from {sorted(EXERCISES)}")
    ex = EXERCISES[name]
    print(f"exercise {name} (notebook {ex.notebook}): {ex.task}\n  write: {ex.signature}\n"
          f"  then: check({name!r}, your_function)")


def reset(name: str = None) -> None:
    """Forget the wrong tries (of ``name``, or of every exercise): the next wrong try shows no hint."""
    if name is None:
        _WRONG.clear()
    else:
        _WRONG.pop(name, None)


def check(name: str, fn: Callable, quiet: bool = False) -> bool:
    """Run ``fn`` on the exercise's cases and compare with the kit's answer (to 1e-6). Prints "right" or the first
    case that differs (unless ``quiet``), with the hint from the second wrong try on; returns whether every case
    agreed. A right answer forgets the wrong tries. An unknown name is a ValueError listing the exercises."""
    if name not in EXERCISES:
        raise ValueError(f"no exercise {name!r}; choose from {sorted(EXERCISES)}")
    ex = EXERCISES[name]
    for args, kwargs in ex.cases():
        want = np.asarray(ex.reference(*args, **kwargs), dtype=float)
        try:
            got = np.asarray(fn(*args, **kwargs), dtype=float)
            ok = got.shape == want.shape and np.allclose(got, want, atol=1e-6)
        except Exception as e:  # the learner's code failed: say how, never a traceback
            got, ok = f"{type(e).__name__}: {e}", False
        if not ok:
            _WRONG[name] = _WRONG.get(name, 0) + 1
            if not quiet:
                shown = got if isinstance(got, str) else _show(got)
                then = (f"Hint: {ex.hint} (notebook {ex.notebook})" if _WRONG[name] >= 2 else
                        "Look at that case and try again (a hint comes with the second wrong try).")
                print(f"not yet: {_call_text(name, args, kwargs)} gave {shown}, expected {_show(want)}. {then}")
            return False
    _WRONG.pop(name, None)
    if not quiet:
        print(f"right: {name} agrees with the kit on {len(ex.cases())} cases")
    return True
