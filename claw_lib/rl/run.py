"""The run around the stages (notebooks 08 and 10): the loop, its output folder, checkpoint, resume and metrics.

:mod:`claw_lib.rl.ppo` holds the four stages a step is made of; this module holds what a run needs besides:

* :func:`train` claims and locks the output folder, resumes a run with the same settings from its checkpoint
  (or refuses, naming the settings that differ), and runs :func:`_train`, the loop over the stages numbered as in
  cleanrl (1. rollout, 2. signals, 3. advantages, 4. update), with the evaluation every ``eval_every`` steps;
* :class:`_Run` holds a run's state between steps and writes its files (``metrics.jsonl``, ``metrics.csv``,
  TensorBoard's ``tensorboard/`` (:mod:`claw_lib.rl.events`), ``config.json``, ``checkpoint.pt`` every
  ``save_every`` steps: sampling is seeded per step, so a resumed run repeats the uninterrupted one);
* :func:`check_finite` stops a run whose weights became NaN or inf (:class:`TrainingDivergedError`, naming the
  settings to lower), :func:`write_metrics` writes the metrics files; the TRL engine
  (:mod:`claw_lib.integrations.trl`) and the live server (:mod:`claw_lib.serve`) use both, and
  :func:`trl_run_folder` claims a TRL run's folder as :func:`train` claims the kit's.
"""
from __future__ import annotations

import contextlib
import csv
import dataclasses
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np
import torch
from tqdm.auto import tqdm

from .. import utils  # resolve_device, set_threads looked up at each call (a test may replace them)
from ..config import PER_MODEL, PPOConfig, SettingError, flatten, from_dict, validate
from ..models import lm  # load_causal_lm looked up at each call (a test may replace it)
from ..models.lm import peak_memory_gib
from ..models.lora import trainable_state_dict
from ..models.peft_lora import ADAPTER_DIR, save_run_adapter
from ..toy.env import Task
from ..toy.envs import make_env
from ..utils import OutputFolder, atomic_write
from .core import ValueHead
from . import ppo  # the stages, looked up at each call (a notebook or test may replace one)
from .ppo import Scorer
from .fit import check_fits, eval_tokens
from .events import TB_DIR, write_events
from .samples import RECORD_FILES, append_records, evaluate_recorded, rollout_records, trim_records

__all__ = ["train", "eval_tokens", "TrainingDivergedError", "CheckpointWriteError", "trl_run_folder",
           "TRL_RUN_FILES", "RunFolderTaken", "check_judge", "check_finite", "write_metrics"]


def _eval_metrics(policy, tok, env, tasks, cfg: PPOConfig, out: Optional[Path] = None, step: int = 0) -> Dict[str, float]:
    """``eval/score`` (greedy answers to the fixed evaluation prompts), and with several personas (``task.user
    "joint"``) each persona's own ``eval/score/<user>``; the answers appended to ``out/eval.jsonl`` as ``step``'s."""
    by, answers = evaluate_recorded(policy, tok, env, tasks, eval_tokens(cfg))
    if out is not None:
        append_records(out / "eval.jsonl", step, answers)
    return {"eval/score": by.pop("all"), **{f"eval/score/{name}": v for name, v in by.items()}}


