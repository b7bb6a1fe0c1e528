"""A script of ``tools/`` (or ``benchmarks/``) imported as a module for its tests: the one way the tests load them."""
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load_tool(name: str, folder: str = "tools"):
    """``ROOT/folder/name.py`` as a fresh module (scripts are not a package; each call executes the file again)."""
    spec = importlib.util.spec_from_file_location(f"{name}_under_test", ROOT / folder / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
