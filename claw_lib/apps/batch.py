"""Batch mode of ``claw align``, ``claw rewards`` and ``claw opd``: JSON Lines in, JSON Lines out, in one place.

:func:`read_jsonl` reads one record per line (or the line's error), :func:`write_jsonl` writes one JSON line per
input line (a record's result, or ``{"line": k, "error": ...}``) whole or not at all, :func:`file_in` /
:func:`file_out` check the files before any work (an output is never an input, a folder or an existing file
without ``--force``), :func:`to_json` writes valid JSON only (no NaN), and :func:`prefetch` embeds a batch's texts
in a few padded passes before the per-line loop.
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Optional

from ..config import AlignConfig
from ..signals.reviser import revised_rewards
from ..signals.rewards import token_rewards
from ..text.corrections import clean_correction
from ..text.tokens import tokenize
from ..utils import atomic_write, check_out_file
from .flags import CLIError

__all__ = ["read_jsonl", "write_jsonl", "file_in", "file_out", "to_json", "finite", "prefetch", "revised_lines"]


def prefetch(enc, records: list, cfg: AlignConfig, clean: bool = False) -> None:
    """Embed every text of a batch in a few padded passes before the per-pair loop reads them (the
    corrections as the rewards will see them: cleaned). Texts that would fail (too many characters or
    words, not valid Unicode) are left to their line, which reports it without embedding them first."""
    texts = []
    for r in records:
        if isinstance(r, dict) and all(len(r[f]) <= cfg.max_chars for f in ("output", "correction")):
            try:
                pair = [r["output"], clean_correction(r["correction"]).text if clean else r["correction"]]
                if all(len(tokenize(t, cfg.max_chars)) <= cfg.max_words for t in pair):
                    texts += pair
            except ValueError:
                continue
    try:
        enc.prefetch([t for t in texts if _valid_unicode(t)], cfg.layer)
    except ValueError:  # one bad text among many: the per-line calls report it
        pass


def revised_lines(entries: list, strategy: str, reviser, cfg, encoder):
    """``claw rewards --reviser``'s batch: the rules read every record line by line (a line that fails becomes that
    line's error text in ``entries``, in place), then the reviser revises the others in batches
    (:func:`claw_lib.signals.reviser.revised_rewards`). Returns the per-record function :func:`write_jsonl` calls."""
    rules = {}
    for k, r in enumerate(entries):
        if isinstance(r, dict):
            try:
                rules[k] = token_rewards(r["output"], r["correction"], strategy, cfg, encoder=encoder,
                                         question=r.get("question"))
            except (ValueError, TypeError) as e:
                entries[k] = str(e).splitlines()[0]
    ok = sorted(rules)
    done = revised_rewards([entries[k] for k in ok], strategy, reviser, cfg, encoder, rules=[rules[k] for k in ok])
    by_record = {id(entries[k]): tr for k, tr in zip(ok, done)}
    return lambda r: by_record[id(r)].to_dict()


def file_in(path: str) -> Path:
    p = Path(path)
    if not p.exists():
        raise CLIError(f"input file {p} does not exist")
    if p.is_dir():
        raise CLIError(f"input {p} is a folder, not a file")
    return p


def file_out(path: str, force: bool, inputs=(), what: str = "--out") -> Path:
    """An output file, checked before any work and again when written, by the rule of every writer
    (:func:`claw_lib.utils.check_out_file`): not a folder, not an input, not a special file (anything under
    /proc or /sys but the process's own streams, a device), not an existing file unless ``force``, in a
    folder that exists and can be written. ``/dev/stdout``, ``/proc/self/fd/N`` and ``/dev/null`` need no
    --force: they are written through, never replaced (``atomic_write``)."""
    p = Path(path)
    try:
        check_out_file(p, force, inputs, what)
    except ValueError as e:
        raise CLIError(str(e)) from None
    if not p.parent.exists():
        raise CLIError(f"{what} {p}: the folder {p.parent} does not exist")
    return p


def read_jsonl(path: str, fields, optional=(), choices=None) -> list:
    """One entry per line of ``path``: the record (a dict with string ``fields``, and ``optional`` fields
    that are strings or null when present), or an error text naming what is wrong with that line (blank,
    not JSON, nested too deeply, missing fields, an enumerated field whose value is not one of
    ``choices[field]`` when present: ``"role": "Tool"`` is that line's error, never read as "user"). A file
    that is not UTF-8 is refused naming the line; a UTF-8 byte-order mark at its start is skipped."""
    raw = file_in(path).read_bytes()
    if raw.startswith(b"\xef\xbb\xbf"):  # a BOM (Windows editors write one): valid UTF-8, not part of the JSON
        raw = raw[3:]
    entries = []
    for k, line in enumerate(raw.split(b"\n"), 1):
        if k == raw.count(b"\n") + 1 and not line.strip():  # the newline at the end of the last line
            break
        try:
            text = line.decode("utf-8").rstrip("\r")
        except UnicodeDecodeError as e:
            raise CLIError(f"{path}:{k}: not UTF-8 text (byte {e.start}); save the file as UTF-8") from None
        if not text.strip():
            entries.append("blank line")
            continue
        try:
            r = json.loads(text)
        except json.JSONDecodeError as e:
            entries.append(f"not valid JSON ({e.msg})")
            continue
        except RecursionError:
            entries.append("not valid JSON here (nested too deeply)")
            continue
        if not isinstance(r, dict) or not all(isinstance(r.get(f), str) for f in fields):
            entries.append("needs string fields " + " and ".join(repr(f) for f in fields))
            continue
        bad = [f for f in optional if r.get(f) is not None and not isinstance(r[f], str)]
        if bad:
            entries.append(f"{bad[0]!r} must be a string (or left out), got {type(r[bad[0]]).__name__}")
            continue
        lone = [f for f in (*fields, *optional) if isinstance(r.get(f), str) and not _valid_unicode(r[f])]
        if lone:  # "\ud800" in the JSON: a lone surrogate, which no tokenizer reads (IN07)
            entries.append(f"{lone[0]!r} is not valid Unicode (a lone surrogate such as \\ud800)")
            continue
        wrong = [f for f, ok in (choices or {}).items() if f in r and r[f] not in ok]
        if wrong:
            f = wrong[0]
            entries.append(f"{f!r} must be one of {', '.join(map(repr, choices[f]))} (or left out), got "
                           f"{json.dumps(r[f], ensure_ascii=False)}")
            continue
        entries.append(r)
    return entries


def _valid_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def write_jsonl(entries: list, fn, in_path: str, out_path: Optional[str], force: bool, desc: str) -> int:
    """``fn(record)`` -> dict, one JSON line per input line (``{"line": k, "error": ...}`` for a line
    that is not a record or whose record fails), to ``out_path`` (written whole, renamed at the end)
    or stdout, with a progress bar. Exit code 0 when every line worked, 1 when some gave errors."""
    from tqdm.auto import tqdm  # lazy: tqdm.auto looks for a notebook (IPython)

    target = file_out(out_path, force, [in_path]) if out_path else None
    lines, failed = [], 0
    for k, r in enumerate(tqdm(entries, desc=desc, unit="pair", file=sys.stderr, disable=None), 1):
        if isinstance(r, str):
            out = {"line": k, "error": r}
        else:
            try:
                out = fn(r)
            except (ValueError, TypeError) as e:
                out = {"line": k, "error": str(e).splitlines()[0]}
        failed += "error" in out
        lines.append(to_json(out))
    if target is None:
        sys.stdout.write("".join(ln + "\n" for ln in lines))
    else:
        with atomic_write(target, replace=force) as f:  # a file made meanwhile is kept without --force
            f.write("".join(ln + "\n" for ln in lines))
    if failed:
        print(f"claw {desc}: {failed} of {len(entries)} lines failed; their output lines hold the error and the line "
              "number", file=sys.stderr)
    return 1 if failed else 0


def finite(x):
    """``x`` with every NaN / inf float replaced by None (JSON has no such numbers)."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [finite(v) for v in x]
    return x


def to_json(obj) -> str:
    """One line of valid JSON (``allow_nan=False``: a non-finite number is written as null, never as the
    ``NaN`` / ``-Infinity`` that JSON parsers reject)."""
    try:
        return json.dumps(obj, ensure_ascii=False, allow_nan=False)
    except ValueError:
        return json.dumps(finite(obj), ensure_ascii=False, allow_nan=False)