def train(cfg: PPOConfig, out_dir=None, stop_after: Optional[int] = None, force: bool = False,
          judge=None) -> List[Dict]:
    """Run PPO; returns the list of per-step metric dicts (also written to ``out_dir``).

    judge: the next-state judge of Binary RL and OPD (``votes`` / ``hint_votes``, as
    :class:`~claw_lib.signals.judges.LLMJudge`); None: the rule judge. The one ``cfg.opd.judge`` names is built by
    :func:`claw_lib.apps.train_judge.training_judge` (``claw train --judge`` does it), which sits above the loop
    in the package's layers; a config that names a judge without one passed is refused.

    ``out_dir`` is locked while the run writes to it. A folder that holds a run with the same
    settings (``steps`` aside, so a run can be extended) is resumed from its checkpoint; one that
    holds a run with other settings, or a run that cannot be resumed, is refused (ValueError naming
    the differing settings) unless ``force``, which starts over there. stop_after: stop (as if
    interrupted) after this many steps of this call (for tests).
    """
    validate(cfg)
    check_judge(cfg, judge)
    if out_dir is None:
        return _train(_Run.start(cfg, None, False, False, judge), stop_after)
    folder = OutputFolder.claim(out_dir, "train", force, "training output", names=_RUN_FILES, legacy=_legacy_run_files)
    with folder.locked(force):  # checked again under the lock; stale temporary files of a killed run removed
        return _train(_Run.start(cfg, folder, True, force, judge), stop_after)


def check_judge(cfg: PPOConfig, judge) -> None:
    """Refuse (ValueError) a config that names a judge (``opd.judge``) when no judge object is passed: the run would
    silently fall back to the rule judge while its config.json names another."""
    if judge is None and cfg.opd.judge.strip() != "rule":
        raise ValueError(f"opd.judge {cfg.opd.judge!r} needs the judge itself: build it with "
                         "claw_lib.apps.train_judge.training_judge(cfg) and pass judge= (claw train --judge does)")


def _train(run: "_Run", stop_after: Optional[int]) -> List[Dict]:
    """The loop: from ``run.start_step`` to ``cfg.steps``, the four stages of :mod:`claw_lib.rl.ppo`, the NaN stop,
    the metrics (and the evaluation when due) recorded; ``stop_after``: stop after this many steps of this call."""
    cfg, policy, tok = run.cfg, run.policy, run.tokenizer
    bar = tqdm(range(run.start_step, cfg.steps), desc=f"ppo {cfg.strategy}", disable=not cfg.progress, leave=False)
    for k, step in enumerate(bar):
        t0 = time.time()
        ro = ppo.rollout(policy, tok, run.env, cfg, step, ref=run.ref if cfg.loss.kl_coef else None)   # 1.
        t1 = time.time()
        sig = ppo.compute_signals(ro, cfg, run.scorer)                                              # 2.
        t2 = time.time()
        adv = ppo.compute_advantages(ro, sig, cfg, policy, run.value_head)                          # 3.
        stats = ppo.ppo_update(policy, run.optimizer, ro, sig, adv, cfg, step, run.value_head,
                               teacher=run.scorer.teacher)                                          # 4.
        check_finite(policy, run.value_head, cfg, step + 1)
        metrics = {"step": step + 1, "reward/score": float(np.mean(ro.scores)), **sig.metrics, **adv.metrics,
                   **stats, "timing/rollout_s": t1 - t0, "timing/score_s": t2 - t1,
                   "timing/update_s": time.time() - t2,
                   "timing/rollout_tokens": int(ro.batch.response_mask.sum())}
        if cfg.eval_every and ((step + 1) % cfg.eval_every == 0 or step + 1 == cfg.steps):
            metrics.update(_eval_metrics(policy, tok, run.eval_env, run.eval_tasks, cfg, run.out, step + 1))
        if run.out is not None:  # what the model said (claw_lib.rl.samples)
            append_records(run.out / "samples.jsonl", step + 1, rollout_records(ro, sig, adv, tok, "kit"))
        metrics["memory/peak_gib"] = peak_memory_gib(str(next(policy.parameters()).device))
        run.record(metrics)
        bar.set_postfix(score=f"{metrics['reward/score']:.2f}")
        if stop_after is not None and k + 1 >= stop_after:
            break
    return run.history


class TrainingDivergedError(SettingError):
    """The weights became NaN or inf in an update (a learning rate or a loss weight far too large);
    ``settings``: the dotted names of the settings to lower."""

    settings = ("lr", "loss.kl_coef", "opd.w_rl_negative")


