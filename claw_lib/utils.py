"""Small shared helpers: cache folder, device choice, seeding (notebook 00), and safe outputs (files
written whole or not at all, locked run folders, no silent reuse of a folder that holds results, one rule for
every output file: :func:`check_out_file`)."""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import json
import math
import numbers
import os
import random
import re
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Optional

import numpy as np

__all__ = ["cache_dir", "resolve_device", "seed_everything", "stable_printing", "free_cpus", "set_threads",
           "atomic_write", "publish_report", "limits_section", "LIMITS_HEADING", "FolderLock",
           "FolderBusyError", "DeviceNotAvailableError", "check_new_file", "OutputFolder", "MARKER",
           "script_main", "disk_errors", "finite_array", "check_real", "is_stream", "own_stream", "special_file", "check_out_file", "add_report_args", "report_path",
           "mean_se"]


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
    import torch  # lazy: the bottom layer stays torch-free (claw --help, config, the rules)

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
    import torch  # lazy: the bottom layer stays torch-free (claw --help, config, the rules)

    n = threads if threads > 0 else free_cpus()
    torch.set_num_threads(n)
    return n


def release_freed_memory() -> bool:
    """Hand the memory freed since the last call back to the operating system (glibc's ``malloc_trim(0)``). glibc
    keeps what a thread frees in that thread's arena for reuse, so a server whose trainer, judge and request threads
    each allocate large tensors in turn grows its resident memory far past what it holds: a 0.5B server measured
    12.8 GB resident, 7.3 GB after one call. True where it ran (Linux with glibc), False elsewhere (a no-op)."""
    name = ctypes.util.find_library("c")
    if not name:
        return False
    try:
        ctypes.CDLL(name).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc (musl, macOS, Windows): nothing to call
        return False
    return True


def seed_everything(seed: int = 0, threads: int | None = 1) -> None:
    """Seed python, numpy and torch; optionally pin torch to ``threads`` CPU threads.

    One thread makes CPU float results bit-stable between runs, which nbval relies on.
    """
    import torch  # lazy: the bottom layer stays torch-free (claw --help, config, the rules)

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
    import torch  # lazy: the bottom layer stays torch-free (claw --help, config, the rules)

    def fmt(v):
        return f"{round(float(v), decimals) + 0.0:.{decimals}f}"

    np.set_printoptions(precision=decimals, suppress=True, formatter={"float": fmt})
    torch.set_printoptions(precision=decimals, sci_mode=False)


# --------------------------------------------------------------------------- safe outputs
class ModelNotAvailableError(RuntimeError):
    """A model was asked for that is not on this machine (the kit never downloads); also
    :class:`claw_lib.models.loading.ModelNotAvailableError`."""

    __module__ = "claw_lib.models.loading"  # its name where every caller imports it from


class DeviceNotAvailableError(RuntimeError):
    """A device was asked for that this machine does not have (``device="cuda"`` without a GPU)."""


#: the process's own streams and the null device: written straight through, never replaced, no --force needed
_OWN_STREAM = re.compile(r"^/dev/(stdout|stderr|null|tty)$|^/dev/fd/\d+$|^/proc/(self|thread-self|{pid})/fd/\d+$")
#: kernel interfaces: a path there is a process or kernel setting, never an output file
_KERNEL = ("/proc/", "/sys/")


def own_stream(path) -> bool:
    """Whether ``path`` names one of the process's own streams by its spelling or by a chain of symlinks to
    one: ``/dev/stdout``, ``/dev/stderr``, ``/dev/fd/N``, ``/proc/self/fd/N`` (or ``/proc/<this pid>/fd/N``),
    and ``/dev/null`` / ``/dev/tty``. Only these are written through without ``--force``."""
    pat = re.compile(_OWN_STREAM.pattern.replace("{pid}", str(os.getpid())))
    p = os.path.abspath(str(path))
    for _ in range(40):  # a chain of links (a loop ends here)
        if pat.match(p):
            return True
        if not os.path.islink(p):
            return False
        p = os.path.abspath(os.path.join(os.path.dirname(p), os.readlink(p)))
    return False


