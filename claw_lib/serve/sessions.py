"""Sessions and the next-state rule of OpenClaw-RL (notebook 14, docs/serve.md).

Only **main-line** turns are kept; side turns are served and forgotten. When main-line turn t+1 of a
session arrives, the last message of its ``messages`` (a user's reply or a tool's result) is the **next
state** of turn t: turn t becomes a sample to judge. A turn that never gets one yields no sample: the
last turn of a session that says it is done (``X-Session-Done``), and the open turn of a session that
has been silent for longer than the timeout.

Upstream's "at least one sample per session" rule (unmask one excluded turn with reward 0 when a
session gave no sample) is **not** followed: such a sample has advantage 0 on every token, so its only
effect would be to dilute the other samples of a sample-mean loss; a session without signal gives none.

Pure Python (no torch): :class:`SessionBook` is tested on its own (tests/serve/test_sessions.py).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

__all__ = ["Turn", "SessionBook", "SessionFinishedError", "turn_key", "STATUSES"]

#: where a main-line turn is: waiting for its next state, waiting for the judge, judged with a training signal,
#: judged without one, trained on, or never to give a sample (last turn of a finished or timed-out session)
STATUSES = ("awaiting_next_state", "judging", "scored", "excluded", "trained", "no_sample")


def turn_key(session_id: str, turn: int) -> str:
    """The id of a turn in the records and the buffer: ``"<session>#<turn>"``."""
    return f"{session_id}#{turn}"


@dataclass
class Turn:
    """One served main-line turn and what became of it.

    prompt_ids / response_ids: token ids (the response: the policy's actions, eos included when generated);
    rollout_log_probs: log pi_serve(y_t | ...) of each response token under the weights that wrote it
    (``policy_version``), nats; question / lang: what the teacher's prompt is built from when the model reads
    only the last message; next_state / next_role: the next main-line message of the session (None until it
    arrives); score, votes, hint: the judge's; signal: the per-token training signal (one float per response
    token) once judged; trained_version: the version the update that used it produced; finished: the answer ended
    (end of text or a stop) rather than at max_tokens.
    """

    session_id: str
    turn: int
    policy_version: int
    messages: List[dict]
    prompt_text: str
    response_text: str
    prompt_ids: List[int]
    response_ids: List[int]
    rollout_log_probs: List[float]
    timestamp: float
    question: str = ""
    lang: str = "en"
    tokens: List[str] = field(default_factory=list)
    next_state: Optional[str] = None
    next_role: Optional[str] = None
    status: str = "awaiting_next_state"
    score: Optional[int] = None
    votes: List[int] = field(default_factory=list)
    hint: Optional[str] = None
    signal: Optional[List[float]] = None
    mask: Optional[List[bool]] = None
    trained_version: Optional[int] = None
    finished: bool = True

    @property
    def key(self) -> str:
        return turn_key(self.session_id, self.turn)


class SessionFinishedError(ValueError):
    """A main-line turn for a session that already said it was done (HTTP 409)."""


@dataclass
class _Session:
    turns: List[str] = field(default_factory=list)
    open_key: Optional[str] = None  # the last turn, waiting for its next state
    done: bool = False
    last_seen: float = 0.0


class SessionBook:
    """Which turn of which session waits for a next state. Thread-safe.

    :meth:`open_turn` registers a new main-line turn and returns the previous turn that the new one's
    last message completes; :meth:`expire` ends the sessions silent for longer than a timeout.
    """

    def __init__(self):
        self._s: Dict[str, _Session] = {}
        self._lock = threading.Lock()

    def next_index(self, session_id: str) -> int:
        """The index the next main-line turn of ``session_id`` will get (0 for a new session);
        :class:`SessionFinishedError` when the session is done."""
        with self._lock:
            s = self._s.get(session_id)
            if s is not None and s.done:
                raise SessionFinishedError(f"session {session_id!r} is finished (it was sent with X-Session-Done); "
                                           "start a new session id")
            return len(s.turns) if s else 0

    def open_turn(self, session_id: str, key: str, done: bool, now: float) -> Tuple[Optional[str], Optional[str]]:
        """Register main-line turn ``key`` of ``session_id``. Returns (previous, ended): ``previous`` the key
        of the turn whose next state this turn's last message is (None for a session's first turn);
        ``ended`` this turn's own key when ``done`` (the last turn of a finished session: no sample)."""
        with self._lock:
            s = self._s.setdefault(session_id, _Session())
            if s.done:
                raise SessionFinishedError(f"session {session_id!r} is finished (it was sent with X-Session-Done); "
                                           "start a new session id")
            previous, s.open_key = s.open_key, key
            s.turns.append(key)
            s.last_seen = now
            ended = None
            if done:
                s.done, ended, s.open_key = True, key, None
            return previous, ended

    def expire(self, now: float, timeout_s: float) -> List[str]:
        """Close the open turn of every session silent for more than ``timeout_s`` seconds; returns their
        keys (no next state will come: no sample). The session itself may go on with a new turn."""
        out = []
        with self._lock:
            for s in self._s.values():
                if not s.done and s.open_key is not None and now - s.last_seen > timeout_s:
                    out.append(s.open_key)
                    s.open_key = None  # the session may go on; its silent turn gives no sample
        return out

    def is_done(self, session_id: str) -> bool:
        with self._lock:
            s = self._s.get(session_id)
            return bool(s and s.done)

    def turns(self, session_id: str) -> Optional[List[str]]:
        """The keys of the session's main-line turns, in order (None: unknown session)."""
        with self._lock:
            s = self._s.get(session_id)
            return list(s.turns) if s else None

    def open_count(self) -> int:
        with self._lock:
            return sum(not s.done for s in self._s.values())

    def close(self, key: str) -> None:
        """Close turn ``key`` if it is its session's open turn (resume: a timeout in the records)."""
        with self._lock:
            for s in self._s.values():
                if s.open_key == key:
                    s.open_key = None