def check_finite(policy, value_head, cfg: PPOConfig, step: int) -> None:
    """Raise :class:`TrainingDivergedError` when a weight of the policy (or the value head) is NaN or
    inf after the update of ``step``: the next step would fail deep inside sampling ("probability tensor
    contains either inf, nan or element < 0"). One reduction per tensor, one sync."""
    params = list(policy.parameters()) + (list(value_head.parameters()) if value_head is not None else [])
    with torch.no_grad():
        total = torch.stack([p.detach().float().abs().sum().cpu() for p in params]).sum()
    if not torch.isfinite(total):
        if any(p.dtype == torch.float16 for p in params):  # float16 weights (LoRA on them too): the cause (DT01)
            e = TrainingDivergedError(
                f"the policy's weights became NaN or inf in the update of step {step} with dtype float16 (the kit "
                "trains without loss scaling, so float16 updates overflow): train with dtype float32 or bfloat16")
            e.settings = ("dtype",)
            raise e
        raise TrainingDivergedError(
            f"the policy's weights became NaN or inf in the update of step {step} (lr {cfg.lr:g}, loss.kl_coef "
            f"{cfg.loss.kl_coef:g}, opd.w_rl_negative {cfg.opd.w_rl_negative}): lower the learning rate or the loss "
            "weights")


