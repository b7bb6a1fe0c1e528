"""The ablation's results: a grid's table next to the paper's, paired comparisons, the speed measure and
learning curves with error bands (notebooks 09a-09c; :mod:`claw_lib.rl.ablation_view` prints their tables). The settings and grids are in :mod:`claw_lib.rl.grids`; the runner
that trains a grid (``claw reproduce``, which may start the TRL engine) is :func:`claw_lib.apps.grid.reproduce`."""
from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..utils import MARKER, atomic_write
from .grid_notes import grid_limits
from .grids import ORDERING, PAPER, PAPER_SETTINGS, STRATEGIES
from .strategies import JUDGED_STRATEGIES

__all__ = ["summarise", "plot_curves", "markdown_table", "steps_to_target", "paired",
           "ordering_report", "engine_report", "load_results", "steps_to_stable", "report_text",
           "rewrite_report", "until_stable", "speed_report", "plot_until_stable", "UNTIL_STABLE"]

#: "holds k times in a row": the number of consecutive evaluations of :func:`steps_to_stable`
STABLE_K = 3
#: the batch size of the grids written before the ``batch_size`` column existed (every committed grid used 16)
LEGACY_BATCH = 16

def steps_to_target(curve: Sequence[tuple], target: float) -> Optional[int]:
    """First step whose eval score reaches ``target`` (None if never). curve: [(step, score)]."""
    for s, v in curve:
        if v >= target:
            return s
    return None


def steps_to_stable(curve: Sequence[tuple], target: float, k: int = STABLE_K) -> Optional[int]:
    """First evaluation step from which the eval score stays at or above ``target`` for ``k`` evaluations in a row
    (that step and the next k - 1; None if never): "until the preference holds k times in a row", the measure of
    the OpenClaw-RL digest (36 interactions for the student, 24 for the teacher) and of the paper's second version
    (sessions until a preference holds three times in a row). curve: [(step, score)], evaluations in order."""
    for n in range(len(curve) - k + 1):
        if all(v >= target for _, v in curve[n:n + k]):
            return curve[n][0]
    return None


#: the one speed measure of every table, figure and reading (``paired(..., key=UNTIL_STABLE)``, :func:`until_stable`)
UNTIL_STABLE = "until_stable"


def until_stable(row: Dict) -> int:
    """The kit's one speed measure for a run (a row of ``ablation.csv``): the steps until the eval score holds the
    target :data:`STABLE_K` evaluations in a row (:func:`steps_to_stable`), a run that never gets there counted at
    the run's length ``row["steps"]``, so a lower bound for it (the live system counts sessions the same way:
    :func:`claw_lib.serve.simulate.counted_sessions`). Always read next to the share of seeds that got there:
    a mean over only those seeds favours the method that rarely gets there (its few lucky seeds), and reversed two
    orderings notebooks 09a and 09c once displayed.

    >>> until_stable({"steps_to_stable": 6, "steps": 16}), until_stable({"steps_to_stable": None, "steps": 16})
    (6, 16)
    """
    return int(row["steps"]) if row.get("steps_to_stable") is None else int(row["steps_to_stable"])


def load_results(folder) -> Tuple[List[Dict], Dict]:
    """Read what :func:`claw_lib.apps.grid.reproduce` wrote: (rows of ``ablation.csv`` with numbers parsed, curves). A missing file
    is FileNotFoundError, a table with a missing column or a value that is not a number, or curves that are
    not a grid's, ValueError: one line naming the file (TL05, TL06)."""
    folder = Path(folder)
    for name in ("ablation.csv", "curves.json"):
        if not (folder / name).is_file():
            raise FileNotFoundError(f"no {name} in {folder}: run `claw reproduce --out {folder}` first")
    try:
        return _parse_results(folder)
    except KeyError as e:
        raise ValueError(f"{folder}/ablation.csv or curves.json is not a grid's: {e} is missing") from None
    except (ValueError, TypeError, AttributeError) as e:
        raise ValueError(f"{folder}/ablation.csv or curves.json is not a grid's ({str(e).splitlines()[0]})") from None


