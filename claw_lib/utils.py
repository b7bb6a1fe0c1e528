"""Small shared helpers: cache folder, device choice, seeding (notebook 00)."""
from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np

__all__ = ["cache_dir", "resolve_device", "seed_everything", "stable_printing"]


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
        raise RuntimeError(
            f"device={device!r} was requested but torch sees no CUDA GPU "
            f"(torch {torch.__version__}); use device='cpu' or 'auto', or install a CUDA build of torch"
        )
    if device != "cpu" and not device.startswith("cuda"):
        raise ValueError(f"device must be 'cpu', 'cuda', 'cuda:N' or 'auto', got {device!r}")
    return device


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