@dataclass
class _Run:
    """Everything a training run holds between steps, and its output folder (metrics, config,
    checkpoint)."""

    cfg: PPOConfig
    policy: object
    tokenizer: object
    ref: object
    value_head: Optional[ValueHead]
    optimizer: torch.optim.Optimizer
    env: object
    eval_env: object
    eval_tasks: List[Task]
    scorer: Scorer
    out: Optional[Path]
    history: List[Dict]
    start_step: int
    saved_step: int = 0
    """the step of the last checkpoint written (0: none yet)"""

    @classmethod
    def start(cls, cfg: PPOConfig, folder, resume: bool, force: bool, judge=None) -> "_Run":
        """The run's state; ``folder``: its :class:`~claw_lib.utils.OutputFolder` (locked), or None; ``judge``: the
        next-state judge (None: the rule judge)."""
        out = folder.path if folder is not None else None
        saved = _previous_run(cfg, folder, resume, force) if folder is not None else None  # before any slow work
        # a resumed run keeps the thread count of the run it resumes (float sums are ordered by it)
        threads = cfg.threads or (int(saved.get("threads", 0) or 0) if saved else 0)
        cfg = dataclasses.replace(cfg, threads=utils.set_threads(threads))
        if folder is not None:
            folder.register(*_RUN_FILES)
        dev = utils.resolve_device(cfg.device)
        t_load = time.time()
        ck = _load_checkpoint(out / "checkpoint.pt", dev, cfg) if saved is not None else None  # checked before the model
        policy, tok = lm.load_causal_lm(cfg.model, device=dev, dtype=cfg.dtype)
        cfg, ref = ppo.prepare_policy(policy, cfg)
        if saved is not None:  # the per-model settings are known only now: they must match the saved run's too
            _check_resolved(saved, cfg, out)
        torch.manual_seed(cfg.seed)
        vhead = ValueHead(policy.config.hidden_size).to(dev) if cfg.advantage == "gae" else None
        params = [p for p in policy.parameters() if p.requires_grad] + (list(vhead.parameters()) if vhead else [])
        opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=0.0)
        env = make_env(cfg.task, cfg.seed, tok)
        eval_env = make_env(cfg.task, 10_000 + cfg.seed, tok, env.world, evaluation=True)
        scorer = Scorer.for_run(cfg, policy, ref, tok)
        scorer.judge = judge
        run = cls(cfg, policy, tok, ref, vhead, opt, env, eval_env, eval_env.sample(cfg.eval_prompts), scorer, out, [], 0)
        # before anything is written: positions, top-k, a step's memory
        check_fits(cfg, policy, tok, run.eval_tasks, make_env(cfg.task, cfg.seed, tok, env.world).sample(cfg.batch_size),
                   dev)
        if ck is not None:
            run._restore(ck)
        if out is not None:  # a resumed run repeats the steps after its checkpoint: their records go
            trim_records(out, run.start_step)
        if out is not None:
            with atomic_write(out / "config.json") as f:
                f.write(json.dumps(asdict(cfg), indent=1))
        if run.start_step == 0:
            policy.eval()
            load_s = time.time() - t_load
            run.history.append({"step": 0, **_eval_metrics(policy, tok, eval_env, run.eval_tasks, cfg, out, 0),
                                "timing/load_s": load_s})
        return run

    def _restore(self, ck: Dict) -> None:
        """The weights, optimizer, value head and history of a checkpoint (checked by :func:`_load_checkpoint`);
        one that does not fit this run's model is refused (ValueError naming the first mismatch)."""
        path = self.out / "checkpoint.pt"
        try:
            if self.cfg.lora_rank:  # adapters: the base is the model on disk, the checkpoint must hold every adapter
                _check_adapter_keys(self.policy, ck["model"])
            self.policy.load_state_dict(ck["model"], strict=not self.cfg.lora_rank)
            self.optimizer.load_state_dict(ck["opt"])
            if self.value_head is not None:
                self.value_head.load_state_dict(ck["vhead"])
            self.history, self.start_step = list(ck["history"]), int(ck["step"])
        except (RuntimeError, KeyError, ValueError, TypeError) as e:
            lines = [x.strip() for x in str(e).splitlines() if x.strip()] or [type(e).__name__]
            detail = lines[min(1, len(lines) - 1)][:160]  # the first size mismatch, not the model's class
            raise ValueError(f"the checkpoint {path} does not fit this run's model ({detail}); delete it or pass "
                             "--force to start over") from None
        self.saved_step = self.start_step

    def record(self, metrics: Dict) -> None:
        """Append a step's metrics; write the metrics files and, every ``save_every`` steps, a checkpoint."""
        self.history.append(metrics)
        if not self.out:
            return
        write_metrics(self.out, self.history)
        step = metrics["step"]
        if self.cfg.lora_rank and (step == self.cfg.steps or (self.cfg.save_every and step % self.cfg.save_every == 0)):
            save_run_adapter(self.policy, self.out)  # PEFT's adapters in PEFT's format: RUN/adapter
        if self.cfg.save_every and (step % self.cfg.save_every == 0 or step == self.cfg.steps):
            self._save_checkpoint(step)

    def _save_checkpoint(self, step: int) -> None:
        """checkpoint.pt of ``step``, whole or not at all (a full disk: :class:`CheckpointWriteError`)."""
        model = trainable_state_dict(self.policy) if self.cfg.lora_rank else self.policy.state_dict()
        ck = {"model": model, "opt": self.optimizer.state_dict(), "history": self.history,
              "step": step, "config": asdict(self.cfg)}  # the config: a checkpoint resumes only its own run
        if self.value_head is not None:
            ck["vhead"] = self.value_head.state_dict()
        try:
            with atomic_write(self.out / "checkpoint.pt", "wb") as f:
                torch.save(ck, f)
        except (RuntimeError, OSError) as e:  # torch.save reports a full disk as RuntimeError ("unexpected pos")
            kept = f"the checkpoint of step {self.saved_step} is kept" if self.saved_step else "no checkpoint is kept yet"
            raise CheckpointWriteError(
                f"no space left writing {self.out / 'checkpoint.pt'} (the disk is full or a file size limit such as "
                f"`ulimit -f` was reached: {type(e).__name__}); {kept}") from None
        self.saved_step = step


def _check_adapter_keys(policy, state) -> None:
    """Refuse (ValueError) a LoRA checkpoint whose weights are not exactly the policy's adapters: loaded with
    ``strict=False``, it would go on with fresh random adapters under the old history (LR06)."""
    want, got = set(trainable_state_dict(policy)), set(state) if isinstance(state, dict) else set()
    if want != got:
        raise ValueError(f"\nit holds {len(want & got)} of the run's {len(want)} adapter weights"
                         + (f" and {len(got - want)} others" if got - want else ""))