def special_file(path) -> Optional[str]:
    """Why ``path`` is no place for an output (a phrase), or None: a path under /proc or /sys, or a device,
    by its name or through links, that is not one of the process's own streams (:func:`own_stream`).
    ``/proc/sys/kernel/hostname`` is a kernel setting and ``/proc/self/comm`` the process's name: writing a
    report there changes the system and keeps nothing."""
    if own_stream(path):
        return None
    for p in (os.path.abspath(str(path)), os.path.realpath(str(path))):
        if p.startswith(_KERNEL) or p in ("/proc", "/sys"):
            return f"is under /{p.split('/')[1]}, a kernel interface, not a file"
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "is a device, not a file (only /dev/stdout, /dev/stderr and /dev/null are written to)"
    return None


def is_stream(path) -> bool:
    """Whether ``path`` is written straight through rather than replaced by a new file: one of the process's
    own streams (:func:`own_stream`: ``/dev/stdout``, ``/proc/self/fd/N``, ``/dev/null``), or a FIFO or
    socket (followed through symlinks). A path under /proc or /sys or another device is no stream but a
    special file (:func:`special_file`), which no writer of the kit opens."""
    if own_stream(path):
        return True
    if special_file(path):
        return False
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def check_out_file(path, force: bool = False, inputs=(), what: str = "--out") -> Path:
    """The one rule for an output file of every writer (the CLI's ``--out``/``--html``/``--png``, the report
    scripts), checked before the work and again when written: refused (ValueError, one line naming ``what``)
    when empty, a folder, one of ``inputs``, a special file (:func:`special_file`), in a folder that does not
    exist or cannot be written, or an existing file unless ``force`` (a FIFO: ``--force`` writes into it).
    The process's own streams (``/dev/stdout``) need no ``--force``."""
    if path is None or str(path).strip() == "":
        raise ValueError(f"{what} is empty; give a file name")
    p = Path(path)
    why = special_file(p)
    if why:
        raise ValueError(f"{what} {p} {why}; give a file name")
    if p.is_dir():
        raise ValueError(f"{what} {p} is a folder; give a file name")
    if any(p.resolve() == Path(i).resolve() for i in inputs):
        raise ValueError(f"{what} {p} is the input file; write the results to another file")
    if own_stream(p):
        return p
    if (p.exists() or p.is_symlink()) and not force:
        kind = " (a FIFO: --force writes into it, never replaces it)" if is_stream(p) else ""
        raise ValueError(f"{what} {p} already exists{kind}; choose a new file or pass --force to replace it")
    if is_stream(p):
        return p
    parent = Path(os.path.realpath(p)).parent if p.is_symlink() else (p.parent if str(p.parent) else Path("."))
    if parent.exists() and not parent.is_dir():
        raise ValueError(f"{what} {p}: {parent} is a file, not a folder")
    if parent.exists():
        try:
            fd, probe = tempfile.mkstemp(prefix=".claw-probe.", dir=parent)
            os.close(fd)
            os.unlink(probe)
        except OSError as e:
            raise ValueError(f"{what} {p}: the folder {parent} cannot be written ({e.strerror})") from None
    return p


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def mean_se(values) -> tuple:
    """(mean, standard error of the mean) of ``values`` (n numbers; booleans count as 0/1): the standard error is
    the sample standard deviation (ddof 1) over sqrt(n); ``(nan, nan)`` for none, ``(mean, nan)`` for one. For 0/1
    values it is sqrt(m (1 - m) / (n - 1))."""
    xs = [float(v) for v in values]
    n = len(xs)
    if n == 0:
        return math.nan, math.nan
    m = sum(xs) / n
    if n == 1:
        return m, math.nan
    return m, math.sqrt(sum((x - m) ** 2 for x in xs) / (n - 1) / n)


@contextlib.contextmanager
def atomic_write(path, mode: str = "w", encoding: Optional[str] = "utf-8", newline: Optional[str] = None,
                 replace: bool = True):
    """Write ``path`` through a temporary file in the same folder, renamed over ``path`` only when
    the block finishes: a crash or Ctrl-C leaves the old file (or none), never half a file.

    A symlink is followed: its target is replaced and the link kept. A stream (:func:`is_stream`: a
    FIFO, ``/dev/stdout``, ``/dev/null``) is written straight through, never renamed over; a special file
    (:func:`special_file`: anything under /proc or /sys, another device) is refused (ValueError) before
    anything is written. ``replace=False`` never replaces a file: one that appeared meanwhile (after the
    writer checked the path) is kept and FileExistsError raised. A new file gets the usual permissions
    (0666 minus the umask), a replaced one keeps its own."""
    path = Path(path)
    kw = {} if "b" in mode else {"encoding": encoding, "newline": newline}
    why = special_file(path)
    if why:
        raise ValueError(f"{path} {why}; nothing was written")
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
        if replace:
            os.replace(tmp, target)
        else:
            _place_new(tmp, target)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if e.filename is None and e.errno is not None:  # a full disk in write(): name the file (OP05b)
            raise OSError(e.errno, e.strerror, str(target)) from e
        raise
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _place_new(tmp: str, target: Path) -> None:
    """Move ``tmp`` to ``target`` only if no file is there (a hard link fails on an existing name, atomically;
    where the file system has no hard links, the name is checked just before the rename)."""
    try:
        os.link(tmp, target)
    except FileExistsError:
        raise FileExistsError(f"{target} was created while the work ran; it is kept (pass --force to replace it)") \
            from None
    except OSError:
        if os.path.lexists(target):
            raise FileExistsError(f"{target} was created while the work ran; it is kept") from None
        os.replace(tmp, target)
        return
    os.unlink(tmp)


