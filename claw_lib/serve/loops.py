"""The judge loop and the trainer loop of the live server: threads over :class:`~claw_lib.serve.system.LiveSystem`.

Both reuse the kit's stages (:mod:`claw_lib.rl.ppo`) on samples that arrive one turn at a time:

* the **judge** makes a one-turn :class:`~claw_lib.rl.ppo.Rollout` of a turn with its next state (the rollout
  log-probs are the serving weights', recorded when the turn was served) and runs stage 2,
  :func:`~claw_lib.rl.ppo.compute_signals`: the judge's votes, the hint and the hinted teacher's log-probs,
  giving one signal per response token and the loss mask (empty: the turn is excluded);
* the **trainer** waits for ``batch_size`` scored samples, packs them into one rollout, recomputes their
  log-probs under the trainer's weights (pi_old of the update), weights each token by the truncated importance
  ratio min(exp(log pi_old - log pi_serve), C) (the serving weights lag behind: slime's TIS), and runs stages 3
  and 4 (:func:`~claw_lib.rl.ppo.compute_advantages`, :func:`~claw_lib.rl.ppo.ppo_update`); then (with PEFT
  adapters) the adapter folder, checkpoint, swap the weights into the server as version v+1, record. An adapter
  that did not move, or a candidate the publish gate scores worse, is not published: the version stays
  (:mod:`claw_lib.serve.versions`).

A diverged update (NaN weights) stops training, not serving: the server keeps the last good version and its
status says why.
"""
from __future__ import annotations

import errno
import os
import queue
import sys
import threading
import time
from typing import List

import numpy as np
import torch

from ..models.lm import logprobs_in_parts
from ..rl import ppo  # the stages, looked up at each call (a test may replace one)
from ..rl.driver import make_rollout, signal_tensors
from ..rl.run import TrainingDivergedError, check_finite
from ..rl.samples import judged_fields  # the judge's verdict as every run records it
from ..rl.strategies import plan
from ..toy.env import Feedback
from ..utils import release_freed_memory
from .engine import ServedTask
from .resume import apply_sample, commit_update, upstream_records  # what a sample and an update write
from .sessions import Turn

__all__ = ["JudgeLoop", "TrainerLoop", "turn_rollout", "tis_weights"]


def turn_rollout(turns: List[Turn], engine, with_feedback: bool = True):
    """The kit's :class:`~claw_lib.rl.ppo.Rollout` of served turns: their prompts and responses packed on the
    model's device, ``logprobs`` = the rollout log-probs recorded at serving time (B, T), the next states as
    :class:`~claw_lib.toy.env.Feedback` (score 0: the server does not know the user's own score)."""
    tasks = [ServedTask(t.prompt_text, t.question, t.lang,
                        messages=t.messages if engine.chat else None) for t in turns]
    fb = [Feedback(t.next_state or "", 0.0, "served", role=t.next_role or "user") for t in turns] if with_feedback else []
    return make_rollout(tasks, [t.prompt_ids for t in turns], [t.response_ids for t in turns],
                        [t.response_text for t in turns], fb, engine.tokenizer.pad_token_id, engine.device,
                        logprobs=[t.rollout_log_probs for t in turns])


def tis_weights(old: torch.Tensor, served: torch.Tensor, mask: torch.Tensor, cap: float):
    """Truncated importance weights of the lag: w_t = min(exp(old_t - served_t), cap) on the mask, 1 elsewhere
    (cap 0: all 1). old, served: (B, T) log-probs (nats); mask: (B, T) bool. Returns (w, metrics): the mean
    |old - served| (upstream's ``train_rollout_logprob_abs_diff``), the mean and largest untruncated ratio
    exp(old - served) (1 within 1e-3 for fresh samples from a full-precision serving copy), and with a cap the
    mean weight and the share of tokens clipped."""
    diff = (old - served).masked_fill(~mask, 0.0)
    raw = torch.exp(diff)
    any_ = bool(mask.any())
    m = {"tis/rollout_logprob_abs_diff": float(diff.abs()[mask].mean()) if any_ else 0.0,
         "tis/ratio_mean": float(raw[mask].mean()) if any_ else 1.0,
         "tis/ratio_max": float(raw[mask].max()) if any_ else 1.0}
    if not cap:
        return torch.ones_like(old), m
    w = raw.clamp(max=cap).masked_fill(~mask, 1.0)
    m.update({"tis/weight_mean": float(w[mask].mean()) if any_ else 1.0,
              "tis/clipped_share": float((raw[mask] > cap).float().mean()) if any_ else 0.0})
    return w, m