def _parse_results(folder: Path) -> Tuple[List[Dict], Dict]:
    with open(folder / "ablation.csv") as f:
        rows = [dict(r) for r in csv.DictReader(f)]
    for r in rows:
        r.setdefault("engine", "kit")  # results written before the TRL engine existed
        for k in ("seed", "steps", "rollout_tokens"):
            r[k] = int(r[k])
        for k in ("base_score", "score_at_8", "final_score", "best_score", "target", "wall_s", "rollout_s", "score_s",
                  "update_s"):
            r[k] = float(r[k])
        r["steps_to_target"] = int(r["steps_to_target"]) if r["steps_to_target"] not in ("", "None") else None
    curves = {k: [tuple(p) for p in v] for k, v in json.loads((folder / "curves.json").read_text()).items()}
    for r in rows:  # grids written before these columns: the same numbers, from the committed curves
        r["batch_size"] = int(r.get("batch_size") or LEGACY_BATCH)
        if r.get("steps_to_stable") in (None, "", "None"):
            r["steps_to_stable"] = steps_to_stable(curves[f"{r['user']}/{r['strategy']}/{r['seed']}"], r["target"])
        else:
            r["steps_to_stable"] = int(r["steps_to_stable"])
    return rows, curves


def _nanmean(xs) -> float:
    """Mean over the values that are not NaN (NaN, without a warning, when there are none)."""
    xs = np.asarray(xs, float)
    return float(xs[~np.isnan(xs)].mean()) if (~np.isnan(xs)).any() else float("nan")


def _mean_known(xs) -> Optional[float]:
    """Mean over the values that are not None (the seeds that got there); None when none did."""
    known = [x for x in xs if x is not None]
    return float(np.mean(known)) if known else None


def summarise(rows: List[Dict]) -> Dict:
    """(user, strategy) -> mean and std over seeds of base, step-8 and final scores; the speed measure
    (:func:`until_stable`): ``until_stable`` its mean over the seeds (never = the run length), ``until_stable_se`` the
    standard error of that mean (std ddof 1 / sqrt n; 0 for one seed), ``stable`` the seeds that got there and
    ``n`` the seeds; ``steps_to_target`` (the first evaluation at the target, mean over the seeds that reached it)
    and ``reached`` (seeds that reached it once) are kept for code that reads them, and shown by no table."""
    out = {}
    for key in sorted({(r["user"], r["strategy"]) for r in rows}):
        rs = [r for r in rows if (r["user"], r["strategy"]) == key]
        stt = [r["steps_to_target"] for r in rs]
        us = np.array([until_stable(r) for r in rs], float) if all("steps" in r for r in rs) else None
        out[key] = {
            "base": float(np.mean([r["base_score"] for r in rs])),
            "at_8": _nanmean([r["score_at_8"] for r in rs]),
            "final": float(np.mean([r["final_score"] for r in rs])),
            "final_std": float(np.std([r["final_score"] for r in rs])),
            "steps_to_target": _mean_known(stt),
            "reached": sum(s is not None for s in stt), "n": len(rs),
            "until_stable": None if us is None else float(us.mean()),
            "until_stable_se": None if us is None else (float(us.std(ddof=1) / np.sqrt(len(us))) if len(us) > 1 else 0.0),
            "stable": sum(r.get("steps_to_stable") is not None for r in rs),
            "steps": None if us is None else max(int(r["steps"]) for r in rs),
        }
    return out


def _stable_cell(v: Dict) -> str:
    """"12.4 +- 1.1 (3/10)": the mean steps until stable (never = the run length) +- s.e., and the seeds that got
    there."""
    if v["until_stable"] is None:
        return "-"
    return f"{v['until_stable']:.1f} +- {v['until_stable_se']:.1f} ({v['stable']}/{v['n']})"


