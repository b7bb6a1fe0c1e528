"""The ablation grid runner (``claw reproduce``; notebooks 09a-09c): every strategy x setting x seed of a grid
(:data:`claw_lib.rl.grids.GRIDS`) trained on the kit's loop or the TRL engine, and the grid's files.

It sits in ``apps/`` because a grid may start the TRL engine (:mod:`claw_lib.integrations`), which lies above
``rl/``; the reading of the results (tables, paired differences, curves) stays in :mod:`claw_lib.rl.ablation`.

A grid's folder holds ``ablation.csv`` (one row per run, and per persona of a joint run), ``ablation.md``,
``curves.json`` and ``curves_<setting>.png``; while the grid runs, :data:`PARTIAL` holds its finished runs (a grid
stopped with Ctrl-C goes on from there when the same command runs again).
"""
from __future__ import annotations

import csv
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..config import PPOConfig
from ..rl.ablation import load_results, paired, plot_curves, report_text, steps_to_stable, steps_to_target
from ..rl.grids import GRIDS, SETTINGS, STRATEGIES, TARGET
from ..rl.run import train
from ..utils import OutputFolder, atomic_write

__all__ = ["reproduce", "PARTIAL", "finished_runs", "TARGET", "load_results", "paired"]

#: the finished runs of a grid that has not finished yet (one JSON line each, after a line of the grid's
#: settings): a grid interrupted with Ctrl-C goes on from there when the same command runs again
PARTIAL = "ablation.partial.jsonl"
#: the columns of a run's time, counted once on the run's own row (a joint run's persona rows hold 0)
_TIME_COLUMNS = ("wall_s", "rollout_s", "score_s", "update_s", "rollout_tokens")


def reproduce(out_dir, strategies: Optional[Sequence[str]] = None, users=None, seeds=None, steps=None,
              grid: str = "quick", lr: Optional[float] = None, target: float = TARGET, progress: bool = True,
              force: bool = False) -> List[Dict]:
    """Run the grid; write ``ablation.csv`` (one row per strategy x setting x seed), ``ablation.md``
    (the table, then paired comparisons per setting), ``curves.json`` and ``curves_<setting>.png``
    into ``out_dir``. Returns the rows.

    grid: a name in :data:`GRIDS` ("quick", "full", "table3", ...), the defaults for everything below;
    strategies: default the grid's, else all of STRATEGIES (each setting runs those it allows);
    users: names of :data:`SETTINGS` (a user, and for "correcting-pair" the two-part questions); the
    ``user`` column of the table holds this setting name, ``questions`` says "single" or "pair".
    lr: the learning rate of every run; None (default): the per-model rate (``PPOConfig.lr``: 3e-4 for the tiny
    GPT, the rate of every committed grid). target: the eval score of the ``steps_to_target`` and
    ``steps_to_stable`` columns (default :data:`TARGET`).
    A folder that already holds a grid's results is refused unless ``force`` (committed results are
    never replaced by accident), which first removes the older grid's own files (its table, curves and
    figures; nothing else: :class:`~claw_lib.utils.OutputFolder`); a folder that holds files claw did not
    write is refused. Every finished run is added to :data:`PARTIAL` at once, so a grid stopped half-way
    (Ctrl-C) runs only its missing runs when called again with the same settings; the tables are written
    at the end, each whole. Seeds must be distinct (a seed given twice would count the same run twice)."""
    g = _grid(grid, users, seeds, steps)
    folder = _claim(out_dir, force)
    _jobs(g, strategies)
    settings = {"steps": g.steps, "lr": PPOConfig(lr=lr).lr, "batch_size": g.batch_size, "eval_every": g.eval_every,
                "target": target}
    with folder.locked(force):  # one grid at a time in a folder
        if force:
            folder.remove_own()  # the older grid's table, curves and figures (a figure it had and this one has not)
        rows, curves = _run_jobs(folder, g, settings, lr, target, progress)
        _write_grid(folder.path, g, rows, curves)
    return rows


@dataclass
class _Grid:
    """A grid resolved from its name and the caller's choices (:func:`_grid`, then :func:`_jobs`)."""

    users: Tuple[str, ...]
    seeds: Tuple[int, ...]
    steps: int
    batch_size: int
    eval_every: int
    engines: Tuple[str, ...]
    strategies: Tuple[str, ...] = ()
    per_setting: Optional[Dict[str, List[str]]] = None
    """setting -> the chosen strategies it runs"""
    jobs: Tuple[Tuple[str, str, int, str], ...] = ()
    """(setting, strategy, seed, engine) of every run, in order"""
    labels: Optional[Dict[Tuple[str, str], str]] = None
    """(setting, engine) -> the table's ``user`` label ("<setting>" on the kit's loop, else "<setting>@<engine>")"""
    defaults: Tuple[str, ...] = ()
    """the grid's own strategies (empty: all of STRATEGIES)"""