class _Loop(threading.Thread):
    """A background loop; ``nice``: how much lower than the serving threads the OS schedules it (Linux threads have
    their own nice value), so that on a busy CPU a request is served before a judgement or an update."""

    nice = 0

    def __init__(self, system, name: str):
        super().__init__(name=name, daemon=True)
        self.system = system
        self.stopping = threading.Event()

    def lower_priority(self) -> None:
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), os.getpriority(os.PRIO_PROCESS, 0) + self.nice)
        except (AttributeError, OSError, PermissionError):  # not Linux, or not allowed: the default priority
            pass

    def stop(self) -> None:
        self.stopping.set()
        with self.system.cond:
            self.system.cond.notify_all()


class JudgeLoop(_Loop):
    """Takes turns with a next state from the judge queue, one at a time; also closes timed-out sessions."""

    nice = 5

    def __init__(self, system):
        super().__init__(system, "claw-judge")
        # the judge the system built with the one judge factory (signals.judges.make_judge) at the start
        self.scorer = ppo.Scorer(system.engine.tokenizer, teacher=system.engine.teacher, judge=system.judge)

    def run(self) -> None:
        s = self.system
        self.lower_priority()
        while not self.stopping.is_set():
            s.expire_sessions()
            try:
                key = s.judge_queue.get(timeout=0.2)
            except queue.Empty:
                continue
            try:
                self.judge(key)
            except Exception as e:  # a judge that fails leaves the turn without a sample, and says why
                with s.cond:
                    t = s.turns[key]
                    t.status, t.hint = "excluded", None
                s.log("samples.jsonl", {"session_id": t.session_id, "turn": t.turn, "status": "excluded",
                                        "error": f"{type(e).__name__}: {str(e)[:200]}"})

    def judge(self, key: str) -> None:
        """Stage 2 on one turn; the sample record first (the commit point), then the PRM / OPD records."""
        s = self.system
        t = s.turns[key]
        t0 = time.time()
        ro = turn_rollout([t], s.engine)
        sig = ppo.compute_signals(ro, s.ppo, self.scorer)
        n = len(t.response_ids)
        signal = [float(x) for x in sig.token_signal[0, :n].cpu()]
        mask = [bool(x) for x in sig.mask[0, :n].cpu()]
        rec = sample_record(t, sig.judged[0], signal, mask, s.ppo.strategy, plan(s.ppo).strategy.hint)
        s.commit("samples.jsonl", rec)  # the commit point: a failed write leaves the turn to be judged on restart
        with s.cond:
            apply_sample(s, t, rec)
            s.cond.notify_all()
        for name, r in upstream_records(rec).items():
            s.log(name, r)
        s.event("judged", t0, time.time(), session_id=t.session_id, turn=t.turn, version=t.policy_version)


def stop_reason(e: Exception, folder) -> str:
    """The one line ``stopped_reason`` says for an update that raised ``e`` (a divergence, a full disk, ...)."""
    if isinstance(e, TrainingDivergedError):
        return str(e).splitlines()[0]
    if isinstance(e, OSError) and e.errno == errno.ENOSPC:  # R4-26
        return f"the update failed: no space left on device in {folder} (the checkpoint did not fit); free space " \
               "and restart the same command"
    return f"the update failed: {type(e).__name__}: {str(e)[:200]}"