def markdown_table(rows: List[Dict]) -> str:
    """Mean +- std over seeds per user and strategy; the one speed measure, steps until the target holds
    :data:`STABLE_K` evaluations in a row with a seed that never gets there counted at the run length
    (:func:`until_stable`; mean +- s.e. and the seeds that got there); the paper's numbers only on the setting
    that stands for the paper's Table 3 (:data:`~claw_lib.rl.grids.PAPER_SETTINGS`)."""
    s = summarise(rows)
    lines = ["| user | strategy | base | after 8 steps | final | "
             f"steps until it holds {STABLE_K} evaluations in a row, never = run length (reached/seeds) | "
             "paper: after 8 / 16 |",
             "|---|---|---|---|---|---|---|"]
    for (user, strat), v in s.items():
        p = PAPER.get(strat) if user in PAPER_SETTINGS else None
        lines.append(f"| {user} | {strat} | {v['base']:.2f} | {v['at_8']:.2f} | {v['final']:.2f} +- {v['final_std']:.2f} | "
                     f"{_stable_cell(v)} | {'' if p is None else f'{p[0]:.2f} / {p[1]:.2f}'} |")
    return "\n".join(lines)


def report_text(rows: List[Dict], name: Optional[str] = None) -> str:
    """The text of a grid's ``ablation.md``: the table, then the paired orderings and engine comparisons, then what
    it does not establish and its dated corrections (:func:`claw_lib.rl.grid_notes.grid_limits`; ``name``: the
    results folder's name, e.g. "table3")."""
    report = "\n\n".join(r for r in (ordering_report(rows), speed_report(rows), engine_report(rows)) if r)
    return markdown_table(rows) + "\n" + (f"\n{report}\n" if report else "") + "\n" + grid_limits(rows, name) + "\n"


def _kit_report(folder: Path) -> bool:
    """Whether ``folder/ablation.md`` is the kit's own report (or absent): listed by the folder's claw marker, or,
    in a grid written before markers existed (no marker), a file that starts with the kit's table header."""
    f = folder / "ablation.md"
    if not f.exists() and not f.is_symlink():
        return True
    if (folder / MARKER).exists():
        try:
            return "ablation.md" in json.loads((folder / MARKER).read_text(encoding="utf-8"))["files"]
        except (OSError, ValueError, KeyError, TypeError):
            return False
    try:
        with open(f, encoding="utf-8") as fh:
            return fh.read(len(_REPORT_HEAD)) == _REPORT_HEAD
    except (OSError, UnicodeDecodeError):
        return False


#: how every ablation.md the kit writes starts (:func:`markdown_table`)
_REPORT_HEAD = "| user | strategy | base |"


def rewrite_report(folder) -> str:
    """Write ``ablation.md`` of a grid folder again from its ``ablation.csv`` and ``curves.json`` (no training: a
    change of the report's columns); returns the text. Only the kit's own report is replaced (TL04): a folder
    whose ablation.md the kit did not write (:func:`_kit_report`) is refused (ValueError, one line), checked
    again at the write; a malformed table is one line too (TL05, TL06)."""
    folder = Path(folder)
    _refuse_foreign_report(folder)
    text = report_text(load_results(folder)[0], folder.resolve().name)
    _refuse_foreign_report(folder)  # again at the write: a file made meanwhile is the user's
    with atomic_write(folder / "ablation.md") as f:
        f.write(text)
    return text


def _refuse_foreign_report(folder: Path) -> None:
    if not _kit_report(folder):
        raise ValueError(f"{folder}/ablation.md was not written by claw (no claw marker lists it and it is not the "
                         "kit's table); it is kept: move it away to write the report there")


