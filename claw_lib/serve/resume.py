"""The live server's run folder: what an update commits, and how a restart picks up (``kill -9`` at any moment).

The commit points, in the order they happen:

* a turn exists once its line is in ``turns.jsonl`` (the answer was not sent before);
* a next state is the last message of the session's next turn, which ``turns.jsonl`` holds: it is derived
  again on a restart, so it cannot be lost (``next_states.jsonl`` is its readable log, repaired on restart);
* a judged sample exists once its line is in ``samples.jsonl`` (``prm.jsonl`` / ``opd.jsonl`` are written from
  it next, and repaired on restart);
* with PEFT adapters, a version's adapter folder ``adapters/v{N}`` is written (whole, then renamed) before the
  checkpoint that names it; a restart removes the folder of a version its checkpoint never reached
  (:mod:`claw_lib.serve.versions`);
* an update exists once ``checkpoint.pt`` holds it (written whole, then renamed): the trained tensors, the
  optimizer, the version and the list of every update with its samples (an update that was not published keeps
  the version and says why, ``skipped``). Only then are the weights swapped into the server and ``trained.jsonl``
  appended (repaired on restart).

So a restart serves the checkpoint's version, trains every scored sample no update holds, judges every turn
with a next state and no sample, and trains no sample twice. Side turns are not recorded.
"""
from __future__ import annotations

import dataclasses
import io
import json
import time
from typing import Dict, List, Optional

import torch

from ..rl.events import TB_DIR
from ..rl.run import write_metrics
from ..utils import atomic_write
from .config import differing, serve_config_dict, serve_config_from_dict
from .engine import load_trainer_state, trainable_tensors
from .records import RECORD_FILES
from .sessions import Turn, turn_key
from .versions import ADAPTERS_DIR

__all__ = ["prepare_folder", "commit_update", "apply_sample", "upstream_records", "SERVE_FILES"]

#: every file the server writes into its run folder (its marker lists them)
SERVE_FILES = tuple(RECORD_FILES) + ("checkpoint.pt", "config.json", "metrics.jsonl", "metrics.csv", TB_DIR,
                                     ADAPTERS_DIR)


def prepare_folder(s, force: bool) -> None:
    """A new folder is registered and gets config.json; a folder of the same settings is resumed; one of other
    settings is refused (ValueError naming them) unless ``force``, which removes claw's files there first."""
    folder = s.folder
    if folder.used and not force:
        saved = _saved_config(folder.path)
        diff = differing(serve_config_from_dict(saved["serve"]), _resolved(s))
        if diff:
            raise ValueError(f"{folder.path} holds a server run with other settings ({diff}); choose another folder "
                             "or pass --force to start over there")
        s.t0 = float(saved.get("started_at", s.t0))
        folder.register(*SERVE_FILES)
        load_records(s)
        return
    if folder.used:
        folder.remove_own()
    folder.register(*SERVE_FILES)
    with atomic_write(folder.path / "config.json") as f:
        f.write(json.dumps({"serve": serve_config_dict(_resolved(s)), "started_at": s.t0}, indent=1))


def _resolved(s):
    return dataclasses.replace(s.cfg, ppo=s.ppo)


def _saved_config(path) -> dict:
    try:
        saved = json.loads((path / "config.json").read_text(encoding="utf-8"))
        serve_config_from_dict(saved["serve"])
        return saved
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as e:
        raise ValueError(f"{path}/config.json cannot be read as a server run's settings ({type(e).__name__}); pass "
                         "--force to start over there") from None


def load_records(s) -> None:
    """Rebuild the state from the folder: checkpoint, turns and their next states, samples, updates."""
    path = s.folder.path
    if (path / "checkpoint.pt").exists():
        try:
            ck = torch.load(path / "checkpoint.pt", weights_only=False, map_location=s.engine.device)
            load_trainer_state(s.engine, ck["model"], int(ck["version"]))
        except (RuntimeError, KeyError, TypeError, EOFError, OSError) as e:
            raise ValueError(f"{path}/checkpoint.pt cannot be read ({type(e).__name__}); pass --force to start over "
                             "there") from None
        s.ckpt, s.updates, s.metrics = ck, list(ck["updates"]), list(ck["metrics"])
    _replay_turns(s, s.logs["turns.jsonl"].read(), s.logs["next_states.jsonl"].read())
    _replay_samples(s, s.logs["samples.jsonl"].read())
    _repair_updates(s, s.logs["trained.jsonl"].read())
    s.events = s.logs["events.jsonl"].read()
    s.matcher.rebuild()  # requests without a session id: the transcript index and their counter
    for t in s.turns.values():
        if t.status == "judging":
            s.judge_queue.put(t.key)


