"""Small shared helpers: cache folder, device choice, seeding (notebook 00), and safe outputs (files
written whole or not at all, locked run folders, no silent reuse of a folder that holds results)."""
from __future__ import annotations

import contextlib
import json
import os
import random
import stat
import tempfile
from pathlib import Path
from typing import Optional

import numpy as np

__all__ = ["cache_dir", "resolve_device", "seed_everything", "stable_printing", "free_cpus", "set_threads",
           "atomic_write", "publish_report", "FolderLock",
           "FolderBusyError", "DeviceNotAvailableError", "check_new_output", "check_new_file", "OutputFolder", "MARKER",
           "is_stream", "add_report_args", "report_path"]


def cache_dir() -> Path:
    """Folder for converted models and other derived files.

    ``$CLAW_CACHE`` if set, else ``$XDG_CACHE_HOME/claw-kit``, else ``~/.cache/claw-kit``. A relative
    ``$XDG_CACHE_HOME`` is ignored, as the XDG specification says (it would put 470 MB in whatever folder the
    command runs in).
    """
    env = os.environ.get("CLAW_CACHE")
    if env:
        p = Path(env)
    else:
        xdg = os.environ.get("XDG_CACHE_HOME", "")
        base = xdg if os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".cache")
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


#: paths written straight through, never replaced: the process's own streams
_STREAM_PREFIXES = ("/proc/", "/dev/fd/", "/dev/std")


def is_stream(path) -> bool:
    """Whether ``path`` is a stream rather than a file: a character device, FIFO or socket (followed through
    symlinks), or a path under /proc, /dev/fd or /dev/std* (``/dev/stdout``). :func:`atomic_write` writes a
    stream straight through instead of replacing it with a regular file."""
    p = str(path)
    if os.path.abspath(p).startswith(_STREAM_PREFIXES) or os.path.realpath(p).startswith(_STREAM_PREFIXES):
        return True
    try:
        mode = os.stat(p).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_write(path, mode: str = "w", encoding: Optional[str] = "utf-8", newline: Optional[str] = None):
    """Write ``path`` through a temporary file in the same folder, renamed over ``path`` only when
    the block finishes: a crash or Ctrl-C leaves the old file (or none), never half a file.

    A symlink is followed: its target is replaced and the link kept. A stream (:func:`is_stream`: a
    FIFO, a character device, ``/dev/stdout``) is written straight through, never renamed over. A new
    file gets the usual permissions (0666 minus the umask), a replaced one keeps its own."""
    path = Path(path)
    kw = {} if "b" in mode else {"encoding": encoding, "newline": newline}
    if is_stream(path):
        with open(path, mode, **kw) as f:
            yield f
        return
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    try:
        perm = stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        perm = 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent or ".")
    try:
        os.fchmod(fd, perm)
        with os.fdopen(fd, mode, **kw) as f:
            yield f
        os.replace(tmp, target)
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


def add_report_args(parser, what: str = "the Markdown report") -> None:
    """``--out FILE`` and ``--force`` of a script that writes a report (the benchmarks, tools/probe_report.py)."""
    parser.add_argument("--out", type=Path, default=None, help=f"also write {what} here (refused if it exists)")
    parser.add_argument("--force", action="store_true", help="overwrite --out if it exists")


def report_path(args) -> Optional[Path]:
    """``args.out`` checked before the long work (:func:`check_new_file`), or None; a refusal exits with one line
    ("error: ...", exit code 1)."""
    try:
        return None if args.out is None else check_new_file(args.out, args.force)
    except ValueError as e:
        raise SystemExit(f"error: {e}") from None


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


# --------------------------------------------------------------------------- output folders
#: the file that marks a folder as written by claw: ``{"claw": kind, "files": [names]}``
MARKER = ".claw-run.json"
_INTERNAL = (".lock", MARKER)


def _stale_temp(name: str) -> bool:
    """A temporary file :func:`atomic_write` leaves when killed (``.<name>.<random>.tmp``)."""
    return name.startswith(".") and name.endswith(".tmp") and name.count(".") >= 3


def _plain_name(x) -> bool:
    """A file name inside the folder (a marker edited to list "../x" or "/etc" lists nothing outside it)."""
    return isinstance(x, str) and x not in ("", ".", "..") and "/" not in x and "\\" not in x and "\0" not in x