def paired(rows: List[Dict], user: str, a, b, key: str = "final_score") -> Optional[Dict]:
    """Strategy ``a`` minus strategy ``b`` on the same seeds of setting ``user``; ``a`` or ``b`` may
    also be a (setting, strategy) pair, to compare across settings that ask the same questions.

    Seeds pair the runs (same prompts, same eval set, same initial weights), so the per-seed
    difference d_k = a_k - b_k removes the seed-to-seed spread both share. Returns None when the two
    have no seed in common, else {"n", "mean" (mean of d), "se" (std(d, ddof=1) / sqrt(n); 0 for n = 1),
    "wins", "ties", "losses" (seeds with d > 0, d == 0, d < 0)}. ``key`` :data:`UNTIL_STABLE` pairs the speed
    measure (:func:`until_stable`; lower is faster, so "wins" are the seeds where ``a`` was slower).
    """
    a, b = [(user, x) if isinstance(x, str) else tuple(x) for x in (a, b)]
    if key != UNTIL_STABLE and any(key not in r for r in rows):
        raise ValueError(f"key {key!r} is not a column of the rows (they have {sorted(rows[0]) if rows else []})")
    va = {r["seed"]: _value(r, key) for r in rows if (r["user"], r["strategy"]) == a}
    vb = {r["seed"]: _value(r, key) for r in rows if (r["user"], r["strategy"]) == b}
    common = sorted(set(va) & set(vb))
    if not common:
        return None
    d = np.array([va[k] - vb[k] for k in common])
    se = float(d.std(ddof=1) / np.sqrt(len(d))) if len(d) > 1 else 0.0
    return {"n": len(d), "mean": float(d.mean()), "se": se, "wins": int((d > 0).sum()), "ties": int((d == 0).sum()),
            "losses": int((d < 0).sum())}


def _value(r: Dict, key: str) -> float:
    v = float(until_stable(r)) if key == UNTIL_STABLE else float(r[key])
    if not np.isfinite(v):  # a NaN would count as neither win, tie nor loss (R4-23)
        raise ValueError(f"{key} of run {r.get('user')}/{r.get('strategy')} seed {r.get('seed')} is {v}, not a number")
    return v


def _paired_cells(p: Dict) -> str:
    """The two table cells of a :func:`paired` result: mean +- s.e., and seeds better / tied / worse."""
    return f"{p['mean']:+.3f} +- {p['se']:.3f} | {p['wins']} / {p['ties']} / {p['losses']}"


def _table(head: str, lines: List[str]) -> str:
    """A Markdown table from its header row and body rows; "" when there is no row."""
    if not lines:
        return ""
    return "\n".join([head, "|" + "---|" * (head.count("|") - 1)] + lines)


def ordering_report(rows: List[Dict], pairs=ORDERING, key: str = "final_score") -> str:
    """Markdown lines: for each setting and each pair (a, b) both ran, the paired difference of the
    final score with its standard error and the per-seed wins/ties/losses. "" when no pair ran."""
    lines = []
    for user in sorted({r["user"] for r in rows}):
        for a, b in pairs:
            p = paired(rows, user, a, b, key)
            if p is None:
                continue
            lines.append(f"| {user} | {a} - {b} | {_paired_cells(p)} |")
    return _table("| setting | paired difference | final score, mean +- s.e. | seeds better / tied / worse |", lines)


def speed_report(rows: List[Dict], pairs=ORDERING) -> str:
    """Markdown lines: for each setting and pair (a, b) both ran, the paired difference of the steps until stable
    (:func:`until_stable`, never = the run length), mean +- s.e., and the seeds on which ``a`` was faster / tied /
    slower. "" when no pair ran."""
    lines = []
    for user in sorted({r["user"] for r in rows}):
        for a, b in pairs:
            p = paired(rows, user, a, b, UNTIL_STABLE)
            if p is None:
                continue
            lines.append(f"| {user} | {a} - {b} | {p['mean']:+.1f} +- {p['se']:.1f} | "
                         f"{p['losses']} / {p['ties']} / {p['wins']} |")
    return _table("| setting | paired difference | steps until stable (never = run length), mean +- s.e. | "
                  "seeds faster / tied / slower |", lines)