def _replay_turns(s, turns: List[dict], nexts: List[dict]) -> None:
    logged = {turn_key(r["session_id"], r["turn"]) for r in nexts if r.get("next_state") is not None}
    for r in turns:
        t = Turn(r["session_id"], int(r["turn"]), int(r["policy_version"]), r["messages"], r["prompt_text"],
                 r["response_text"], r["prompt_ids"], r["response_ids"], r["rollout_log_probs"], float(r["timestamp"]),
                 r.get("question", ""), r.get("lang", "en"), r.get("tokens", []), finished=r.get("finished", True))
        s.turns[t.key] = t
        previous, ended = s.book.open_turn(t.session_id, t.key, bool(r.get("session_done")), t.timestamp)
        if previous is not None:
            s.set_next_state(previous, r["messages"][-1], record=previous not in logged, queue=False)
        if ended is not None:
            s.end_turn(ended, "session_done", record=False)
    s.counts["turns_served"] = len(turns)
    for r in nexts:
        key = turn_key(r["session_id"], r["turn"])
        if r.get("next_state") is None and r.get("reason") == "timeout" and key in s.turns:
            s.book.close(key)
            s.end_turn(key, "timeout", record=False)


def _replay_samples(s, samples: List[dict]) -> None:
    prm = {turn_key(r["session_id"], r["turn"]) for r in s.logs["prm.jsonl"].read()}
    for rec in samples:
        key = turn_key(rec["session_id"], rec["turn"])
        if key not in s.turns:
            continue
        if "error" in rec:
            s.turns[key].status = "excluded"
            continue
        apply_sample(s, s.turns[key], rec)
        if key not in prm:  # killed between the sample and its PRM / OPD records
            for name, r in upstream_records(rec).items():
                s.log(name, r)


def _repair_updates(s, logged: List[dict]) -> None:
    have = {json.dumps(r, sort_keys=True) for r in logged}  # a skipped update repeats its version
    trained = set()
    for u in s.updates:
        trained.update(u["samples"])
        for k in u["samples"]:
            if k in s.turns:
                s.turns[k].status, s.turns[k].trained_version = "trained", int(u["version"])
        if json.dumps(u, sort_keys=True) not in have:  # killed between the checkpoint and its line
            s.log("trained.jsonl", u)
    s.buffer = [k for k in s.buffer if k not in trained]
    s.counts["samples_trained"] = len(trained)
    if s.updates:
        s.last_update_s = float(s.updates[-1]["time"])


def upstream_records(rec: dict) -> Dict[str, dict]:
    """The PRM and OPD records of a sample in upstream's shapes (openclaw-system.md)."""
    key = {"session_id": rec["session_id"], "turn": rec["turn"]}
    out = {"prm.jsonl": {**key, "score": rec["score"], "votes": rec["votes"],
                         "representative_eval": rec["representative_eval"]}}
    if rec["hinted"]:  # the strategy reads hints (its plan): the OPD record
        out["opd.jsonl"] = {**key, "accepted": rec["hint"] is not None, "hint": rec["hint"],
                            "hint_len": len(rec["hint"] or ""), "votes": rec["hint_votes"],
                            "teacher_logprob_len": rec["teacher_logprob_len"]}
    return out


def apply_sample(system, t: Turn, rec: dict) -> None:
    """A sample record into the in-memory state (live, and on resume): the turn's fields and the buffer."""
    t.score, t.votes, t.hint = rec.get("score"), rec.get("votes", []), rec.get("hint")
    t.signal, t.mask = rec.get("signal"), rec.get("mask")
    t.status = rec["status"]
    if t.status == "scored":
        system.buffer.append(t.key)


def commit_update(s, optimizer, keys: List[str], version: int, row: dict, skipped: Optional[str] = None) -> None:
    """After an update: the published adapter (``adapters/v{N}``, with PEFT adapters), the checkpoint (the commit
    point), the swap into the server, the records. ``skipped``: why the update is not published (its samples count
    as trained, the version stays, nothing is swapped)."""
    now = time.time()
    update = {"version": version, "samples": list(keys), "time": now, **({"skipped": skipped} if skipped else {})}
    row = {**row, "time_s": round(now - s.t0, 4)}
    if s.versions.enabled and not skipped:  # before the checkpoint: every version a checkpoint names has its folder
        s.versions.write(version, {"update": len(s.updates), "samples": len(keys),
                                   "samples_total": s.counts["samples_trained"] + len(keys),
                                   **{k: v for k, v in row.items() if k.startswith(("publish/", "gate/"))}})
    if s.folder is not None:
        ck = {"model": trainable_tensors(s.engine), "opt": optimizer.state_dict(), "version": version,
              "updates": s.updates + [update], "metrics": s.metrics + [row]}
        buf = io.BytesIO()  # serialised first: a full disk is then an OSError of the write, not torch's "unexpected pos"
        torch.save(ck, buf)
        with atomic_write(s.folder.path / "checkpoint.pt", "wb") as f:
            f.write(buf.getbuffer())
    row["timing/swap_s"] = 0.0 if skipped else s.engine.publish(version)
    s.versions.prune()
    s.log("trained.jsonl", update)
    if s.folder is not None:  # the files first: a status that shows the update finds its metrics written
        write_metrics(s.folder.path, s.metrics + [row])
    done = set(keys)
    with s.cond:
        for k in keys:
            s.turns[k].status, s.turns[k].trained_version = "trained", version
        s.buffer = [k for k in s.buffer if k not in done]
        s.updates.append(update)
        s.metrics.append(row)
        s.counts["samples_trained"] += len(keys)
        s.last_update_s, s.last_update_duration_s = time.time(), float(row.get("timing/update_s", 0.0))
