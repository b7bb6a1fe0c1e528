"""Reading the committed ablation results as notebooks 09a-09c do: readable names for the grids' settings, the tables
they print (means, until-stable, paired differences), one figure of paired differences, and the checks that hold a
reading's numbers to the results. The numbers themselves come from :mod:`claw_lib.rl.ablation`."""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import numpy as np

from .ablation import load_results, paired, summarise
from .grids import PAPER, PAPER_SETTINGS

__all__ = ["NAMES", "METHOD", "FOLDERS", "load_grids", "near", "paired_reads", "speed_reads", "stable_cell",
           "show_means", "show_pairs", "plot_pairs", "readable_setting"]

#: readable names for the grids' settings (:data:`claw_lib.rl.grids.SETTINGS` has the exact overrides)
NAMES = {"teacher": "teacher, dense hints", "teacher-vague": "teacher, sparse hints",
         "teacher-rl-pos": "teacher, dense hints, Combined without the -1 broadcast",
         "teacher-vague-rl-pos": "teacher, sparse hints, Combined without the -1 broadcast",
         "teacher-vague-token-mean": "teacher, sparse hints, old loss: mean over all tokens",
         "teacher-vague-clip2": "teacher, sparse hints, old OPD clip +-2",
         "student": "student, dense hints", "student-vague": "student, sparse hints", "tool": "tool user",
         "teacher-topk": "teacher, dense hints, top-K reverse KL",
         "teacher-vague-topk": "teacher, sparse hints, top-K reverse KL",
         "teacher-vague@trl": "teacher, sparse hints, TRL engine", "correcting": "correcting user, one-part questions",
         "correcting-pair": "correcting user, two-part questions",
         # the step-8 grid stores it as "teacher-sparse", sparser than "sparse hints": shown as teacher-vague90
         "teacher-sparse": "teacher, 9 in 10 vague (teacher-vague90)"}
#: readable names for the strategies the tables print
METHOD = {"binary_rl": "Binary RL", "opd": "OPD", "combined": "Combined", "opd_kl": "OPD distillation"}
#: the five grids most sections read, by name, relative to the repository's ``results/`` folder
FOLDERS = {"quick": ".", "table3": "table3", "extra": "table3_extra", "engines": "engines",
           "48 steps": "teacher_48_steps"}


def load_grids(results="../results") -> Tuple[Dict, Dict]:
    """``(R, S)`` for :data:`FOLDERS` under ``results``: R[name] = (rows, curves) as :func:`load_results` returns
    them, S[name] = :func:`summarise` of the rows ({(setting, strategy): means})."""
    R = {name: load_results(Path(results) / sub) for name, sub in FOLDERS.items()}
    return R, {name: summarise(rows) for name, (rows, _) in R.items()}


def near(x: float, v: float, tol: float = 0.005) -> bool:
    """``x`` printed rounded is ``v`` (``tol``: half the last printed digit)."""
    return abs(x - v) <= tol + 1e-9


def paired_reads(p: Dict, mean: float, se: float, counts: Tuple[int, int, int, int], within: bool) -> None:
    """Assert a paired difference (:func:`claw_lib.rl.ablation.paired`) as a reading states it: mean and standard
    error as printed (three decimals), ``counts`` = (better, tied, worse, seeds), and whether it lies within two
    standard errors of 0."""
    assert near(p["mean"], mean, 0.0005) and near(p["se"], se, 0.0005), (p, mean, se)
    assert (p["wins"], p["ties"], p["losses"], p["n"]) == counts, (p, counts)
    assert (abs(p["mean"]) <= 2 * p["se"]) == within, p


def speed_reads(p: Dict, mean: float, se: float, faster_tied_slower: Tuple[int, int, int], within: bool) -> None:
    """Assert a paired difference of the steps until stable (``paired(..., UNTIL_STABLE)``) as a reading states it:
    mean and s.e. in steps as printed (one decimal), the seeds on which a was faster / tied / slower (fewer steps is
    faster, so faster = the pair's losses), and whether it lies within two standard errors of 0."""
    assert near(p["mean"], mean, 0.05) and near(p["se"], se, 0.05), (p, mean, se)
    assert (p["losses"], p["ties"], p["wins"]) == faster_tied_slower, (p, faster_tied_slower)
    assert (abs(p["mean"]) <= 2 * p["se"]) == within, p


def stable_cell(v: Dict) -> str:
    """'13.2 (4/10)': the mean steps until stable over all seeds (never = the run length) and the seeds that got
    there, from one entry of :func:`summarise`."""
    return f"{v['until_stable']:.1f} ({v['stable']}/{v['n']})"


