"""The live system: serving, next states, judging and training as four loops over sessions (notebook 14).

:class:`LiveSystem` holds the state the loops share and serves one chat request at a time
(:meth:`LiveSystem.serve`, called by the HTTP layer in :mod:`claw_lib.serve.app`). The other loops run in
their own threads (:mod:`claw_lib.serve.loops`) and never make a request wait:

1. **serve**   answer with the serving weights, record the turn and its rollout log-probs (``turns.jsonl``);
2. **next state** the last message of a session's next main-line turn completes the previous turn
               (``next_states.jsonl``), which goes to the judge's queue;
3. **judge**   the kit's stage 2 (:func:`claw_lib.rl.ppo.compute_signals`) on that one turn: Binary RL votes,
               the hint, the hinted teacher's log-probs on the student's own tokens -> a scored sample
               (``samples.jsonl``, with ``prm.jsonl`` / ``opd.jsonl`` in upstream's shapes);
4. **train**   a batch of scored samples -> stages 3 and 4 (advantages, the PPO update, with the truncated
               importance ratio for the lag) -> the new weights swapped into the server as version v+1
               (``checkpoint.pt`` first, then ``trained.jsonl``, ``metrics.csv``).

Everything is in the run folder as it happens; a restart of the same command resumes from it
(:mod:`claw_lib.serve.resume`): the same version, every scored sample kept, none trained twice.
"""
from __future__ import annotations

import contextlib
import queue
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional

from ..prompts import message_text
from ..signals.judges import make_judge
from ..utils import OutputFolder, set_threads
from .anchoring import anchor_status, serve_anchor
from .config import ServeConfig, check_serve_config
from .engine import Engine, Served
from .records import RECORD_FILES, JsonlLog
from .matching import SessionMatcher
from .resume import SERVE_FILES, prepare_folder  # the run folder: its files, its claim and resume
from .sessions import SessionBook, Turn, turn_key
from .versions import Versions

__all__ = ["LiveSystem", "ChatTurn", "SERVE_FILES"]

@dataclass
class ChatTurn:
    """A validated chat request: messages (role, content as text), the session headers, sampling settings."""

    messages: List[dict]
    session_id: Optional[str]
    turn_type: str
    session_done: bool
    temperature: float
    max_tokens: int
    params: Optional[object] = None  # serve.sampling.SamplingParams: every sampling setting; None: the two above
    no_session: bool = False  # main-looking without a session id (serve.matching): counted, and matched when asked
    version: Optional[int] = None  # a kept published version named in the request's model field (None: the live one)