def _grid(name: str, users, seeds, steps) -> _Grid:
    """The grid ``name`` with the caller's settings, seeds and steps (each checked: one-line ValueError)."""
    if name not in GRIDS:
        raise ValueError(f"grid must be one of {sorted(GRIDS)}, got {name!r}")
    grid = dict(GRIDS[name])
    users = tuple(users or grid["users"])
    unknown = [u for u in users if u not in SETTINGS]
    if unknown:
        raise ValueError(f"unknown setting(s) {unknown}: choose from {sorted(SETTINGS)}")
    seeds = tuple(seeds if seeds is not None else grid["seeds"])
    dup = sorted({k for k in seeds if seeds.count(k) > 1})
    if dup:
        raise ValueError(f"seed {dup[0]} is given twice (seeds {list(seeds)}): every run would count twice in the "
                         "means and the paired differences; give distinct seeds")
    return _Grid(users, seeds, steps or grid["steps"], grid["batch_size"], grid["eval_every"],
                 tuple(grid.get("engines", ("kit",))), defaults=tuple(grid.get("strategies") or ()))


def _claim(out_dir, force: bool):
    """The grid's :class:`~claw_lib.utils.OutputFolder`; a folder that holds a finished grid is refused unless
    ``force`` (an unfinished one, :data:`PARTIAL`, goes on)."""
    folder = OutputFolder.claim(out_dir, "reproduce", force, "results", names=(PARTIAL,), legacy=_legacy_grid_files)
    if folder.used and not force and not _only_partial(folder):
        raise ValueError(f"the results folder {folder.path} already holds results; choose a new folder or pass "
                         "--force to replace them")
    return folder


def _jobs(g: _Grid, strategies) -> None:
    """Fill in the grid's strategies, runs and labels (unknown strategies, or no run at all: ValueError)."""
    g.strategies = tuple(strategies or g.defaults or STRATEGIES)
    bad = [x for x in g.strategies if x not in STRATEGIES]
    if bad:
        raise ValueError(f"unknown strategy(ies) {bad}: choose from {STRATEGIES}")
    g.per_setting = {u: [s for s in g.strategies if SETTINGS[u].runs(s)] for u in g.users}
    g.jobs = tuple((u, s, k, e) for e in g.engines for u in g.users for s in g.per_setting[u] for k in g.seeds)
    if not g.jobs:
        raise ValueError("the grid has no runs: no setting allows the chosen strategies")
    g.labels = {(u, e): u if e == "kit" else f"{u}@{e}" for u in g.users for e in g.engines}


def _run_jobs(folder, g: _Grid, settings: Dict, lr: Optional[float], target: float,
              progress: bool) -> Tuple[List[Dict], Dict]:
    """Every run of the grid, in order: a run :data:`PARTIAL` holds is read back (its row, curve and its personas'),
    the others trained and added to :data:`PARTIAL` at once. Returns (rows, curves)."""
    from tqdm.auto import tqdm  # lazy: tqdm.auto looks for a notebook (IPython)

    out = folder.path
    rows, curves = [], {}
    done = _finished_runs(out, settings)
    folder.register("ablation.csv", "curves.json", "ablation.md", PARTIAL,
                    *[f"curves_{x}.png" for x in g.labels.values()])
    for setting, strategy, seed, engine in tqdm(g.jobs, desc="ablation", disable=not progress):
        label = g.labels[(setting, engine)]
        key = f"{label}/{strategy}/{seed}"
        if key in done:  # finished before an interruption: its row and curve are kept (and its personas')
            for k in [key] + [k for k in done if k.startswith(f"{label}:") and k.endswith(f"/{strategy}/{seed}")]:
                rows.append(done[k]["row"])
                curves[k] = [tuple(p) for p in done[k]["curve"]]
            continue
        cfg = SETTINGS[setting].apply(PPOConfig(strategy=strategy, seed=seed, steps=g.steps, lr=lr,
                                                batch_size=g.batch_size, eval_every=g.eval_every, progress=False))
        for k, row, curve in _one_run(cfg, label, engine, g, target):
            rows.append(row)
            curves[k] = curve
            done[k] = {"row": row, "curve": curve}
        _write_partial(out, settings, done)
    return rows, curves