def plot_until_stable(ax, labels: Sequence[str], stats: Sequence[Dict], cap: Optional[int] = None, colors=None,
                      offset: float = 0.0, width: float = 0.8, label: Optional[str] = None):
    """Bars of the speed measure (:func:`summarise`'s ``until_stable``: steps until stable, never = the run length),
    one per entry of ``stats``, each with "reached/seeds" above it. A bar with a seed that never got there is
    hatched (a lower bound); one where no seed got there is a white hatched bar at the cap, never a zero-height bar
    on this lower-is-better axis; the cap (the run length) is a dashed line. Returns the bars."""
    cap = cap or max(v["steps"] for v in stats)
    x = np.arange(len(stats)) + offset
    heights = [v["until_stable"] for v in stats]
    bars = ax.bar(x, heights, width=width, color=colors, label=label)
    for bar, v in zip(bars, stats):
        if v["stable"] < v["n"]:
            bar.set_hatch("//")
            bar.set_edgecolor("black" if v["stable"] else "grey")
            if v["stable"] == 0:
                bar.set_facecolor("white")
        ax.text(bar.get_x() + bar.get_width() / 2, bar.get_height() + 0.2, f"{v['stable']}/{v['n']}", ha="center",
                fontsize=7)
    ax.axhline(cap, color="grey", lw=0.8, ls="--")
    ax.set_ylim(0, cap * 1.12)
    if not offset:
        ax.set_xticks(range(len(stats)), labels, fontsize=7)
    return bars


def engine_report(rows: List[Dict], key: str = "final_score") -> str:
    """Markdown lines: for each setting and strategy that ran on the kit's loop and on another engine
    (rows labelled "<setting>@<engine>"), the paired difference other engine minus kit. "" if none."""
    lines = []
    for label in sorted({r["user"] for r in rows if "@" in r["user"]}):
        base, engine = label.split("@", 1)
        for strat in sorted({r["strategy"] for r in rows if r["user"] == label}):
            p = paired(rows, base, (label, strat), strat, key)
            if p is not None:
                lines.append(f"| {base} | {strat} | {engine} - kit | {_paired_cells(p)} |")
    return _table("| setting | strategy | engines | final score, mean +- s.e. | seeds better / tied / worse |", lines)


def plot_curves(curves: Dict, user: str, strategies: Sequence[str], path=None, ax=None):
    """Mean eval score over seeds with a +-1 std band, one line per strategy. With ``path`` and no ``ax`` the
    figure is drawn on a bare ``Figure`` and saved (no pyplot: the caller's backend and figures are untouched)."""
    if ax is None and path is not None:
        from matplotlib.figure import Figure  # lazy: matplotlib (seconds to import) loads only for a figure

        ax = Figure(figsize=(7, 4)).add_subplot()
    elif ax is None:
        import matplotlib.pyplot as plt  # lazy: as above

        _, ax = plt.subplots(figsize=(7, 4))
    for strat in strategies:
        runs = [v for k, v in curves.items() if k.startswith(f"{user}/{strat}/")]
        if not runs:
            continue
        steps = [s for s, _ in runs[0]]
        ys = np.array([[v for _, v in r] for r in runs])
        m, sd = ys.mean(0), ys.std(0)
        c = f"C{list(STRATEGIES).index(strat) % 10}" if strat in STRATEGIES else None  # one colour per strategy
        ax.plot(steps, m, label=strat, color=c, lw=2 if strat in JUDGED_STRATEGIES else 1)
        ax.fill_between(steps, m - sd, m + sd, color=c, alpha=0.15)
    ax.set_xlabel("PPO step"); ax.set_ylabel("eval score (greedy)"); ax.set_ylim(0, 1.02)
    ax.set_title(f"user: {user}"); ax.legend(fontsize=7, ncol=2)
    ax.figure.tight_layout()
    if path is not None:  # whole or not at all, by the output rule of every writer (utils.atomic_write)
        with atomic_write(path, "wb") as f:
            ax.figure.savefig(f, format=Path(path).suffix.lstrip(".") or "png", dpi=100)
    return ax