class LiveSystem:
    """The shared state of the four loops and its run folder (``out``: None keeps everything in memory)."""

    def __init__(self, cfg: ServeConfig, out=None, force: bool = False):
        self.cfg = c = check_serve_config(cfg)
        # the one judge factory, once: a URL judge's endpoint is asked for /v1/models here, before any folder is
        # claimed or model loaded (R4-10); the judge loop takes this judge
        self.judge = make_judge(c.judge, c.judge_model, c.ppo.opd.m, c.ppo.device, c.ppo.seed, c.ppo.opd.hint_prompt)
        self._exit = contextlib.ExitStack()
        self.folder = self._claim(out, force)
        self.t0 = time.time()
        set_threads(cfg.ppo.threads)
        self.engine = Engine(cfg)
        self.ppo = self.engine.ppo  # the per-model settings resolved
        self.book = SessionBook()
        self.turns: Dict[str, Turn] = {}
        self.judge_queue: "queue.Queue[str]" = queue.Queue()
        self.buffer: List[str] = []  # scored, not yet trained: keys in arrival order
        self.cond = threading.Condition()
        self.counts = {"turns_served": 0, "side_turns_served": 0, "samples_trained": 0, "requests_without_session": 0}
        self.matcher = SessionMatcher(self, self.cfg.match_sessions)  # requests without a session id
        self.updates: List[dict] = []  # one per update: version, samples, time
        self.metrics: List[dict] = []
        self.events: List[dict] = []
        self.stopped_reason: Optional[str] = None
        self.failed_logs: set = set()
        self.last_update_s: Optional[float] = None
        self.last_update_duration_s: Optional[float] = None
        self.ckpt: Optional[dict] = None
        self.logs = {name: JsonlLog(self.folder.path / name, fsync=name != "events.jsonl")
                     for name in RECORD_FILES} if self.folder else {}
        if self.folder is not None:
            prepare_folder(self, force)

        self.versions = self.engine.versions = Versions(self.engine, self.folder.path if self.folder else None,
                                                        cfg.keep_versions, self.ppo, cfg.publish_gate)
        self.versions.start(self.engine.version)
        self.anchor = serve_anchor(self.engine, c.anchor, c.anchor_coef, self.ppo.max_new_tokens, self.ppo.micro_batch,
                                   c.anchor_steps)

    def _claim(self, out, force: bool):
        if out is None:
            return None
        folder = OutputFolder.claim(out, "serve", force, "server output", names=SERVE_FILES)
        self._exit.enter_context(folder.locked(force))  # held while the server runs: a second server is refused
        return folder

    # ------------------------------------------------------------------ records
    def log(self, name: str, record: dict) -> None:
        """Append to a record file the run can rebuild (next states, PRM / OPD records, the timeline): a failed
        write (a full disk) is reported once on stderr and repaired on restart, never an error of the request that
        caused it. ``turns.jsonl`` and ``samples.jsonl``, the commit points, are written by their callers."""
        if name not in self.logs:
            return
        try:
            self.logs[name].append(record)
        except OSError as e:
            if name not in self.failed_logs:
                self.failed_logs.add(name)
                print(f"claw serve: {e}; the record is rebuilt on restart", file=sys.stderr, flush=True)

    def commit(self, name: str, record: dict) -> None:
        """Append to a commit-point record file (``turns.jsonl``, ``samples.jsonl``): a failed write raises
        :class:`~claw_lib.serve.records.RecordWriteError` and the caller changes nothing."""
        if name in self.logs:
            self.logs[name].append(record)

    def event(self, kind: str, start: float, end: float, **kw) -> None:
        """One mark on the timeline (seconds since the server started)."""
        with self.cond:
            e = {"i": len(self.events), "kind": kind, "start": round(start - self.t0, 4),
                 "end": round(end - self.t0, 4), **kw}
            self.events.append(e)
        self.log("events.jsonl", e)

    # ------------------------------------------------------------------ 1. serve, 2. next states
    def serve(self, req: ChatTurn):
        """Answer ``req`` with the serving weights; a main-line turn is recorded and completes its session's
        previous turn. Returns (Served, turn index or None).

        A main turn is recorded and answered, or neither: its line in ``turns.jsonl`` is written before anything
        else changes (a failed write raises :class:`~claw_lib.serve.records.RecordWriteError` and leaves no trace).
        A main turn whose messages equal its session's last recorded turn's is a client's retry (of a request
        whose answer was lost, e.g. to a restart): it gets the recorded answer and records nothing (R4-08).
        A main-looking request without a session id is counted and, with ``match_sessions``, given its session
        first (:mod:`claw_lib.serve.matching`)."""
        if req.no_session:
            self.matcher.route(req)
        if req.turn_type != "main":
            return self._side(req), None
        retry = self.recorded_answer(req)
        if retry is not None:
            return retry
        self.book.next_index(req.session_id)  # refuses a finished session before any work
        task, t0, served = self._answer(req)
        with self.cond:
            retry = self.recorded_answer(req)  # the original of this retry was recorded while this one was decoded
            if retry is not None:
                return retry
            index = self.book.next_index(req.session_id)
            turn = Turn(req.session_id, index, served.version, req.messages, served.prompt_text, served.text,
                        served.prompt_ids, served.response_ids, served.rollout_log_probs, t0, task.question, task.lang,
                        served.tokens, finished=served.finished)
            self.commit("turns.jsonl", turn_record(turn, req.session_done))  # raises, changing nothing, on failure
            self.counts["turns_served"] += 1
            self.turns[turn.key] = turn
            previous, ended = self.book.open_turn(req.session_id, turn.key, req.session_done, t0)
            self.matcher.note(turn, req.session_done)
            if previous is not None:
                self.set_next_state(previous, req.messages[-1])
            if ended is not None:
                self.end_turn(ended, "session_done")
        self._served_event(req, t0, served, index)
        return served, index

    def _side(self, req: ChatTurn):
        """A side turn: served, counted, never recorded."""
        _, t0, served = self._answer(req)
        with self.cond:
            self.counts["side_turns_served"] += 1
        self._served_event(req, t0, served, None)
        return served

    def _served_event(self, req: ChatTurn, t0: float, served, index: Optional[int]) -> None:
        """The timeline's mark of a served request (``no_session``: it came without a session id)."""
        self.event("served", t0, time.time(), session_id=req.session_id, turn=index, version=served.version,
                   turn_type="main" if index is not None else "side", **({"no_session": True} if req.no_session else {}))

    def _answer(self, req: ChatTurn):
        """(the task, the start time, the Served answer) of ``req`` from the serving copy; nothing recorded."""
        task = self.engine.task(req.messages)
        t0 = time.time()
        seed = self.ppo.seed * 100_003 + self.counts["turns_served"] + self.counts["side_turns_served"]
        return task, t0, self.engine.answer(task, req.temperature, req.max_tokens, seed, req.params, req.version)

    def recorded_answer(self, req: ChatTurn):
        """(Served, turn index) of the session's last recorded turn when ``req`` repeats its messages while that
        turn is still the session's last word (waiting for its next state, or ending a finished session): a retry.
        Else None; a turn closed by the session's timeout may be asked again as a new turn."""
        keys = self.book.turns(req.session_id)
        t = self.turns.get(keys[-1]) if keys else None
        if t is None or t.messages != req.messages or \
                not (t.status == "awaiting_next_state" or self.book.is_done(req.session_id)):
            return None
        return Served(t.policy_version, t.prompt_text, t.prompt_ids, t.response_ids, t.response_text,
                      t.rollout_log_probs, t.tokens, t.finished), t.turn

    def set_next_state(self, key: str, message: dict, record: bool = True, queue: bool = True) -> None:
        """The next main-line message of the session becomes ``key``'s next state; the turn goes to the judge."""
        t = self.turns[key]
        t.next_state, t.next_role, t.status = message_text(message.get("content")), message.get("role"), "judging"
        if record:
            self.log("next_states.jsonl", {"session_id": t.session_id, "turn": t.turn, "next_state": t.next_state,
                                           "role": t.next_role, "timestamp": time.time()})
        if queue:
            self.judge_queue.put(key)

    def end_turn(self, key: str, reason: str, record: bool = True) -> None:
        """``key`` will get no next state (the session is done or timed out): no sample."""
        t = self.turns[key]
        t.status = "no_sample"
        if record:
            self.log("next_states.jsonl", {"session_id": t.session_id, "turn": t.turn, "next_state": None,
                                           "reason": reason, "timestamp": time.time()})

    def expire_sessions(self) -> None:
        """Close the open turn of every session silent for longer than the timeout (judge loop, every second)."""
        for key in self.book.expire(time.time(), self.cfg.session_timeout_s):
            with self.cond:
                self.end_turn(key, "timeout")

    # ------------------------------------------------------------------ views
    def status(self) -> dict:
        """``GET /v1/claw/status`` (API.md)."""
        with self.cond:
            by = {}
            for t in self.turns.values():
                by[t.status] = by.get(t.status, 0) + 1
            training = "stopped" if self.stopped_reason else ("running" if self.cfg.train else "off")
            # the version of the last recorded update: the swap comes before the counts (serve.resume.commit_update),
            # so the engine's own version could show an update whose samples are not yet counted as trained
            version = self.updates[-1]["version"] if self.updates else self.engine.version
            return {"policy_version": version, **self.counts,
                    "samples_pending": by.get("awaiting_next_state", 0) + by.get("judging", 0),
                    "samples_judging": by.get("judging", 0),
                    "samples_scored": by.get("scored", 0), "samples_excluded": by.get("excluded", 0),
                    "last_update_s": self.last_update_s, "last_update_duration_s": self.last_update_duration_s,
                    "updates": len(self.updates), "training": training, "stopped_reason": self.stopped_reason,
                    "strategy": self.ppo.strategy,
                    "model": self.model_id, "sessions_open": self.book.open_count(), "batch_size": self.ppo.batch_size,
                    "match_sessions": self.cfg.match_sessions, "prefix_cache": self.engine.batcher.prefix.stats(),
                    "anchor": anchor_status(self.anchor, self.cfg.anchor, self.metrics),
                    "metrics": dict(self.metrics[-1]) if self.metrics else {}, "uptime_s": round(time.time() - self.t0, 3),
                    **self.versions.status(self.updates)}

    def session_view(self, session_id: str) -> Optional[dict]:
        """``GET /v1/claw/sessions/{id}`` (API.md); None for an unknown session."""
        keys = self.book.turns(session_id)
        if keys is None:
            return None
        with self.cond:
            return {"session_id": session_id, "done": self.book.is_done(session_id),
                    "turns": [turn_view(self.turns[k]) for k in keys]}

    @property
    def model_id(self) -> str:
        return self.cfg.ppo.model

    def close(self) -> None:
        for log in self.logs.values():
            log.close()
        self._exit.close()


