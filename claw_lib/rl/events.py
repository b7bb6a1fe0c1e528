"""TensorBoard event files beside ``metrics.csv``, as TRL's ``report_to="tensorboard"`` writes them.

Every run folder the kit writes (``claw train`` with either engine, ``claw serve``) gets
``tensorboard/events.out.tfevents.claw``: one scalar per numeric metric and step, tagged with the metric's
namespaced key (``eval/score``, ``policy/clipfrac``, ...), so ``tensorboard --logdir RUN`` (or a parent folder of
several runs) draws the curves. The file is written whole from the run's history, through a temporary folder and
one rename, like the metrics files beside it: a resumed run continues the same curves, and a crash never leaves
half a file. Writing uses PyTorch's ``SummaryWriter`` (the ``tensorboard`` package), never a hand-made encoder.
"""
from __future__ import annotations

import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import Dict, List

__all__ = ["TB_DIR", "TB_FILE", "write_events", "scalars"]

#: the folder inside a run folder, and the one event file in it
TB_DIR = "tensorboard"
TB_FILE = "events.out.tfevents.claw"


def scalars(history: List[Dict]) -> List[tuple]:
    """(tag, value, step) for every finite number of every history row, in order; ``step`` is the row's own
    ``step`` (a training run's), else its ``version`` (the live server's updates), else its index; booleans and
    text are left out."""
    out = []
    for k, row in enumerate(history):
        axis = next((key for key in ("step", "version") if key in row), None)
        step = k if axis is None else int(row[axis])
        for tag, v in row.items():
            if tag == axis or isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                continue
            out.append((tag, float(v), step))
    return out


def write_events(out: Path, history: List[Dict]) -> Path:
    """Write ``out/tensorboard/events.out.tfevents.claw`` from ``history`` (the rows of ``metrics.jsonl``),
    replacing the previous file in one rename. Returns its path."""
    # lazy: torch and tensorboard load only when a run writes event files
    from torch.utils.tensorboard import SummaryWriter

    folder = Path(out) / TB_DIR
    folder.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="claw-tb-") as tmp:
        writer = SummaryWriter(log_dir=tmp, max_queue=10_000, flush_secs=3600)
        for tag, value, step in scalars(history):
            writer.add_scalar(tag, value, step, new_style=True)
        writer.close()
        (written,) = Path(tmp).glob("events.out.tfevents.*")
        # the partial file's name has no "tfevents" in it: TensorBoard would read one left by a crash
        fd, part = tempfile.mkstemp(prefix=".claw-events.", suffix=".tmp", dir=folder)
        os.close(fd)
        try:
            shutil.copyfile(written, part)
            os.replace(part, folder / TB_FILE)
        except BaseException:
            Path(part).unlink(missing_ok=True)
            raise
    return folder / TB_FILE