class CheckpointWriteError(OSError):
    """checkpoint.pt could not be written whole (a full disk); the previous checkpoint is intact."""


#: settings that do not change a run's numbers: a folder can be resumed with other values of these
_RESUMABLE = {"steps", "progress", "save_every", "device"}
#: the files a run writes into its folder (its marker lists them)
_RUN_FILES = ("checkpoint.pt", "metrics.jsonl", "metrics.csv", TB_DIR, "config.json", ADAPTER_DIR) + RECORD_FILES


#: what a kit without markers wrote into a run folder (adapters, records and TensorBoard files came later, so a
#: ``tensorboard/`` or ``samples.jsonl`` in a folder without a marker is the user's)
_PRE_MARKER_RUN_FILES = ("checkpoint.pt", "metrics.jsonl", "metrics.csv", "config.json")


def _legacy_run_files(out: Path) -> set:
    """The run files in a folder that a kit without markers wrote: those of :data:`_PRE_MARKER_RUN_FILES` there, if
    its config.json is a run's (a PPOConfig with its ``strategy`` and ``task``) and it is not a TRL run."""
    try:
        saved = json.loads((out / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()
    if not isinstance(saved, dict) or not {"strategy", "task"} <= set(saved) or (out / "engine.json").exists():
        return set()
    return {n for n in _PRE_MARKER_RUN_FILES if (out / n).exists()}


def _differ(old: Dict, new: Dict) -> List[str]:
    """The settings (flattened) in which two runs differ, those that do not change a run's numbers aside;
    a thread count of 0 ("the free cores") matches any, and so does a per-model setting not resolved yet (None
    before the model is loaded: :func:`_check_resolved` compares it once it is)."""
    return [f"{k} {old.get(k)!r} (saved) vs {new[k]!r}" for k in new if k not in _RESUMABLE and old.get(k) != new[k]
            and not (k == "threads" and 0 in (old.get(k), new[k])) and not (k in PER_MODEL and new[k] is None)]


def _check_resolved(saved: Dict, cfg: PPOConfig, out: Path) -> None:
    """Refuse to resume when a per-model setting, resolved from the loaded model, differs from the saved run's."""
    differ = [d for d in _differ(flatten(from_dict(saved)), flatten(cfg)) if d.split(" ", 1)[0] in PER_MODEL]
    if differ:
        raise ValueError(f"{out} holds a run with other settings ({'; '.join(differ[:4])}); choose another folder or "
                         "pass --force to start over there")


def _previous_run(cfg: PPOConfig, folder, resume: bool, force: bool) -> Optional[Dict]:
    """The saved config (config.json) of the run in ``folder`` (an :class:`~claw_lib.utils.OutputFolder`)
    when it is one to resume: its settings match ``cfg`` and it has a checkpoint. Refuses (ValueError) a run
    with other settings or without a checkpoint, unless ``force``, which removes that run's files (only
    those claw wrote). None for a folder without a run."""
    out = folder.path
    if not folder.used:
        return None
    if force or not resume:
        folder.remove_own()
        return None
    try:
        saved = json.loads((out / "config.json").read_text())
        old = flatten(from_dict(saved))
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as e:
        raise ValueError(f"{out}/config.json cannot be read ({type(e).__name__}); pass --force to start over there") from None
    differ = _differ(old, flatten(cfg))
    if differ:
        raise ValueError(f"{out} holds a run with other settings ({'; '.join(differ[:4])}"
                         f"{'; ...' if len(differ) > 4 else ''}); choose another folder or pass --force to start over there")
    if not (out / "checkpoint.pt").exists():
        raise ValueError(f"{out} holds a run without a checkpoint: no checkpoint yet (it stopped before its first one, "
                         f"at step {saved.get('save_every')}, or save_every is 0), so there is nothing to resume; run "
                         "again with --force to start over there")
    return saved


def _load_checkpoint(path: Path, device, cfg: Optional[PPOConfig] = None) -> Dict:
    """checkpoint.pt, checked: a dict with the kit's keys and, with ``cfg``, written by a run of the same
    settings (its config inside it): a checkpoint copied from another run is refused, not resumed."""
    try:
        ck = torch.load(path, weights_only=False, map_location=device)
    except Exception as e:  # a truncated or foreign file: say which and what to do
        raise ValueError(f"the checkpoint {path} cannot be read ({type(e).__name__}); delete it to start over, "
                         "or pass --force") from None
    missing = [k for k in ("model", "opt", "history", "step") if not isinstance(ck, dict) or k not in ck]
    if missing:
        raise ValueError(f"{path} is not a claw training checkpoint (it has no {', '.join(missing)}); delete it or "
                         "pass --force to start over")
    if cfg is not None:
        try:
            old = flatten(from_dict(ck["config"]))
        except (KeyError, TypeError, ValueError, AttributeError):
            raise ValueError(f"{path} holds no record of the run that wrote it (an older claw-kit?), so it cannot be "
                             "matched to this run's config.json; pass --force to start over") from None
        differ = _differ(old, flatten(cfg))
        if differ:
            raise ValueError(f"{path} was written by another run ({'; '.join(differ[:3])}); it does not belong to "
                             f"{path.parent}/config.json: pass --force to start over")
    return ck


def write_metrics(out: Path, history: List[Dict]) -> None:
    """``metrics.jsonl`` (one dict a line), ``metrics.csv`` (a column per key, ``step`` first) and the TensorBoard
    event file (:mod:`claw_lib.rl.events`: ``tensorboard/``), each whole."""
    with atomic_write(out / "metrics.jsonl") as f:
        for h in history:
            f.write(json.dumps(h) + "\n")
    keys = sorted({k for h in history for k in h}, key=lambda k: (k != "step", k))
    with atomic_write(out / "metrics.csv", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        for h in history:
            w.writerow(h)
    write_events(out, history)


# --------------------------------------------------------------------------- the TRL engine's folder
#: the files a TRL run writes into its folder (its marker lists them; TRL's own output goes to ``trl/``)
TRL_RUN_FILES = ("metrics.jsonl", "metrics.csv", TB_DIR, "config.json", "engine.json", "trl", ADAPTER_DIR) + RECORD_FILES


class RunFolderTaken(ValueError):
    """The folder already holds a TRL run and ``force`` was not given (TRL runs are not resumed)."""


#: what a TRL run wrote into its folder before markers existed
_PRE_MARKER_TRL_FILES = ("metrics.jsonl", "metrics.csv", "config.json", "engine.json", "trl")


def _legacy_trl_files(out: Path) -> set:
    """A TRL run's files in a folder written before markers existed (it has engine.json)."""
    return {n for n in _PRE_MARKER_TRL_FILES if (out / n).exists()} if (out / "engine.json").is_file() else set()


@contextlib.contextmanager
def trl_run_folder(out, force: bool):
    """Claim and lock ``out`` for a TRL run (:func:`claw_lib.integrations.trl.train_trl`) as :func:`train` claims the
    kit's: a folder that holds a run is refused (:class:`RunFolderTaken`) unless ``force``, which removes that run's
    files (only those claw wrote); the files of the new run are registered in the folder's marker."""
    folder = OutputFolder.claim(out, "trl", force, "training output", names=TRL_RUN_FILES, legacy=_legacy_trl_files)
    if folder.used and not force:
        raise RunFolderTaken(f"the training output folder {out} already holds a run (TRL runs are not resumed); "
                             "choose another folder or pass --force to replace it")
    with folder.locked(force):
        folder.remove_own()
        folder.register(*TRL_RUN_FILES)
        yield folder