def turn_record(t: Turn, done: bool) -> dict:
    """A turn as ``turns.jsonl`` holds it (upstream's turn record plus the kit's ids, log-probs and version)."""
    return {"session_id": t.session_id, "turn": t.turn, "timestamp": t.timestamp, "messages": t.messages,
            "prompt_text": t.prompt_text, "response_text": t.response_text, "tool_calls": [], "next_state": None,
            "policy_version": t.policy_version, "prompt_ids": t.prompt_ids, "response_ids": t.response_ids,
            "rollout_log_probs": t.rollout_log_probs, "question": t.question, "lang": t.lang, "tokens": t.tokens,
            "session_done": done, "finished": t.finished}


def turn_view(t: Turn) -> dict:
    """A turn for the page: its tokens and, once judged, one signal value per token."""
    return {"turn": t.turn, "policy_version": t.policy_version, "prompt_text": t.prompt_text,
            "response_text": t.response_text, "tokens": t.tokens, "status": t.status, "next_state": t.next_state,
            "score": t.score, "votes": t.votes, "hint": t.hint, "advantages": t.signal,
            "trained_version": t.trained_version}


def key_of(record: dict) -> str:
    return turn_key(record["session_id"], int(record["turn"]))


def run_folder(system: LiveSystem) -> Optional[Path]:
    return system.folder.path if system.folder is not None else None
