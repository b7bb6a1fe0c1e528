"""Small shared helpers: cache folder, device choice, seeding (notebook 00), and safe outputs (files
written whole or not at all, locked run folders, no silent reuse of a folder that holds results)."""
from __future__ import annotations

import contextlib
import os
import random
import tempfile
from pathlib import Path
from typing import Optional

import numpy as np

__all__ = ["cache_dir", "resolve_device", "seed_everything", "stable_printing", "free_cpus", "set_threads",
           "atomic_write", "publish_report", "FolderLock",
           "FolderBusyError", "DeviceNotAvailableError", "check_new_output", "check_new_file"]


def cache_dir() -> Path:
    """Folder for converted models and other derived files.

    ``$CLAW_CACHE`` if set, else ``$XDG_CACHE_HOME/claw-kit``, else ``~/.cache/claw-kit``.
    """
    env = os.environ.get("CLAW_CACHE")
    if env:
        p = Path(env)
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        p = Path(base) / "claw-kit"
    p.mkdir(parents=True, exist_ok=True)
    return p


def resolve_device(device: str = "cpu") -> str:
    """'cpu', 'cuda', 'cuda:N' or 'auto' (CUDA when available, else CPU) -> a torch device string."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise DeviceNotAvailableError(
            f"device={device!r} was requested but torch sees no CUDA GPU "
            f"(torch {torch.__version__}); use device='cpu' or 'auto', or install a CUDA build of torch"
        )
    if device != "cpu" and not device.startswith("cuda"):
        raise ValueError(f"device must be 'cpu', 'cuda', 'cuda:N' or 'auto', got {device!r}")
    return device


def free_cpus() -> int:
    """CPU cores free right now: the cores this process may use minus the 1-minute load average,
    rounded, at least 1. Torch threads beyond the free cores spin against other processes: on the
    2-core dev machine a ``combined`` PPO step took 0.20 s with two threads and 0.29 s with one when
    quiet, but 0.69 s with two and 0.36 s with one next to one busy process
    (benchmarks/bench_threads.py, results/bench_threads.md)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    try:
        busy = os.getloadavg()[0]
    except OSError:
        busy = 0.0
    return max(1, min(cores, round(cores - busy)))


def set_threads(threads: int = 0) -> int:
    """Set torch's CPU threads: ``threads`` if > 0, else :func:`free_cpus`. Returns the number set."""
    import torch

    n = threads if threads > 0 else free_cpus()
    torch.set_num_threads(n)
    return n


def seed_everything(seed: int = 0, threads: int | None = 1) -> None:
    """Seed python, numpy and torch; optionally pin torch to ``threads`` CPU threads.

    One thread makes CPU float results bit-stable between runs, which nbval relies on.
    """
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if threads is not None:
        torch.set_num_threads(threads)


def stable_printing(decimals: int = 3) -> None:
    """numpy and torch print floats rounded to ``decimals``, and never as "-0.00".

    A value like -1e-7 prints as "-0." on one machine and "0." on another; notebooks checked by
    nbval call this once so their stored outputs do not depend on such noise.
    """
    import torch

    def fmt(v):
        return f"{round(float(v), decimals) + 0.0:.{decimals}f}"

    np.set_printoptions(precision=decimals, suppress=True, formatter={"float": fmt})
    torch.set_printoptions(precision=decimals, sci_mode=False)


# --------------------------------------------------------------------------- safe outputs
class DeviceNotAvailableError(RuntimeError):
    """A device was asked for that this machine does not have (``device="cuda"`` without a GPU)."""


@contextlib.contextmanager
def atomic_write(path, mode: str = "w", encoding: Optional[str] = "utf-8", newline: Optional[str] = None):
    """Write ``path`` through a temporary file in the same folder, renamed over ``path`` only when
    the block finishes: a crash or Ctrl-C leaves the old file (or none), never half a file."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent or ".")
    try:
        with os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": encoding, "newline": newline})) as f:
            yield f
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def publish_report(text: str, out=None) -> None:
    """Print a Markdown report and, with ``out`` (checked by :func:`check_new_file` before the long work),
    write it there atomically, creating the folder, ending with exactly one newline (benchmarks, tools)."""
    print(text)
    if out is not None:
        out = Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        with atomic_write(out) as f:
            f.write(text if text.endswith("\n") else text + "\n")


class FolderLock:
    """An exclusive lock on an output folder (``<folder>/.lock``, flock) while a run writes to it;
    a second run on the same folder fails at once with :class:`FolderBusyError`."""

    def __init__(self, folder):
        self.folder = Path(folder)
        self._f = None

    def __enter__(self) -> "FolderLock":
        import fcntl

        self.folder.mkdir(parents=True, exist_ok=True)
        self._f = open(self.folder / ".lock", "w")
        try:
            fcntl.flock(self._f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._f.close()
            raise FolderBusyError(f"another run is writing to {self.folder}; wait for it or choose another folder") from None
        return self

    def __exit__(self, *exc) -> None:
        import fcntl

        fcntl.flock(self._f, fcntl.LOCK_UN)
        self._f.close()


class FolderBusyError(RuntimeError):
    """Another process holds the lock of an output folder."""


def check_new_file(path, force: bool = False, what: str = "--out") -> Path:
    """``path`` as a Path for a report about to be written, refusing (ValueError, one line) a folder, or an
    existing file unless ``force``: check before the long work, write at the end with :func:`atomic_write`."""
    p = Path(path)
    if p.is_dir():
        raise ValueError(f"{what} {p} is a folder; give a file name")
    if p.exists() and not force:
        raise ValueError(f"{what} {p} already exists; choose a new file or pass --force to replace it")
    return p


def check_new_output(folder, force: bool = False, what: str = "output", marker: Optional[str] = None) -> Path:
    """``folder`` as a Path, refusing to reuse one that already holds results unless ``force``: a
    folder is in use when it holds ``marker`` (a file name), or anything at all when ``marker`` is None.
    A path that is a file is always refused."""
    p = Path(folder)
    if p.exists() and not p.is_dir():
        raise ValueError(f"{what} folder {p} is a file")
    used = p.exists() and ((p / marker).exists() if marker else any(p.iterdir()))
    if used and not force:
        raise ValueError(f"{what} folder {p} already holds results; choose a new folder or pass --force to replace them")
    return p
