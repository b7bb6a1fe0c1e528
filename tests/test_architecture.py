"""The package's shape (issue 33): imports run one way down the layers, no import circle, short functions (the
few that remain are listed below with their reason, and may only shrink).

Read with ``ast`` from the source (nothing is imported but the vocabulary: ``config`` and ``rl.strategies``, both
torch-free). Every import counts, a function-level one too (issue 44). A name that moves is imported from its new
module everywhere: no module forwards old names through a module-level ``__getattr__``.
"""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "claw_lib"

#: the layers, lowest first; a module may import its own layer and the ones below
LAYERS = ("text utils ops config prompts", "models", "alignment", "signals", "toy", "rl", "integrations", "serve",
          "apps exercises")
LAYER = {name: i for i, names in enumerate(LAYERS) for name in names.split()}

#: imports that still run up, each with why it waits (shrink this list; never grow it)
KNOWN_UPWARD: dict = {}

#: import circles still there (each through a function-level import), with why they wait (shrink; never grow)
KNOWN_CIRCLES: dict = {}

#: functions over MAX_LINES today, with their length (they may shrink, never grow; a new one may not appear)
MAX_LINES = 60
KNOWN_LONG: dict = {}


def _modname(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    rel = Path(*name.split(".")[1:]) if "." in name else Path()
    return (ROOT / rel).with_suffix(".py").is_file() or (ROOT / rel / "__init__.py").is_file()


def _imports(path: Path, source: str = None):
    """(imported claw_lib module, line) for every import in ``path`` (or in ``source``, read as that file), at module
    level or inside a function."""
    tree = ast.parse(path.read_text(encoding="utf-8") if source is None else source)
    mod = _modname(path)
    pkg = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((a.name, node.lineno) for a in node.names if a.name.startswith("claw_lib"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")[: len(pkg.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("claw_lib"):
                continue
            subs = [f"{target}.{a.name}" for a in node.names if _is_module(f"{target}.{a.name}")]
            yield from ((t, node.lineno) for t in (subs or [target]))


def _graph():
    graph = {}
    for path in sorted(ROOT.rglob("*.py")):
        graph.setdefault(_modname(path), set()).update(t for t, _ in _imports(path) if t != _modname(path))
    return graph


def _layer(module: str):
    parts = module.split(".")
    return LAYER.get(parts[1]) if len(parts) > 1 else None


def test_every_top_level_name_has_a_layer():
    names = {p.stem if p.suffix == ".py" else p.name for p in ROOT.iterdir()
             if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()}
    assert names <= set(LAYER), sorted(names - set(LAYER))


def test_no_import_runs_up_the_layers():
    up = set()
    for path in sorted(ROOT.rglob("*.py")):
        mod = _modname(path)
        for target, line in _imports(path):
            a, b = _layer(mod), _layer(target)
            if a is not None and b is not None and b > a:
                up.add((mod, target))
    assert up - set(KNOWN_UPWARD) == set(), sorted(up - set(KNOWN_UPWARD))
    assert set(KNOWN_UPWARD) <= up, f"fixed, remove from KNOWN_UPWARD: {sorted(set(KNOWN_UPWARD) - up)}"


def test_the_import_reader_counts_function_level_imports():
    src = ("from . import core\n\ndef f():\n    from .run import train\n\n"
           "def __getattr__(name):\n    from ..apps import grid\n    return grid\n")
    assert set(_imports(ROOT / "rl" / "ppo.py", src)) == {("claw_lib.rl.core", 1), ("claw_lib.rl.run", 4),
                                                          ("claw_lib.apps.grid", 7)}


def test_no_module_forwards_moved_names():
    """No module-level ``__getattr__`` (issue 44): a moved name is imported from its new home, so "go to definition"
    lands on it and no import hides an import circle."""
    found = [path.relative_to(ROOT).as_posix() for path in sorted(ROOT.rglob("*.py"))
             for top in ast.parse(path.read_text(encoding="utf-8")).body
             if isinstance(top, ast.FunctionDef) and top.name == "__getattr__"]
    assert not found, found


def _folder(module: str) -> str:
    """The folder of a module (``claw_lib.rl.ppo`` -> ``claw_lib.rl``; a top-level module: ``claw_lib``)."""
    return module.rsplit(".", 1)[0] if _is_module(module) and not (ROOT / Path(*module.split(".")[1:])).is_dir() \
        else module


def test_no_private_name_crosses_a_folder():
    """A name that starts with ``_`` is imported only within its own folder (issue 44): what the drivers of the
    stages (the TRL engine, the live server) use has a public name (``check_finite``, ``write_metrics``,
    ``minibatch``, ``config.from_dict``)."""
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        mod = _modname(path)
        pkg = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.ImportFrom) and node.level):
                continue
            base = pkg.split(".")[: len(pkg.split(".")) - (node.level - 1)]
            target = ".".join(base + ([node.module] if node.module else []))
            private = [a.name for a in node.names if a.name.startswith("_") and a.name != "__version__"]
            if private and _folder(target) != pkg:
                found.append(f"{path.relative_to(ROOT).as_posix()}:{node.lineno} {target} {private}")
    assert not found, found


def test_no_new_import_circle():
    """No module reaches itself through the imports of other modules (a package's ``__init__`` aside: it lists its
    modules, which may import their package's helpers)."""
    graph = _graph()
    edges = {m: {t for t in ts if t in graph and not (m.startswith(t + ".") and t == m.rsplit(".", 1)[0])}
             for m, ts in graph.items()}
    edges = {m: {t for t in ts if not m.startswith(t + ".")} for m, ts in edges.items()}  # a module -> its package
    index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]

    def strongconnect(v):  # Tarjan
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = set()
            while True:
                w = stack.pop()
                on.discard(w)
                scc.add(w)
                if w == v:
                    break
            if len(scc) > 1:
                sccs.append(sorted(scc))

    for v in sorted(edges):
        if v not in index:
            strongconnect(v)
    found = {frozenset(c) for c in sccs}
    assert found - set(KNOWN_CIRCLES) == set(), sorted(sorted(c) for c in found - set(KNOWN_CIRCLES))
    assert set(KNOWN_CIRCLES) <= found, f"fixed, remove from KNOWN_CIRCLES: {set(KNOWN_CIRCLES) - found}"


