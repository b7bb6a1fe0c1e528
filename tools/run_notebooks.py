"""Execute notebooks in place, top to bottom in a fresh kernel, and store their outputs.

    python tools/run_notebooks.py [notebooks/01_*.ipynb ...]   (default: all of notebooks/)

The stored outputs are what `pytest --nbval` compares against, so run this after changing
claw_lib or a notebook, look at the diff, and commit.
"""
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]


def run(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    t = time.time()
    NotebookClient(nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    for cell in nb.cells:  # keep diffs small: no execution timestamps
        cell.get("metadata", {}).pop("execution", None)
    nbformat.write(nb, path)
    print(f"{path.name}: {time.time() - t:.0f} s", flush=True)


if __name__ == "__main__":
    paths = [Path(p) for p in sys.argv[1:]] or sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))
    for p in paths:
        run(p)
