"""Append-only JSONL logs that survive ``kill -9`` (the live server's records, notebook 14).

Every record is one line, written with one ``write`` call, flushed and fsync'ed before the call returns,
so a record the server acted on is on disk. A process killed in the middle of a write leaves at most one
torn last line; :meth:`JsonlLog.read` drops it (and cuts it off the file, so the next append starts on a
fresh line). Nothing else is ever rewritten.
"""
from __future__ import annotations

import contextlib
import json
import os
import threading
from pathlib import Path
from typing import Iterator, List

__all__ = ["JsonlLog", "RECORD_FILES", "RecordWriteError"]

#: the live server's logs: name -> what one line holds (docs/serve.md maps them onto upstream's shapes)
RECORD_FILES = {
    "turns.jsonl": "a served main-line turn: session_id, turn, timestamp, messages, prompt_text, response_text, "
                   "tool_calls, policy_version, prompt_ids, response_ids, rollout_log_probs, session_done",
    "next_states.jsonl": "the next state of a turn (the next main-line message of its session: text and role), or "
                         "its end without one (the session finished or timed out: next_state null, reason)",
    "prm.jsonl": "the judge's Binary RL votes of a turn: session_id, turn, score, votes, representative_eval",
    "opd.jsonl": "the hint judge's verdict of a turn: session_id, turn, accepted, hint, hint_len, votes, "
                 "teacher_logprob_len",
    "samples.jsonl": "a judged turn as a training sample: its per-token signal and loss mask, or excluded",
    "trained.jsonl": "one update: the version it produced and the samples it trained on",
    "events.jsonl": "the timeline: served / judged / trained, with start and end (s since the server started)",
}


class RecordWriteError(OSError):
    """A record that could not be written (``errno`` ENOSPC: no space left on device); the file is as before."""


class JsonlLog:
    """One append-only JSONL file; thread-safe appends.

    path: the file (created on the first append); ``fsync``: make every line durable before
    :meth:`append` returns (off only for logs whose loss costs nothing, such as the timeline).
    """

    def __init__(self, path, fsync: bool = True):
        self.path = Path(path)
        self.fsync = fsync
        self._lock = threading.Lock()
        self._f = None

    def append(self, record: dict) -> None:
        """Write ``record`` as one line (ensure_ascii off: Chinese stays readable), whole or not at all: a write
        that fails (a full disk) is cut off the file again and raises :class:`RecordWriteError` naming the file,
        so no torn line and no line written later by a buffer is left behind (R4-27)."""
        line = (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
        with self._lock:
            if self._f is None:
                self._f = open(self.path, "ab", buffering=0)  # unbuffered: nothing waits to be written later
            size = os.fstat(self._f.fileno()).st_size
            try:
                view = memoryview(line)
                while view:
                    view = view[self._f.write(view):]
                if self.fsync:
                    os.fsync(self._f.fileno())
            except OSError as e:
                with contextlib.suppress(OSError):
                    os.ftruncate(self._f.fileno(), size)
                raise RecordWriteError(e.errno, f"{self.path} could not be written ({e.strerror or e})") from e

    def read(self) -> List[dict]:
        """Every complete record, in order. A last line without its newline is the torn tail of a killed
        write (:meth:`append` writes line and newline at once and had not returned): it is dropped and cut
        off the file. A malformed line elsewhere is an error naming the file and the line."""
        with self._lock:
            if not self.path.exists():
                return []
            raw = self.path.read_bytes()
            lines = raw.split(b"\n")
            tail = lines.pop()  # b"" when the file ends with a newline
            out = []
            for k, line in enumerate(lines):
                if not line.strip():
                    continue
                try:
                    out.append(json.loads(line.decode("utf-8")))
                except (ValueError, UnicodeDecodeError):
                    raise ValueError(f"{self.path} line {k + 1} is not a JSON record; it was not written by "
                                     "claw serve") from None
            if tail:
                with open(self.path, "r+b") as f:
                    f.truncate(len(raw) - len(tail))
            return out

    def __iter__(self) -> Iterator[dict]:
        return iter(self.read())

    def close(self) -> None:
        with self._lock:
            if self._f is not None:
                self._f.close()
                self._f = None