class OutputFolder:
    """An output folder that holds only what claw wrote there. The one rule of every command that
    writes a folder (``claw train``, ``claw reproduce``, ``claw pretrain``, the TRL engine):

    * a folder is used only when it is new, empty, or marked as claw's: :data:`MARKER` lists the files
      claw wrote there (a folder written before markers existed is recognised by ``legacy``);
    * a file the kit did not write is never deleted or overwritten, ``--force`` included: ``--force``
      replaces or removes only the files the marker lists;
    * the folder is checked before any work (:meth:`claim`) and again under its lock (:meth:`locked`);
      every file is written whole (:meth:`write`, through :func:`atomic_write`), its name recorded in
      the marker first, so a killed run leaves no file the next run would take for the user's.

    kind: what wrote it ("train", "trl", "reproduce", "pretrain"); own: the names of claw's files there
    now; foreign: the names of the others.
    """

    def __init__(self, path: Path, kind: str, what: str, names=(), legacy=None):
        self.path, self.kind, self.what = path, kind, what
        self.names, self._legacy = tuple(names), legacy
        self.marked_kind: Optional[str] = None
        self.listed: set = set()
        self.own: set = set()
        self.foreign: list = []

    # ------------------------------------------------------------------ checks
    @classmethod
    def claim(cls, folder, kind: str, force: bool = False, what: str = "output", names=(), legacy=None) -> "OutputFolder":
        """Check ``folder`` for a command of ``kind`` that will write ``names`` (more may follow through
        :meth:`write`) and return it; nothing is created yet. Raises ValueError (one line) for an empty
        name, a file, a folder that holds files claw did not write, a folder another kind of command wrote
        (unless ``force``), or a planned name that is taken by a file claw did not write.
        legacy: ``f(path) -> set of names`` (the kit's files in a folder written before markers existed)."""
        if folder is None or str(folder).strip() == "":
            raise ValueError(f"the {what} folder name is empty; give a folder (e.g. --out runs/mine)")
        p = Path(folder)
        self = cls(p, kind, what, names, legacy)
        self._check(force)
        return self

    def _scan(self) -> None:
        p = self.path
        self.marked_kind, self.listed, self.own, self.foreign = None, set(), set(), []
        if not p.exists():
            return
        entries = {e for e in os.listdir(p) if e not in _INTERNAL and not _stale_temp(e)}
        if (p / MARKER).exists():
            try:
                m = json.loads((p / MARKER).read_text(encoding="utf-8"))
                if not isinstance(m, dict) or not isinstance(m["files"], list):
                    raise TypeError("not a marker")
                self.marked_kind, self.listed = str(m["claw"]), {x for x in m["files"] if _plain_name(x)}
            except (OSError, ValueError, KeyError, TypeError):
                raise ValueError(f"{p}/{MARKER} cannot be read: claw cannot tell its files from yours there; "
                                 "choose another folder") from None
        elif entries and self._legacy is not None:
            self.listed = set(self._legacy(p))
            if self.listed:
                self.marked_kind = self.kind
        self.own = entries & self.listed
        self.foreign = sorted(entries - self.listed)

    def _check(self, force: bool) -> None:
        p, what = self.path, self.what
        if p.exists() and not p.is_dir():
            raise ValueError(f"the {what} folder {p} is a file; give a folder")
        self._scan()
        if self.foreign and self.marked_kind is None:
            shown = ", ".join(self.foreign[:3]) + (", ..." if len(self.foreign) > 3 else "")
            raise ValueError(f"the {what} folder {p} holds files claw did not write ({shown}); choose a new or empty "
                             "folder (claw never deletes or replaces them, --force included)")
        if self.marked_kind not in (None, self.kind) and self.own and not force:
            raise ValueError(f"the {what} folder {p} holds the output of another claw command ({self.marked_kind}); "
                             "choose another folder or pass --force to replace it")
        taken = [n for n in self.names if n in self.foreign]
        if taken:
            raise ValueError(f"{p}/{taken[0]} exists and claw did not write it; move it away or choose another folder")

    @property
    def used(self) -> bool:
        """Whether the folder holds files claw wrote (results, a run, a checkpoint)."""
        return bool(self.own)

    # ------------------------------------------------------------------ writing
    @contextlib.contextmanager
    def locked(self, force: bool = False):
        """Hold the folder's lock (:class:`FolderLock`) for the block, check the folder again under it,
        and remove stale temporary files of killed writers. A folder created here that ends up holding
        nothing but the lock is removed again (a refused or interrupted run leaves no trace)."""
        created = not self.path.exists()
        try:
            with FolderLock(self.path):
                self._check(force)
                for e in os.listdir(self.path):
                    if _stale_temp(e):
                        with contextlib.suppress(OSError):
                            os.unlink(self.path / e)
                yield self
        finally:
            if created and self.path.is_dir() and set(os.listdir(self.path)) <= set(_INTERNAL):
                with contextlib.suppress(OSError):
                    for n in _INTERNAL:
                        with contextlib.suppress(FileNotFoundError):
                            os.unlink(self.path / n)
                    self.path.rmdir()

    def register(self, *names: str) -> None:
        """Record ``names`` in the marker as claw's (before they are written). Refuses a name taken by a
        file claw did not write."""
        for n in names:
            if n not in self.listed and (n in self.foreign or os.path.lexists(self.path / n)):
                raise ValueError(f"{self.path}/{n} exists and claw did not write it; move it away or choose "
                                 "another folder")
        if set(names) <= self.listed and self.marked_kind == self.kind and (self.path / MARKER).exists():
            return
        self.listed |= set(names)
        self._write_marker()

    def _write_marker(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        self.marked_kind = self.kind
        with atomic_write(self.path / MARKER) as f:
            f.write(json.dumps({"claw": self.kind, "files": sorted(self.listed)}, indent=1) + "\n")

    @contextlib.contextmanager
    def write(self, name: str, mode: str = "w", **kw):
        """:func:`atomic_write` of ``<folder>/<name>``, the name recorded in the marker first."""
        self.register(name)
        with atomic_write(self.path / name, mode, **kw) as f:
            yield f
        self.own.add(name)

    def remove_own(self, keep=()) -> None:
        """Delete the files (and folders) claw wrote here, except ``keep``; the others stay."""
        import shutil

        for n in sorted(self.listed - set(keep)):
            f = self.path / n
            if f.is_dir() and not f.is_symlink():
                shutil.rmtree(f)
            elif f.exists() or f.is_symlink():
                f.unlink()
        self.own &= set(keep)
        self.listed &= set(keep)
        if (self.path / MARKER).exists() or self.listed:
            self._write_marker()