def _one_run(cfg: PPOConfig, label: str, engine: str, g: _Grid, target: float) -> List[Tuple[str, Dict, list]]:
    """Train one run; (curve key, row, curve) of the run, then of each persona of a joint run (``eval/score/<p>``:
    a row "<label>:<persona>" scored from that persona's curve, the run's time counted on the run's row only)."""
    t0 = time.time()
    hist = train(cfg) if engine == "kit" else _train_with(engine, cfg)
    curve = [(h["step"], h["eval/score"]) for h in hist if "eval/score" in h]
    timing = {k: float(np.sum([h.get(k, 0.0) for h in hist])) for k in ("timing/rollout_s", "timing/score_s",
                                                                          "timing/update_s")}
    row = {"strategy": cfg.strategy, "user": label, "engine": engine, "questions": cfg.task.questions,
           "seed": cfg.seed, **_curve_cells(curve), "steps": g.steps,
           "steps_to_target": steps_to_target(curve, target), "target": target,
           "steps_to_stable": steps_to_stable(curve, target), "batch_size": g.batch_size,
           "wall_s": round(time.time() - t0, 1),
           "rollout_s": round(timing["timing/rollout_s"], 2), "score_s": round(timing["timing/score_s"], 2),
           "update_s": round(timing["timing/update_s"], 2),
           "rollout_tokens": int(np.sum([h.get("timing/rollout_tokens", 0) for h in hist]))}
    out = [(f"{label}/{cfg.strategy}/{cfg.seed}", row, curve)]
    for persona in [k.split("/", 2)[2] for k in hist[0] if k.startswith("eval/score/")]:  # joint runs
        p_curve = [(h["step"], h[f"eval/score/{persona}"]) for h in hist if f"eval/score/{persona}" in h]
        out.append((f"{label}:{persona}/{cfg.strategy}/{cfg.seed}",
                    {**row, "user": f"{label}:{persona}", **_curve_cells(p_curve),
                     "steps_to_target": steps_to_target(p_curve, target),
                     "steps_to_stable": steps_to_stable(p_curve, target), **{k: 0 for k in _TIME_COLUMNS}},
                    p_curve))
    return out


def _write_grid(out: Path, g: _Grid, rows: List[Dict], curves: Dict) -> None:
    """The grid's tables and figures, each written whole; then :data:`PARTIAL` goes (the grid is whole)."""
    with atomic_write(out / "ablation.csv", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    with atomic_write(out / "curves.json") as f:
        f.write(json.dumps(curves))
    with atomic_write(out / "ablation.md") as f:
        f.write(report_text(rows, out.resolve().name))
    for (setting, engine), label in g.labels.items():
        plot_curves(curves, label, g.per_setting[setting], out / f"curves_{label}.png")
    (out / PARTIAL).unlink(missing_ok=True)  # the grid is whole: its tables hold every run


def _curve_cells(curve) -> Dict:
    """A row's scores read from its evaluation curve [(step, score), ...]."""
    return {"base_score": round(curve[0][1], 4), "score_at_8": round(dict(curve).get(8, float("nan")), 4),
            "final_score": round(curve[-1][1], 4), "best_score": round(max(v for _, v in curve), 4)}


def _legacy_grid_files(out: Path) -> set:
    """A grid's files in a folder written before markers existed (it has an ablation.csv)."""
    if not (out / "ablation.csv").is_file():
        return set()
    names = {"ablation.csv", "ablation.md", "curves.json", PARTIAL} | {f.name for f in out.glob("curves_*.png")}
    return {n for n in names if (out / n).exists()}


def _only_partial(folder) -> bool:
    """The folder holds an unfinished grid: its finished runs (:data:`PARTIAL`, removed only once every table is
    written), and no tables or tables a stop or a full disk left half-written (OP05b: the rerun goes on)."""
    return PARTIAL in folder.own


def finished_runs(path) -> int:
    """The runs :data:`PARTIAL` at ``path`` holds (a joint run's persona rows are not runs of their own: IR03);
    0 when there is no such file or it cannot be read."""
    try:
        lines = [json.loads(x) for x in Path(path).read_text(encoding="utf-8").splitlines()[1:] if x.strip()]
        return sum(1 for d in lines if ":" not in str(d.get("key", "")).split("/", 1)[0])
    except (OSError, ValueError, AttributeError):
        return 0


def _finished_runs(out: Path, settings: Dict) -> Dict:
    """``run key -> {"row", "curve"}`` of :data:`PARTIAL` (empty without one); refuses (ValueError) one written
    with other settings."""
    f = out / PARTIAL
    if not f.is_file():
        return {}
    try:
        lines = [json.loads(x) for x in f.read_text(encoding="utf-8").splitlines() if x.strip()]
        saved = lines[0]["settings"]
        done = {d["key"]: {"row": d["row"], "curve": d["curve"]} for d in lines[1:]}
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        raise ValueError(f"{f} (the finished runs of an interrupted grid) cannot be read; pass --force to start the "
                         "grid over") from None
    differ = [f"{k} {saved.get(k)!r} (saved) vs {v!r}" for k, v in settings.items() if saved.get(k) != v]
    if differ:
        raise ValueError(f"{out} holds an unfinished grid with other settings ({'; '.join(differ)}); run it with its "
                         "own settings, choose another folder, or pass --force to start over")
    return done


def _write_partial(out: Path, settings: Dict, done: Dict) -> None:
    with atomic_write(out / PARTIAL) as f:
        f.write(json.dumps({"settings": settings}) + "\n")
        for key, d in done.items():
            f.write(json.dumps({"key": key, **d}) + "\n")


def _train_with(engine: str, cfg: PPOConfig) -> List[Dict]:
    """A run through another engine (``"trl"``: :func:`claw_lib.integrations.trl.train_trl`)."""
    if engine != "trl":
        raise ValueError(f"engine must be 'kit' or 'trl', got {engine!r}")
    from ..integrations.trl import train_trl  # lazy: trl is a dev dependency

    return train_trl(cfg)