def sample_record(t: Turn, judged, signal: List[float], mask: List[bool], strategy: str, hinted: bool) -> dict:
    """A judged turn as ``samples.jsonl`` holds it: everything the PRM and OPD records and the trainer need."""
    return {"session_id": t.session_id, "turn": t.turn, "policy_version": t.policy_version,
            "status": "scored" if any(mask) else "excluded", **judged_fields(judged),
            "teacher_logprob_len": len(signal) if judged.hint and hinted else 0,
            "signal": signal, "mask": mask, "strategy": strategy, "hinted": hinted}


class TrainerLoop(_Loop):
    """Waits for ``batch_size`` scored samples, trains on them, swaps the new weights into the server."""

    nice = 10

    def __init__(self, system):
        super().__init__(system, "claw-trainer")
        params = [p for p in system.engine.trainer.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(params, lr=system.ppo.lr, weight_decay=0.0)
        if system.ckpt is not None and "opt" in system.ckpt:
            self.optimizer.load_state_dict(system.ckpt["opt"])

    def run(self) -> None:
        s = self.system
        self.lower_priority()
        B = s.ppo.batch_size
        while not self.stopping.is_set():
            with s.cond:
                while len(s.buffer) < B and not self.stopping.is_set():
                    s.cond.wait(timeout=0.5)
                if self.stopping.is_set():
                    return
                keys = s.buffer[:B]
            try:
                self.update(keys)
            except Exception as e:  # diverged (or broke): training stops, serving goes on with the last weights
                with s.cond:
                    s.stopped_reason = stop_reason(e, s.folder.path if s.folder is not None else None)
                print(f"claw serve: training stopped: {s.stopped_reason}", file=sys.stderr, flush=True)
                return
            if s.cfg.train_delay_s:
                self.stopping.wait(s.cfg.train_delay_s)

    def update(self, keys: List[str]) -> None:
        """Stages 3 and 4 on the samples ``keys``, then checkpoint, swap, record (in that order)."""
        s = self.system
        t0 = time.time()
        turns = [s.turns[k] for k in keys]
        version = s.engine.version
        ro, sig, adv, extra = self.prepare(turns)
        stats = ppo.ppo_update(s.engine.trainer, self.optimizer, ro, sig, adv, s.ppo, len(s.updates), anchor=s.anchor)
        check_finite(s.engine.trainer, None, s.ppo, len(s.updates) + 1)
        skipped, checks = s.versions.decide(version)  # an adapter that did not move, a gate that failed: not published
        new = version if skipped else version + 1
        stale = [version - t.policy_version for t in turns]
        row = {"version": new, "samples": len(turns), "staleness_mean": float(np.mean(stale)),
               "staleness_max": int(max(stale)), "judge/score_mean": float(np.mean([t.score or 0 for t in turns])),
               **extra, **adv.metrics, **stats, **checks, "publish/published": float(not skipped),
               "timing/update_s": time.time() - t0}
        commit_update(s, self.optimizer, keys, new, row, skipped)
        release_freed_memory()  # the update's tensors, kept by the allocator otherwise (utils.release_freed_memory)
        s.event("trained", t0, time.time(), session_id=None, turn=None, version=new, samples=len(keys),
                **({"skipped": skipped} if skipped else {}))

    def prepare(self, turns: List[Turn]):
        """The rollout, the stored signals, and the advantages weighted by the truncated importance ratio."""
        s = self.system
        ro = turn_rollout(turns, s.engine, with_feedback=False)
        served = ro.logprobs
        with torch.no_grad():  # pi_old, --micro-batch rows at a time (the update's memory)
            ro.logprobs = logprobs_in_parts(s.engine.trainer, ro.batch, s.ppo.micro_batch, s.ppo.temperature)
        A, M = signal_tensors([(t.signal, t.mask) for t in turns], ro.batch.response_mask)  # as samples.jsonl holds them
        sig = ppo.Signals(A, M, [t.hint for t in turns])
        adv = ppo.compute_advantages(ro, sig, s.ppo)
        w, extra = tis_weights(ro.logprobs, served, adv.mask, s.cfg.tis_cap)
        adv.advantages = adv.advantages * w
        return ro, sig, adv, extra
