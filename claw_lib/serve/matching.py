"""Requests without a session id: counted, warned about once, and (``--match-sessions``) matched to a session.

Upstream's rule makes a chat request without ``X-Session-Id`` a side turn: served, never recorded, never trained.
A client that does not forward the header (many agent frameworks; upstream's issues 31 and 36) then trains on
nothing. A request is **main-looking** when it is a side turn only for that reason: no session id, no turn type
(header ``X-Turn-Type`` or body ``turn_type``), and its last message is a user's or a tool's, as a main-line
turn's must be. Every main-looking request is counted (``requests_without_session`` in the status) and the first
one of a server process prints one warning line on stderr.

With ``ServeConfig.match_sessions`` a main-looking request becomes a main-line turn (as Reef does):

1. **a retry**: its messages equal a session's last recorded turn's, while that turn may still be retried
   (:meth:`~claw_lib.serve.system.LiveSystem.recorded_answer`): that session, which answers from its records;
2. **extends**: its messages start with a session's transcript, the last turn's messages plus the answer the
   server gave (compared by role and stripped text), followed by at least one more message: that session (the
   longest such transcript; of sessions with the same transcript, the one that has waited longest);
3. **else a new session**, id ``auto-<12 hex digits>``, whose first turn is this request.

The session id is written into the request, so the answer's ``claw`` field names it. Only each session's *last*
turn is indexed, so a conversation that branches (a regenerated or edited message) starts a new session, and a
finished session (``X-Session-Done``) is never extended. Two conversations identical so far cannot be told apart
until they differ: the second one's request is answered as the first one's retry. The index is rebuilt from the
records on restart (``turns.jsonl``), the counter from the timeline (``events.jsonl``: a served event with
``"no_session": true``).

Pure Python (no torch); each lookup hashes the request's messages once (sha256, one pass).
"""
from __future__ import annotations

import hashlib
import json
import sys
import threading
import uuid
from typing import Dict, List, Optional

__all__ = ["SessionMatcher", "main_looking", "transcript_digest", "WARNING_NO_SESSION"]

#: the one line printed on stderr the first time a main-looking request comes without a session id
WARNING_NO_SESSION = ("claw serve: warning: a chat request came without a session id (header X-Session-Id or body "
                      "field session_id); {what}. Send X-Session-Id with every main-line turn{hint} (docs/serve.md, "
                      "'Requests without a session id'); GET /v1/claw/status counts them as requests_without_session")


def main_looking(session_id: Optional[str], turn_type: Optional[str], messages: List[dict]) -> bool:
    """True for a request that is a side turn only because it has no session id: no session id, no turn type
    given, and the last message is a user's or a tool's."""
    return session_id is None and not turn_type and bool(messages) and messages[-1].get("role") in ("user", "tool")


def _line(m: dict) -> bytes:
    return (json.dumps([m.get("role"), str(m.get("content") or "").strip()], ensure_ascii=False) + "\n").encode()


def transcript_digest(messages: List[dict]) -> str:
    """The hex sha256 of a list of messages (role and stripped text, in order)."""
    h = hashlib.sha256()
    for m in messages:
        h.update(_line(m))
    return h.hexdigest()


def _prefix_digests(messages: List[dict]) -> List[tuple]:
    """(k, digest of messages[:k]) for every k < len(messages) where messages[k-1] is an assistant's, longest
    first: the transcripts the request may extend."""
    h, out = hashlib.sha256(), []
    for k, m in enumerate(messages[:-1], start=1):
        h.update(_line(m))
        if m.get("role") == "assistant":
            out.append((k, h.copy().hexdigest()))
    return out[::-1]


class SessionMatcher:
    """The counter, the one-time warning and the transcript index of one :class:`LiveSystem` (thread-safe).

    ``extends``: digest of a session's transcript (last turn's messages + its answer) -> session ids, oldest first;
    ``repeats``: digest of a session's last turn's messages -> session ids. Maintained only with ``enabled``.
    """

    def __init__(self, system, enabled: bool):
        self.system, self.enabled = system, enabled
        self.warned = False
        self._lock = threading.Lock()
        self._extends: Dict[str, List[str]] = {}
        self._repeats: Dict[str, List[str]] = {}
        self._last: Dict[str, tuple] = {}  # session id -> (extends digest, repeats digest) of its last turn

    # ------------------------------------------------------------------ the index
    def note(self, turn, done: bool) -> None:
        """``turn`` is now its session's last turn (``done``: the session is finished, so it is not extended)."""
        if not self.enabled:
            return
        sid = turn.session_id
        transcript = list(turn.messages) + [{"role": "assistant", "content": turn.response_text}]
        new = (None if done else transcript_digest(transcript), transcript_digest(turn.messages))
        with self._lock:
            for index, old in zip((self._extends, self._repeats), self._last.pop(sid, (None, None))):
                if old is not None and sid in index.get(old, ()):
                    index[old].remove(sid)
                    if not index[old]:
                        del index[old]
            for index, d in zip((self._extends, self._repeats), new):
                if d is not None:
                    index.setdefault(d, []).append(sid)
            self._last[sid] = new

    def rebuild(self) -> None:
        """After a restart: the index from the replayed turns, the counter from the replayed timeline."""
        s = self.system
        s.counts["requests_without_session"] = sum(bool(e.get("no_session")) for e in s.events
                                                   if e.get("kind") == "served")
        for sid in {t.session_id for t in s.turns.values()}:
            keys = s.book.turns(sid)
            if keys:
                self.note(s.turns[keys[-1]], s.book.is_done(sid))

    def match(self, messages: List[dict]) -> Optional[str]:
        """The session a request of ``messages`` belongs to (rules 1 and 2 of the module's docstring), or None."""
        with self._lock:
            retry = list(self._repeats.get(transcript_digest(messages), ()))
            extends = [(k, list(self._extends[d])) for k, d in _prefix_digests(messages) if d in self._extends]
        for sid in retry:
            if self._may_retry(sid, messages):
                return sid
        return extends[0][1][0] if extends else None

    def _may_retry(self, sid: str, messages: List[dict]) -> bool:
        s = self.system
        keys = s.book.turns(sid)
        t = s.turns.get(keys[-1]) if keys else None
        return t is not None and t.messages == messages and \
            (t.status == "awaiting_next_state" or s.book.is_done(sid))

    # ------------------------------------------------------------------ a request
    def route(self, req) -> None:
        """Count a main-looking request, warn once and, when enabled, make it a main-line turn of the session it
        belongs to or of a new one (``req.session_id`` and ``req.turn_type`` set in place)."""
        s = self.system
        with s.cond:
            s.counts["requests_without_session"] += 1
            sid = self.match(req.messages) if self.enabled else None
            first, self.warned = not self.warned, True
        if self.enabled:
            req.session_id, req.turn_type = sid or f"auto-{uuid.uuid4().hex[:12]}", "main"
        if first:
            what = (f"--match-sessions made it a main-line turn of session {req.session_id!r} "
                    f"({'matched by its transcript' if sid else 'a new session'})" if self.enabled else
                    "it was served as a side turn, which is never recorded or trained")
            hint = "" if self.enabled else ", or start the server with --match-sessions"
            print(WARNING_NO_SESSION.format(what=what, hint=hint), file=sys.stderr, flush=True)