def publish_report(text: str, out=None, force: bool = False) -> None:
    """Print a Markdown report and, with ``out`` (checked by :func:`check_new_file` before the long work),
    write it there atomically, creating the folder, ending with exactly one newline (benchmarks, tools).
    The path is checked again at the write, and without ``force`` a file created meanwhile is never
    replaced: a refusal exits with one line ("error: ...", exit code 1) after the report is printed."""
    print(text)
    if out is not None:
        out = Path(out)
        try:
            check_new_file(out, force)
            out.parent.mkdir(parents=True, exist_ok=True)
            with atomic_write(out, replace=force or is_stream(out)) as f:
                f.write(text if text.endswith("\n") else text + "\n")
        except (ValueError, FileExistsError) as e:
            raise SystemExit(f"error: {e}") from None


#: the heading every result page under results/ closes with (tests/test_result_pages.py)
LIMITS_HEADING = "## What this does not establish"


def limits_section(limits, corrections=()) -> str:
    """The closing sections of a result page (results/**/*.md): :data:`LIMITS_HEADING` with one bullet per thing the
    measurement does not show, then, where a later run changed a reading, "## Corrections" with one dated bullet each
    (``corrections``: (date "YYYY-MM-DD", what changed)). Generators append it, so a regenerated page keeps both."""
    if not limits:
        raise ValueError("a result page needs at least one thing it does not establish")
    lines = [LIMITS_HEADING, ""] + [f"- {x}" for x in limits]
    if corrections:
        lines += ["", "## Corrections", ""] + [f"- {d}: {x}" for d, x in corrections]
    return "\n".join(lines)


@contextlib.contextmanager
def disk_errors(filename=None):
    """Turn the I/O errors of libraries that do not raise OSError into OSError (errno and file named), so a full
    disk is the one line every writer prints: safetensors' ``SafetensorError: Error while serializing: I/O
    error: No space left on device (os error 28)`` (``save_pretrained``, ``save_file``; OP07, ST02)."""
    try:
        yield
    except Exception as e:
        if type(e).__name__ != "SafetensorError":
            raise
        m = re.search(r"os error (\d+)", str(e))
        if m is None:
            raise OSError(f"{e} ({filename})" if filename else str(e)) from e
        code = int(m.group(1))
        raise OSError(code, os.strerror(code), None if filename is None else str(filename)) from e


def finite_array(name: str, values, ndim: int = 1) -> np.ndarray:
    """``values`` as a float64 array of ``ndim`` dimensions, or ValueError naming ``name`` and the first value that
    is not a finite number (NaN or inf would pass silently through every formula after it: R4-17, R4-19)."""
    try:
        a = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be an array of numbers, got {type(values).__name__}") from None
    if a.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-D array, got shape {a.shape}")
    bad = np.flatnonzero(~np.isfinite(a.ravel()))
    if bad.size:
        raise ValueError(f"{name} must hold finite numbers, got {a.ravel()[bad[0]]} at index {int(bad[0])}")
    return a