def test_no_function_over_60_lines():
    found = {}
    for path in sorted(ROOT.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_LINES:
                    found[f"{path.relative_to(ROOT).as_posix()}:{node.name}"] = n
    new = {k: v for k, v in found.items() if k not in KNOWN_LONG}
    grown = {k: (KNOWN_LONG[k], v) for k, v in found.items() if k in KNOWN_LONG and v > KNOWN_LONG[k]}
    assert not new, f"functions over {MAX_LINES} lines: {new}"
    assert not grown, f"known long functions that grew (was, now): {grown}"


#: literals that restate an enumeration (:func:`_vocabularies`) outside config.py and rl/strategies.py, with why they
#: wait (shrink; never grow); an entry whose file is not in this checkout is skipped
KNOWN_COPIES: dict = {}
#: files whose string tuples are data, not the vocabulary: the committed grids' settings (which strategies, users
#: and engines a grid ran must not change when a choice is added)
NOT_VOCABULARY = ("config.py", "rl/strategies.py", "rl/grids.py")


def _vocabularies() -> dict:
    """Every enumeration, by its set of names -> where it is defined: the tuples of config.py (``PPO_STRATEGIES``,
    ``USERS``, ...), the choices of ``config.CHOICES`` and the sets the strategy table gives (torch-free imports)."""
    from claw_lib import config
    from claw_lib.rl import strategies

    named = [(n, getattr(config, n)) for n in dir(config) if n.isupper()]
    named += [(k, tuple(c for c in v if c is not None)) for k, v in config.CHOICES.items()]
    named += [(f"rl.strategies.{n}", getattr(strategies, n)) for n in ("TRL_STRATEGIES", "JUDGED_STRATEGIES")]
    vocab = {}
    for name, v in named:
        if isinstance(v, tuple) and len(v) >= 2 and all(isinstance(x, str) for x in v):
            vocab.setdefault(frozenset(v), name)
    return vocab


def test_no_enumeration_is_spelt_out_twice():
    """A tuple, list or set of two or more names that equals an enumeration is a copy of it: import it instead
    (CONTRIBUTING.md, "Every enumeration once"). A subset is not a copy (the TRL engine's advantages)."""
    vocab, found = _vocabularies(), {}
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel in NOT_VOCABULARY:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and len(node.elts) >= 2 and all(
                    isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
                name = vocab.get(frozenset(e.value for e in node.elts))
                if name:
                    found[f"{rel}:{name}"] = node.lineno
    new = {k: v for k, v in found.items() if k not in KNOWN_COPIES}
    assert not new, f"enumerations spelt out again (file:enumeration -> line): {new}"
    stale = {k for k in KNOWN_COPIES if k not in found and (ROOT / k.split(":")[0]).exists()}
    assert not stale, f"fixed, remove from KNOWN_COPIES: {sorted(stale)}"


def test_the_copy_check_sees_a_copy():
    vocab = _vocabularies()
    assert vocab[frozenset(("frozen", "live"))] == "TEACHERS" and frozenset(("opd", "combined")) not in vocab
    assert vocab[frozenset(("binary_rl", "opd", "combined"))] == "rl.strategies.JUDGED_STRATEGIES"


def _unjustified_lazy_imports(path: Path, source: str = None) -> list:
    """The function-level imports of ``path`` (or of ``source``, read as that file) that do not say why they wait:
    each needs ``# lazy: <reason>`` on its own lines or on the lines right above it, where comments and other imports
    (no blank line between) count, so one comment may head a group of imports."""
    text = path.read_text(encoding="utf-8") if source is None else source
    lines, tree = text.splitlines(), ast.parse(text)
    import_lines = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            import_lines.update(range(node.lineno, node.end_lineno + 1))
    found = []
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            said = lines[node.lineno - 1:node.end_lineno]
            k = node.lineno - 1
            while k >= 1 and (lines[k - 1].strip().startswith("#") or k in import_lines):
                said.append(lines[k - 1])
                k -= 1
            if not any("# lazy:" in line for line in said):
                found.append(f"{path.relative_to(ROOT).as_posix()}:{node.lineno} {lines[node.lineno - 1].strip()}")
    return found


def test_a_function_level_import_says_why_it_waits():
    """Imports sit at the top of the file (issue 44), so a module's first screen shows which rooms it uses. One inside
    a function says why with ``# lazy: <reason>``: a heavy dependency kept off ``claw --help`` and the torch-free rooms
    (torch, transformers, matplotlib, tqdm.auto, openai, uvicorn and fastapi, jieba), an optional one (peft, torchao,
    trl, ipywidgets, rapidfuzz) or a POSIX-only module (fcntl, resource). A name a test replaces is reached through
    its module (``encoders.load_encoder``), not imported lazily for that."""
    found = [f for path in sorted(ROOT.rglob("*.py")) for f in _unjustified_lazy_imports(path)]
    assert not found, f"{len(found)} function-level imports without '# lazy: <reason>': {found}"


def test_the_lazy_import_check_reads_comments_above_and_beside():
    src = ("def f():\n    import torch  # lazy: heavy\n\n"
           "def g():\n    # lazy: heavy\n    import torch\n    from torch import nn\n\n"
           "def h():\n    import re\n\n"
           "def k():\n    # lazy: heavy\n    import torch\n\n    import re\n")
    assert _unjustified_lazy_imports(ROOT / "ops.py", src) == ["ops.py:10 import re", "ops.py:16 import re"]