def show_means(summary: Dict, settings: Sequence[str], methods: Sequence[str], paper: bool = True) -> None:
    """Print, per setting and method, the base score, the score at step 8, the final score mean +- std over seeds
    and the steps until stable (:func:`stable_cell`), with the paper's Table 3 numbers (step 8 / step 16) only on
    the setting that stands for the paper's (PAPER_SETTINGS: the teacher user with sparse hints)."""
    print(f"{'setting':42s} {'method':17s} {'base':>5s} {'step 8':>7s} {'final':>13s} {'until stable':>13s}"
          + ("   paper: 8 / 16" if paper else ""))
    for setting in settings:
        for m in methods:
            if (setting, m) not in summary:
                continue
            v, p = summary[(setting, m)], PAPER.get(m) if setting in PAPER_SETTINGS else None
            print(f"{NAMES.get(setting, setting)[:42]:42s} {METHOD.get(m, m):17s} {v['base']:5.2f} {v['at_8']:7.2f} "
                  f"{v['final']:5.2f} +- {v['final_std']:.2f} {stable_cell(v):>13s}"
                  + (f"   {p[0]:.2f} / {p[1]:.2f}" if paper and p else ""))


def _method_label(x) -> str:
    return METHOD.get(x, x) if isinstance(x, str) else f"{METHOD.get(x[1], x[1])} [{x[0]}]"


def show_pairs(rows: List[Dict], comparisons: Sequence[tuple], key: str = "final_score") -> Dict:
    """Print and return the paired differences a - b over the seeds both ran, one per ``(setting, a, b)`` of
    ``comparisons`` (a, b: a strategy, or a (setting, strategy) pair); ``key`` is the per-seed value compared
    (a row field, or ``UNTIL_STABLE``). Returns {(setting, a, b): paired dict}, tuples for pairs."""
    out = {}
    for setting, a, b in comparisons:
        p = paired(rows, setting, a, b, key)
        la, lb = _method_label(a), _method_label(b)
        print(f"{NAMES.get(setting, setting)[:35]:35s} {la + ' - ' + lb:60s} {p['mean']:+.3f} +- {p['se']:.3f}  "
              f"better/tied/worse {p['wins']}/{p['ties']}/{p['losses']} of {p['n']}")
        out[(setting, a if isinstance(a, str) else tuple(a), b if isinstance(b, str) else tuple(b))] = p
    return out


def readable_setting(setting: str) -> str:
    """A figure label in the prose's names: 'teacher-vague-v2, x' -> 'teacher, sparse hints, v2 loss, x'."""
    head, _, tail = setting.partition(", ")
    for suffix, words in (("-v2-overlap", ", v2, overlap"), ("-v2-shortest", ", v2, shortest"), ("-v2", ", v2 loss")):
        if head.endswith(suffix) and head[:-len(suffix)] in NAMES:
            head = NAMES[head[:-len(suffix)]] + words
            break
    else:
        head = NAMES.get(head, head)
    return head + (", " + tail if tail else "")


def plot_pairs(P: Dict, title: str):
    """One figure of a section's paired differences (:func:`show_pairs`' dict): a row per a - b, the mean with a
    bar of +- 2 standard errors; a bar that crosses the dotted 0 is within two standard errors of a tie. Shows it
    with pyplot and returns the figure."""
    import matplotlib.pyplot as plt  # lazy: matplotlib loads only for a figure

    def name(x):
        return METHOD.get(x, x) if isinstance(x, str) else f"{METHOD.get(x[1], x[1])} [{readable_setting(x[0])}]"

    keys = list(P)
    labels = [f"{readable_setting(setting)}: {name(a)} - {name(b)}" for setting, a, b in keys]
    means, ses = np.array([P[k]["mean"] for k in keys]), np.array([P[k]["se"] for k in keys])
    fig, ax = plt.subplots(figsize=(9, 0.4 * len(keys) + 1.2))
    y = np.arange(len(keys))[::-1]
    ax.errorbar(means, y, xerr=2 * ses, fmt="o", capsize=3)
    ax.axvline(0, color="grey", linestyle=":")
    ax.set_yticks(y, labels, fontsize=8)
    ax.set_xlabel("paired difference (final score unless the row says), +- 2 s.e. / 配对差值（±2 标准误）")
    ax.set_title(title)
    plt.tight_layout()
    plt.show()
    return fig