def check_real(name: str, value, lo: Optional[float] = None, hi: Optional[float] = None, lo_open: bool = False,
               integer: bool = False):
    """``value`` if it is a finite number in [lo, hi] (``lo_open``: (lo, hi]) and, with ``integer``, a whole one;
    otherwise ValueError (TypeError for a bool or a non-number) naming ``name``. The library's public numeric
    arguments pass through here (R4-18, R4-20, R4-22)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, got {value!r}")
    if integer and not float(value).is_integer():
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if not math.isfinite(value) or (lo is not None and (value < lo or (lo_open and value == lo))) \
            or (hi is not None and value > hi):
        rng = f"{'(' if lo_open else '['}{'-inf' if lo is None else lo}, {'inf' if hi is None else hi}]"
        raise ValueError(f"{name} must be a finite number in {rng}, got {value!r}")
    return value


class FolderLock:
    """An exclusive lock on an output folder (``<folder>/.lock``, flock) while a run writes to it;
    a second run on the same folder fails at once with :class:`FolderBusyError`."""

    def __init__(self, folder):
        self.folder = Path(folder)
        self._f = None

    def __enter__(self) -> "FolderLock":
        import fcntl  # lazy: fcntl is POSIX-only

        self.folder.mkdir(parents=True, exist_ok=True)
        # never truncated: a .lock of the user's keeps its bytes (OutputFolder refuses a folder holding one)
        self._f = os.fdopen(os.open(self.folder / ".lock", os.O_RDWR | os.O_CREAT, 0o666), "r+b")
        try:
            fcntl.flock(self._f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._f.close()
            raise FolderBusyError(f"another run is writing to {self.folder}; wait for it or choose another folder") from None
        return self

    def __exit__(self, *exc) -> None:
        import fcntl  # lazy: fcntl is POSIX-only

        fcntl.flock(self._f, fcntl.LOCK_UN)
        self._f.close()


class FolderBusyError(RuntimeError):
    """Another process holds the lock of an output folder."""


def check_new_file(path, force: bool = False, what: str = "--out") -> Path:
    """``path`` as a Path for a report about to be written (:func:`check_out_file`, the rule of every writer):
    refusing (ValueError, one line) a folder, a special file, or an existing file unless ``force``; check
    before the long work, write at the end with :func:`publish_report` (which checks again)."""
    return check_out_file(path, force, what=what)


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


def script_main(main, argv=None) -> int:
    """Run a script's ``main(argv)`` (the benchmarks, tools): a setting the library refuses (ValueError), a model
    or a device that is not there, or a folder another run holds exits with that one line ("error: ...", exit
    code 1) instead of a traceback (BM05, BM08, BM09)."""
    try:
        return main(argv) or 0
    except (ValueError, ModelNotAvailableError, DeviceNotAvailableError, FolderBusyError) as e:
        raise SystemExit(f"error: {str(e).splitlines()[0] if str(e) else type(e).__name__}") from None


# --------------------------------------------------------------------------- output folders
#: the file that marks a folder as written by claw: ``{"claw": kind, "files": [names]}``
MARKER = ".claw-run.json"
_INTERNAL = (".lock", MARKER)
#: the temporary file :func:`atomic_write` makes for ``<name>``: ``.<name>.<8 of mkstemp's characters>.tmp``
_TEMP = re.compile(r"^\.(?P<name>.+)\.[a-z0-9_]{8}\.tmp$")


def _stale_temp(name: str, listed) -> bool:
    """A temporary file a killed :func:`atomic_write` left for one of claw's files: the form atomic_write
    creates, for a name the marker lists (recorded before the file is written) or the marker itself. A user's
    ``.notes.v1.tmp`` is none (OP17)."""
    m = _TEMP.match(name)
    return bool(m) and (m["name"] in listed or m["name"] == MARKER)


def _own_lock(folder: Path) -> bool:
    """Whether ``folder/.lock`` is claw's lock: :class:`FolderLock` creates it empty and never writes to it,
    so a ``.lock`` with bytes in it is the user's file (OP18, OP19) and the folder holds a file claw did not
    write."""
    try:
        return os.lstat(folder / ".lock").st_size == 0 and not os.path.islink(folder / ".lock")
    except OSError:
        return True  # none there


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
        why = special_file(p)  # the output rule of every writer: no folder under /proc or /sys either
        if why:
            raise ValueError(f"the {what} folder {p} {why}; give a folder of your own")
        self = cls(p, kind, what, names, legacy)
        self._check(force)
        return self

    def _scan(self) -> None:
        p = self.path
        self.marked_kind, self.listed, self.own, self.foreign = None, set(), set(), []
        if not p.exists():
            return
        entries = set(os.listdir(p)) - {MARKER}
        if _own_lock(p):
            entries.discard(".lock")
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
        entries = {e for e in entries if not _stale_temp(e, self.listed)}
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
                    if _stale_temp(e, self.listed):
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
