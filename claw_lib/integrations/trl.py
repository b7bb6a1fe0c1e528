"""The kit's signals in TRL's ``GRPOTrainer``: one more engine for the same runs (docs/trl.md).

The kit's loop (:func:`claw_lib.rl.run.train`) is small enough to read in one sitting; TRL 1.16 brings
what a real model needs: several GPUs and nodes through ``accelerate`` (DDP, FSDP, DeepSpeed), vLLM
generation and PEFT adapters. This module runs the kit's signals inside TRL **without re-implementing
any of them**:

* :class:`ClawGRPOTrainer` lets TRL sample the completions, then builds a
  :class:`claw_lib.rl.ppo.Rollout` from TRL's own tensors (prompt ids without padding, completion ids
  cut at ``completion_mask``, TRL's detached per-token log-probs as ``logprobs``, the user's feedback)
  and calls :func:`~claw_lib.rl.ppo.compute_signals` and :func:`~claw_lib.rl.ppo.compute_advantages`.
  Their (B, T) advantages replace GRPO's group-normalised (B,) ones (so GRPO's group normalisation
  never touches the kit's signals), and the kit's mask (turns without a sample: a 0-scored turn of
  Binary RL, a turn without an accepted hint for OPD) becomes TRL's loss-only ``tool_mask``. The
  hinted teacher scores the completion's **own token ids** after the teacher prompt, in the same
  process: a frozen copy of the initial policy (default), the live policy, or with PEFT the same
  model with its adapter disabled (no second copy of the weights).
* :func:`grpo_config` maps a :class:`~claw_lib.config.PPOConfig` onto a ``GRPOConfig``;
  :func:`make_trainer` and :func:`train_trl` run a whole training with the kit's settings and write
  the same ``metrics.jsonl`` / ``metrics.csv`` columns as :func:`claw_lib.rl.run.train`
  (:data:`claw_lib.rl.ppo.METRICS`), with the same ``eval/score`` (greedy answers to the same fixed
  evaluation prompts, :func:`claw_lib.toy.evaluation.evaluate_policy`), so runs compare across engines.

How the kit's loss maps onto TRL's (``LossConfig.for_strategy(strategy)``; TRL formulas in
``GRPOTrainer._compute_loss``):

=================  ==================  ======================================================================
kit ``loss_agg``   TRL ``loss_type``   why
=================  ==================  ======================================================================
``sample_mean``    ``"grpo"``          each row's token mean, then the mean over rows. TRL's mean counts
(binary_rl, opd,                       every row (an empty row adds 0); the kit's counts its
combined)                              ``Advantages.sample_rows`` (Binary RL: every turn, a 0-scored one
                                       included, as upstream; OPD / combined: the turns with a sample). The
                                       trainer multiplies the loss by N_rows / N_sample_rows of the whole
                                       generation batch (all processes), which makes it the kit's exactly
                                       (``minibatches=1``); plain "grpo" would shrink OPD's loss by the
                                       share of turns without a hint.
``token_mean``     ``"dapo"``          the sum over masked tokens divided by ``num_items_in_batch``, the
(alignment                             token count of the whole generation batch over all processes
rewards)                               (recomputed from the kit's mask): the kit's token mean. ("bnpo" is
                                       the same only for one process and one micro-batch.)
=================  ==================  ======================================================================

Clip range: ``epsilon = eps``, ``epsilon_high = eps_high`` of the same resolved config (0.2 / 0.28 for
Binary RL and combined, 0.2 / 0.2 for OPD). ``beta = kl_coef`` (TRL's KL is k3 without the kit's
[-10, 10] clamp; its reference is a second model, or the adapter-disabled model with PEFT).

The losses that are not a surrogate on advantages (:data:`KIT_LOSSES`: OPD as distillation, ``opd_kl`` with the
forward KL, the top-K reverse KL or the v2 clipped top-k loss, and the v2 hybrid, ``combined`` with
``loss.distill="topk_clipped"``) replace TRL's loss by the kit's own (:data:`claw_lib.rl.ppo.LOSSES` on the kit's
minibatch of the rows TRL put in the chunk: the policy's logits at the rollout temperature, the hinted teacher's on
the teacher batch of :func:`~claw_lib.rl.ppo.compute_signals`, the sampling policy's top-k ids taken after
generation); each process's loss is weighted by its share of the sample rows so that DDP's mean is the whole
batch's (exact with ``minibatches=1``); no KL term there (refused).

Where the engines still differ (docs/trl.md): TRL needs at least 2 completions per prompt (the kit's
signals are per completion, so this only changes which prompts a step holds); with ``minibatches > 1``
the denominators are the generation batch's, spread over the micro-batches; a step whose mask is
empty everywhere still takes an AdamW step (momentum) where the kit skips it; advantage "grpo" takes
the mean score of each process's rows; "gae" is the kit loop's only;
``policy/approx_kl`` and (with ``kl_coef = 0``) ``objective/kl`` are not logged. TRL 1.16 scores
left-padded prompts without position ids, which is wrong for absolute positions (the kit's GPT-2):
the trainer passes them (:class:`_WithPositionIds`).

Only this module imports ``trl``; nothing else in ``claw_lib`` imports it.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Union

import numpy as np
import torch

try:
    import trl
    from accelerate.utils import gather_object
    from datasets import Dataset
    from transformers.trainer_callback import PrinterCallback
    from trl import GRPOConfig, GRPOTrainer
    from trl.models import unwrap_model_for_generation
except ImportError as e:  # pragma: no cover - exercised only where trl is missing
    raise ImportError("claw_lib.integrations.trl needs TRL and accelerate: "
                      "pip install 'trl==1.16.*' 'accelerate>=1.0' (or the kit's dev extra)") from e

from ..config import TEACHERS, PPOConfig, override
from ..models.lm import load_causal_lm, logprobs_from_batch, pad_token_id, peak_memory_gib, resolve_dtype
from ..models.lora import AdapterDisabled as _AdapterDisabled  # the PEFT / kit adapter-disabled teacher
from ..models.lora import count_parameters, has_lora
from ..models.peft_lora import save_run_adapter, trl_peft_config
from ..ops import entropy_from_logits, masked_mean
from ..rl.ppo import (
    LOSSES,
    OPD_HEALTH,
    Advantages,
    Scorer,
    Signals,
    compute_advantages,
    compute_signals,
    minibatch,
    decode_response,
    prepare_policy,
)
from ..rl.run import check_finite, write_metrics, check_judge, eval_tokens
from ..rl.samples import append_records, evaluate_recorded, rollout_records
from ..rl.driver import Rollout, make_rollout
from ..rl.fit import check_fits  # the kit loop's check: positions, top-k, a step's memory (ET13)
from ..rl.strategies import TRL_STRATEGIES, plan
from ..signals.opd import frozen_teacher
from ..signals.reviser import wants_base
from ..toy.env import Feedback, Task
from ..toy.envs import make_env
from ..utils import atomic_write, resolve_device, set_threads

__all__ = ["SIGNALS", "LOSS_TYPES", "FeedbackFn", "ClawGRPOTrainer", "task_dataset", "grpo_config", "make_trainer",
           "train_trl", "step_parts", "merge_step_metrics"]

#: the update's loss families (:data:`claw_lib.rl.strategies.LOSS_FAMILIES`) the engine computes with the kit's own
#: loss functions (:data:`claw_lib.rl.ppo.LOSSES`, on the kit's minibatch of the same rows) instead of TRL's clipped
#: surrogate: OPD as distillation (``opd_kl``: forward KL, top-K reverse KL, or the v2 clipped top-k loss) and the v2
#: hybrid (``combined`` with ``loss.distill="topk_clipped"``)
KIT_LOSSES = ("distill", "topk_clipped", "hybrid")
#: the signals the TRL engine trains on (:data:`claw_lib.rl.strategies.TRL_STRATEGIES`): their advantages in TRL's
#: surrogate, or the kit's own loss (:data:`KIT_LOSSES`: ``opd_kl``, the v2 hybrid)
SIGNALS = TRL_STRATEGIES
#: the kit's loss aggregation -> the TRL loss_type that computes it (see the module docstring)
LOSS_TYPES = {"sample_mean": "grpo", "token_mean": "dapo"}

#: what the user says next: (the task asked, the decoded completion) -> Feedback (next state and a
#: score in [0, 1]) or just the next-state text; ``FactEnv.step`` of the toy world is one
FeedbackFn = Callable[[Task, str], Union[Feedback, str]]


def _as_feedback(x) -> Feedback:
    """A feedback function's answer as a :class:`~claw_lib.toy.users.Feedback` (a bare next-state
    text gets the score NaN: the signals do not need it, only the ``reward/score`` metric does)."""
    if isinstance(x, Feedback):
        return x
    if isinstance(x, str):
        return Feedback(next_state=x, score=float("nan"), kind="unknown")
    if hasattr(x, "next_state"):
        return Feedback(str(x.next_state), float(getattr(x, "score", float("nan"))), getattr(x, "kind", "unknown"))
    raise TypeError(f"a feedback function must return a Feedback or the next-state text, got {type(x).__name__}")


def task_dataset(tasks: Sequence[Task]) -> Dataset:
    """TRL's dataset for ``tasks``: the plain prompt text each task was built with
    (:func:`claw_lib.prompts.build_prompt`; a chat template is already applied when the tokenizer has
    one) and the row's index into ``tasks``, which the trainer uses to give the feedback function the
    kit's :class:`~claw_lib.toy.users.Task` back."""
    return Dataset.from_dict({"prompt": [t.prompt for t in tasks], "task_index": list(range(len(tasks)))})


class _WithPositionIds:
    """Calls a model with ``position_ids`` counted from the attention mask, as ``generate`` does.

    TRL 1.16's GRPO log-prob forward passes the left-padded batch with its mask but no positions, so a
    model with absolute position embeddings (GPT-2, the kit's tiny GPT) scores a padded row at positions
    shifted by its pad count: other log-probs than those of the distribution that sampled it (measured:
    -7.99 instead of -0.0014 nats on a token; the same class of bug as trl#6800, fixed for Online DPO).
    For rotary models the positions only shift together, so this changes nothing there."""

    def __init__(self, model):
        self.model = model

    def __call__(self, *args, attention_mask=None, **kwargs):
        if attention_mask is not None and "position_ids" not in kwargs:
            pos = attention_mask.long().cumsum(-1) - 1
            kwargs["position_ids"] = pos.masked_fill(attention_mask == 0, 1)
        return self.model(*args, attention_mask=attention_mask, **kwargs)


class ClawGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` whose advantages are the kit's per-token advantages.

    model: a causal LM (``nn.Module``) or a name for :func:`claw_lib.models.lm.load_causal_lm`;
    args: a ``GRPOConfig`` (build it with :func:`grpo_config`: the loss type must be the one of the
    kit's aggregation, :data:`LOSS_TYPES`, and the temperature the config's); tasks: the kit's tasks,
    one per dataset row index; feedback: (task, completion text) -> Feedback or next-state text;
    signal: one of :data:`SIGNALS` (default ``cfg.strategy``); cfg: the kit's settings (signal, OPD and
    reward constants, loss; default ``PPOConfig(strategy=signal)``); teacher: "frozen" (default
    ``cfg.opd.teacher``: a copy of the initial policy; with PEFT, the adapter-disabled model) or
    "live" (the current policy, no gradient); judge: the next-state judge (None: the rule judge);
    train_dataset: rows with "prompt" and "task_index" (default :func:`task_dataset` of ``tasks``);
    eval_env / eval_tasks: where ``eval/score`` comes from (optional); out_dir: where the metrics
    files go (main process only). Other keyword arguments go to ``GRPOTrainer``.

    After each generation ``last_rollout``, ``last_signals``, ``last_advantages`` and
    ``last_generation`` (TRL's dict, with the kit's advantages installed) hold this process's batch;
    ``history`` holds one metrics dict per kit step (step 0: the evaluation before training).
    """

    def __init__(self, model, args: GRPOConfig, *, tasks: Sequence[Task], feedback: FeedbackFn,
                 signal: Optional[str] = None, cfg: Optional[PPOConfig] = None, teacher: Optional[str] = None,
                 judge=None, train_dataset=None, processing_class=None, peft_config=None, eval_env=None,
                 eval_tasks: Optional[Sequence[Task]] = None, out_dir=None, **kwargs):
        cfg = cfg if cfg is not None else PPOConfig(strategy=signal or "combined", temperature=args.temperature)
        cfg = replace(cfg, strategy=signal or cfg.strategy)
        teacher = teacher or cfg.opd.teacher
        self._check_settings(cfg, args, teacher)
        if isinstance(model, str):
            model, tok = load_causal_lm(model)
            processing_class = processing_class or tok
        peft = peft_config is not None or hasattr(model, "peft_config") or has_lora(model)
        s = plan(cfg).strategy
        # the hinted teacher, the perplexity judge or the reviser's frozen base (TRL holds the KL's own)
        needs_ref = s.hint or s.judge_lm or wants_base(cfg, count_parameters(model))
        # The copy is taken before GRPOTrainer patches the model's forward (add_fused_lm_head): a deep
        # copy of the patched model would call the original model's weights.
        frozen = frozen_teacher(model) if needs_ref and not peft and (teacher == "frozen" or not s.hint) else None
        self.cfg, self.teacher_kind, self.tasks, self.feedback = cfg, teacher, list(tasks), feedback
        self.loss_cfg = plan(cfg).loss
        self.eval_env, self.eval_tasks = eval_env, list(eval_tasks or [])
        self.out_dir = Path(out_dir) if out_dir else None
        self.history: List[Dict] = []
        self.last_rollout: Optional[Rollout] = None
        self.last_signals: Optional[Signals] = None
        self.last_advantages: Optional[Advantages] = None
        self.last_generation: Optional[Dict] = None
        self._pending_feedback: Optional[List[Feedback]] = None
        self._step_metrics: Dict = {}
        self._update_t0 = 0.0
        self.load_s: Optional[float] = None  # make_trainer: seconds to load the model and build the trainer
        super().__init__(model=model, reward_funcs=[self.user_score], args=args,
                         train_dataset=train_dataset if train_dataset is not None else task_dataset(self.tasks),
                         processing_class=processing_class, peft_config=peft_config, **kwargs)
        self._frozen = frozen.to(self.accelerator.device) if frozen is not None else None
        self.scorer = self._make_scorer(judge)

    # ------------------------------------------------------------------ set-up
    @staticmethod
    def _check_settings(cfg: PPOConfig, args: GRPOConfig, teacher: str) -> None:
        # the strategy, the distillation loss, the aggregation, and what the engine cannot supply (strategies.DRIVERS)
        p = plan(cfg, "trl")
        kit_loss = p.loss_family in KIT_LOSSES  # opd_kl and the v2 hybrid: the kit's loss functions (_kit_loss)
        if kit_loss and (p.loss.kl_coef or args.beta):
            raise ValueError(f"the TRL engine computes {cfg.strategy}'s {cfg.loss.distill} loss with the kit's loss "
                             "function, which takes no KL-to-reference term there (loss.kl_coef 0, as every upstream "
                             "script): use claw_lib.rl.run.train for both")
        if cfg.micro_batch is not None:
            raise ValueError("micro_batch is the kit loop's gradient accumulation; in the TRL engine set "
                             "GRPOConfig's per_device_train_batch_size and gradient_accumulation_steps instead")
        if teacher not in TEACHERS:
            raise ValueError(f"teacher must be {' or '.join(map(repr, TEACHERS))}, got {teacher!r}")
        agg = p.loss.loss_agg
        if args.loss_type != LOSS_TYPES[agg]:
            raise ValueError(f"{cfg.strategy} aggregates the loss as {agg!r}, which is TRL's loss_type="
                             f"{LOSS_TYPES[agg]!r}, not {args.loss_type!r}; build the GRPOConfig with grpo_config(cfg)")
        if not math.isclose(args.temperature, cfg.temperature):
            raise ValueError(f"GRPOConfig.temperature {args.temperature} differs from the kit's {cfg.temperature}: "
                             "the log-probs (and OPD's gap) would be at different temperatures")
        if args.logging_steps != 1:
            raise ValueError("the kit's metrics are recorded per step: set logging_steps=1")

    def _make_scorer(self, judge) -> Scorer:
        """The kit's :class:`~claw_lib.rl.ppo.Scorer` with this trainer's teacher (and perplexity judge)."""
        unwrapped = self.accelerator.unwrap_model(self.model)
        peft = (hasattr(unwrapped, "peft_config") and hasattr(unwrapped, "disable_adapter")) or has_lora(unwrapped)
        ref = _AdapterDisabled(unwrapped) if peft else self._frozen
        sharded = self.is_fsdp_enabled or (self.is_deepspeed_enabled
                                           and self.accelerator.state.deepspeed_plugin.zero_stage == 3)
        s = plan(self.cfg).strategy
        if sharded and (s.hint or s.judge_lm) and (peft or self.teacher_kind == "live"):
            raise NotImplementedError(
                "with FSDP / ZeRO-3 the sharded model's forward is a collective, and the teacher scores only the "
                "turns with a hint (a different number on each process): use the frozen teacher without PEFT, or DDP")
        scorer = Scorer.for_run(override(self.cfg, {"opd.teacher": self.teacher_kind}), self.model, ref,
                                self.processing_class)
        scorer.judge = judge
        return scorer

    # ------------------------------------------------------------------ the user's reply (TRL's reward function)
    def user_score(self, prompts, completions, completion_ids, task_index, **kwargs) -> List[float]:
        """TRL's reward function: the user's reply to each completion (kept for the signals) and its
        score (TRL's ``reward`` log; 0 where the feedback gives no score). The text the user reads is the
        kit's :func:`~claw_lib.rl.ppo.decode_response` of the completion ids."""
        tok = self.processing_class
        fbs = [_as_feedback(self.feedback(self.tasks[int(i)], decode_response(tok, list(ids))))
               for i, ids in zip(task_index, completion_ids)]
        self._pending_feedback = fbs
        return [f.score if math.isfinite(f.score) else 0.0 for f in fbs]

    # ------------------------------------------------------------------ TRL batch -> the kit's stages
    def _rollout(self, inputs, out, feedback: List[Feedback]) -> Rollout:
        """A :class:`~claw_lib.rl.ppo.Rollout` of this process's rows, from TRL's tensors."""
        p_ids, p_mask = out["prompt_ids"], out["prompt_mask"].bool()
        c_ids, c_mask = out["completion_ids"], out["completion_mask"]
        prompt_ids = [row[m].tolist() for row, m in zip(p_ids, p_mask)]
        n = c_mask.sum(1).tolist()
        response_ids = [row[:k].tolist() for row, k in zip(c_ids, n)]
        old = out.get("old_per_token_logps")
        if old is None:  # TRL skips it when the ratio is 1; the same function as the loss's, no gradient
            with torch.no_grad():
                old, _, _ = self._get_per_token_logps_and_entropies(
                    self.model, torch.cat([p_ids, c_ids], 1), torch.cat([out["prompt_mask"], c_mask], 1),
                    c_ids.size(1), batch_size=self.args.per_device_train_batch_size)
        tasks = [self.tasks[int(x["task_index"])] for x in inputs]
        texts = [decode_response(self.processing_class, ids) for ids in response_ids]
        k = plan(self.cfg).old_topk

        @torch.no_grad()
        def top_ids(batch):  # the top-k losses: the sampling policy's k most likely ids per position, as the loop keeps
            return None, None, (logprobs_from_batch(self.model, batch, temperature=self.cfg.temperature, topk=k)[1]
                                if k else None)

        return make_rollout(tasks, prompt_ids, response_ids, texts, feedback, pad_token_id(self.processing_class),
                            out["completion_ids"].device, logprobs=old, ref_logprobs=out.get("ref_per_token_logps"),
                            score=top_ids)

    def _install(self, out, ro: Rollout, adv: Advantages) -> None:
        """The kit's advantages and mask into TRL's batch dict (collectives: every process calls it)."""
        B, C = out["completion_ids"].shape
        T = adv.advantages.shape[1]
        dev = out["completion_ids"].device
        A = torch.zeros(B, C, device=dev)
        M = torch.zeros(B, C, dtype=out["completion_mask"].dtype, device=dev)
        A[:, :T], M[:, :T] = adv.advantages, adv.mask.to(M.dtype)
        loss_mask = out["completion_mask"] * M
        if "tool_mask" in out:
            loss_mask = loss_mask * out["tool_mask"]
        out["tool_mask"] = loss_mask                       # loss only: completion_mask stays the attention mask
        out["advantages"] = A * loss_mask                  # (B, C): _compute_loss only unsqueezes (B,) advantages
        out["num_items_in_batch"] = self.accelerator.gather(loss_mask.sum()).sum()  # dapo's denominator
        counts = self.accelerator.gather(torch.tensor([B, int(adv.sample_rows.sum())], device=dev)).view(-1, 2).sum(0)
        rows, samples = int(counts[0]), int(counts[1])
        # sample_mean: TRL's "grpo" averages over all rows, the kit over its sample rows (0-dim: kept whole
        # when TRL shuffles and splits the batch)
        scale = rows / samples if self.args.loss_type == "grpo" and samples else 1.0
        if plan(self.cfg).loss_family in KIT_LOSSES:  # the kit's loss: its own mean of this process's rows, weighted
            scale = self._kit_loss_scale(adv)           # so that DDP's mean over processes is the whole batch's
        out["claw_loss_scale"] = torch.tensor(scale, device=dev)
        out["claw_row"] = torch.arange(B, device=dev)  # which rows of the generation batch a shuffled chunk holds

    def _kit_loss_scale(self, adv: Advantages) -> float:
        """n_p R / N of this process: its count (sample rows for "sample_mean", masked tokens for "token_mean")
        over the mean count of the R processes; 1.0 with one process. Exact for one minibatch (``minibatches=1``)."""
        sample = plan(self.cfg).loss.loss_agg == "sample_mean"
        n = float(adv.sample_rows.sum() if sample else adv.mask.sum())
        total = float(self.accelerator.gather(torch.tensor([n], device=adv.mask.device)).sum())
        return n * self.accelerator.num_processes / total if total else 1.0

    def _generate_and_score_completions(self, inputs):
        t0 = time.perf_counter()
        out = super()._generate_and_score_completions(inputs)      # sampling, TRL's log-probs, user_score
        feedback, self._pending_feedback = self._pending_feedback, None
        t1 = time.perf_counter()
        ro = self._rollout(inputs, out, feedback)
        sig = compute_signals(ro, self.cfg, self.scorer)
        t2 = time.perf_counter()
        adv = compute_advantages(ro, sig, self.cfg)
        self._install(out, ro, adv)
        self.last_rollout, self.last_signals, self.last_advantages, self.last_generation = ro, sig, adv, out
        said = [dict(r, index=k) for k, r in  # every process's rows, numbered through
                enumerate(gather_object(rollout_records(ro, sig, adv, self.processing_class, "trl")))]
        if self.out_dir and self.accelerator.is_main_process:  # what the model said (claw_lib.rl.samples)
            cycle = self.args.steps_per_generation * self.args.num_iterations
            append_records(self.out_dir / "samples.jsonl", self.state.global_step // cycle + 1, said)
        self._step_metrics = {**merge_step_metrics(gather_object([step_parts(ro, sig, adv)])),
                              "timing/rollout_s": t1 - t0, "timing/score_s": t2 - t1}
        self._update_t0 = t2
        return out

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, *args, **kwargs):
        # every TRL log-prob pass (old, reference, the loss) at the positions generate() sampled with;
        # image models keep TRL's own call (their position ids are not a simple count)
        if kwargs.get("pixel_values") is None:
            model = _WithPositionIds(model)
        return super()._get_per_token_logps_and_entropies(model, input_ids, attention_mask, *args, **kwargs)

    def _compute_loss(self, model, inputs):
        family = plan(self.cfg).loss_family
        loss = self._kit_loss(model, inputs, family) if family in KIT_LOSSES else super()._compute_loss(model, inputs)
        scale = inputs.get("claw_loss_scale")
        return loss * scale if scale is not None else loss

    def _kit_loss(self, model, inputs, family: str):
        """The kit loop's loss (:data:`claw_lib.rl.ppo.LOSSES`) on the rows of this chunk of the generation batch
        (``claw_row``, which TRL shuffled and split): the kit's own minibatch of them (:func:`claw_lib.rl.ppo.minibatch`:
        the policy's forward on the packed rows at the rollout temperature, the hinted teacher's on its prompts, the
        rollout's log-probs and top-k ids), so both engines compute one implementation. Logs the policy's entropy and
        the clip shares as TRL's ``entropy`` and ``clip_ratio/region_mean`` (and ``topk_clipfrac`` for the hybrid)."""
        rows = inputs["claw_row"]
        ro, sig, adv = self.last_rollout, self.last_signals, self.last_advantages
        mb, _ = minibatch(model, ro, sig, adv, self.cfg, rows, None, self.scorer.teacher, ro.old_topk)
        loss, clip = LOSSES[family](mb, plan(self.cfg).loss, self.cfg)
        metrics = self._metrics["train"]
        with torch.no_grad():
            metrics["entropy"].append(float(masked_mean(entropy_from_logits(mb.logits), mb.mask)) if mb.mask.any() else 0.0)
            metrics["clip_ratio/region_mean"].append(float(clip["clipfrac"]))
            if "topk_clipfrac" in clip:
                metrics["topk_clipfrac"].append(float(clip["topk_clipfrac"]))
        return loss

    # ------------------------------------------------------------------ metrics, evaluation
    def eval_score(self) -> Optional[float]:
        """``eval/score``: the user's mean score of greedy answers to ``eval_tasks`` (every process
        computes it: with sharded models generation is a collective); None without an eval env."""
        if self.eval_env is None or not self.eval_tasks:
            return None
        summon = getattr(getattr(self, "_dist", None), "summon_full_params", None)
        with unwrap_model_for_generation(self.model_wrapped, self.accelerator,
                                         gather_deepspeed3_params=self.args.ds3_gather_for_generation) as m, \
                (summon(self.model_wrapped, recurse=False) if summon else contextlib.nullcontext()):
            was = m.training
            m.eval()
            try:
                by, self._eval_answers = evaluate_recorded(m, self.processing_class, self.eval_env, self.eval_tasks,
                                                           eval_tokens(self.cfg))
                return by["all"]
            finally:
                m.train(was)

    def _record(self, metrics: Dict) -> None:
        self.history.append(metrics)
        if self.out_dir and self.accelerator.is_main_process:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            write_metrics(self.out_dir, self.history)
            if "eval/score" in metrics:  # the answers behind it
                append_records(self.out_dir / "eval.jsonl", metrics["step"], getattr(self, "_eval_answers", []))

    def train(self, *args, **kwargs):
        """TRL's training, after recording step 0 (the evaluation before any update) as the kit does."""
        if not self.history:
            if self.out_dir and self.accelerator.is_main_process:
                self.out_dir.mkdir(parents=True, exist_ok=True)
                for name, obj in (("config.json", asdict(self.cfg)), ("engine.json", self.engine_settings())):
                    with atomic_write(self.out_dir / name) as f:  # whole or not at all
                        f.write(json.dumps(obj, indent=1))
            score = self.eval_score()
            self._record({"step": 0, **({"eval/score": score} if score is not None else {}),
                          **({"timing/load_s": self.load_s} if self.load_s is not None else {})})
        return super().train(*args, **kwargs)

    def engine_settings(self) -> Dict:
        """What this engine ran with, besides ``config.json`` (written as ``engine.json``)."""
        a = self.args
        return {"engine": "trl", "trl_version": trl.__version__, "loss_type": a.loss_type, "epsilon": a.epsilon,
                "epsilon_high": a.epsilon_high, "beta": a.beta, "num_generations": a.num_generations,
                "per_device_train_batch_size": a.per_device_train_batch_size,
                "steps_per_generation": a.steps_per_generation, "num_iterations": a.num_iterations,
                "num_processes": self.accelerator.num_processes, "teacher": self.teacher_kind,
                "use_vllm": a.use_vllm, "bf16": a.bf16}

    def log(self, logs: Dict[str, float], start_time: Optional[float] = None) -> None:
        """TRL's log, then one kit metrics row when a kit step (one generation batch: all its
        optimizer steps) is done, with the evaluation when it is due."""
        super().log(logs, start_time)
        cycle = self.args.steps_per_generation * self.args.num_iterations
        if "loss" not in logs or not self.model.training or self.state.global_step % cycle:
            return
        # the kit loop's NaN stop: weights that became NaN or inf stop here, naming the options, not inside
        # TRL's sampler at the next step (ET12)
        check_finite(self.model, None, self.cfg, self.state.global_step // cycle)
        step, total = self.state.global_step // cycle, max(self.args.max_steps // cycle, 1)
        m = {"step": step, **self._step_metrics, "policy/loss": float(logs["loss"]),
             "timing/update_s": time.perf_counter() - self._update_t0,
             "memory/peak_gib": peak_memory_gib(str(self.accelerator.device))}
        for trl_key, key in (("entropy", "policy/entropy"), ("clip_ratio/region_mean", "policy/clipfrac"),
                             ("kl", "objective/kl"), ("topk_clipfrac", "policy/topk_clipfrac")):
            if logs.get(trl_key) is not None:
                m[key] = float(logs[trl_key])
        if self.cfg.eval_every and (step % self.cfg.eval_every == 0 or step == total):
            score = self.eval_score()
            if score is not None:
                m["eval/score"] = score
        self._record(m)


# ---------------------------------------------------------------------- metrics over all processes
def step_parts(ro: Rollout, sig: Signals, adv: Advantages) -> Dict:
    """What one process contributes to a step's metrics (plain lists, to gather across processes)."""
    return {"scores": [float(s) for s in ro.scores], "accepted": [h is not None for h in sig.hints],
            "signal": sig.token_signal[sig.mask].tolist(), "advantages": adv.advantages[adv.mask].tolist(),
            "has_sample": adv.mask.any(1).tolist(), "tokens": int(ro.batch.response_mask.sum()),
            "opd_health": {k: v for k, v in sig.metrics.items() if k in OPD_HEALTH},
            "judge_votes": ([sum(x) for x in zip(*(t.failed_votes for t in sig.judged))] or [0, 0])
            if "judge/failed_share" in sig.metrics else None}


def merge_step_metrics(parts: Sequence[Dict]) -> Dict[str, float]:
    """The ``reward/*`` and ``opd/*`` metrics of :func:`~claw_lib.rl.ppo.compute_signals` and
    :func:`~claw_lib.rl.ppo.compute_advantages` (same definitions, :data:`claw_lib.rl.ppo.METRICS`)
    over the rows of every process, plus ``reward/score``, ``timing/rollout_tokens`` and, with an LLM judge,
    ``judge/failed_share`` (the failed votes of every process over all their votes). The OPD health metrics are the
    mean of the processes' values (exact with one process)."""
    cat = lambda k: [x for p in parts for x in p[k]]  # noqa: E731
    v = torch.tensor(cat("signal"), dtype=torch.float32)
    a = torch.tensor(cat("advantages"), dtype=torch.float32)
    health = {k: float(np.mean([p["opd_health"][k] for p in parts if k in p.get("opd_health", {})]))
              for k in OPD_HEALTH if any(k in p.get("opd_health", {}) for p in parts)}
    votes = [p["judge_votes"] for p in parts if p.get("judge_votes") is not None]  # (failed, all) per process
    judge = {"judge/failed_share": sum(v[0] for v in votes) / max(sum(v[1] for v in votes), 1)} if votes else {}
    return {**health, **judge, "reward/score": float(np.mean(cat("scores"))),
            "opd/accepted_fraction": float(np.mean(cat("accepted"))),
            "reward/token_mean": float(v.mean()) if v.numel() else 0.0,
            "reward/token_std": float(v.std()) if v.numel() > 1 else 0.0,
            "reward/positive_share": float((v > 0).float().mean()) if v.numel() else 0.0,
            "reward/negative_share": float((v < 0).float().mean()) if v.numel() else 0.0,
            "reward/advantage_mean": float(a.mean()) if a.numel() else 0.0,
            "reward/masked_fraction": float(np.mean(cat("has_sample"))),
            "timing/rollout_tokens": int(sum(p["tokens"] for p in parts))}


# ---------------------------------------------------------------------- the kit's settings -> TRL
_GRPO_FIELDS = {f.name for f in dataclasses.fields(GRPOConfig)}


def grpo_config(cfg: PPOConfig, output_dir=None, num_generations: int = 2, num_processes: Optional[int] = None,
                **overrides) -> GRPOConfig:
    """The ``GRPOConfig`` that trains like ``claw_lib.rl.run.train(cfg)``.

    One kit step = one generation batch of ``cfg.batch_size`` completions over all processes:
    ``cfg.batch_size / num_generations`` prompts with ``num_generations`` completions each (TRL needs
    at least 2; the kit's signals are per completion, so the groups only change which prompts are
    drawn), ``per_device_train_batch_size = batch_size / (num_processes * minibatches)``,
    ``steps_per_generation = minibatches`` (one optimizer step per minibatch, as the kit),
    ``num_iterations = epochs``, ``max_steps = steps * minibatches * epochs``;
    ``max_completion_length = max_new_tokens``; sampling at ``temperature`` with no top-k / top-p;
    AdamW at ``lr`` (constant, no weight decay) and ``max_grad_norm``; the loss as in the module
    docstring (loss type, clip range, ``beta = kl_coef``); full precision, no gradient checkpointing,
    no dropout, the dataset in order (the kit's prompts per step), a log line per optimizer step.
    ``disable_tqdm = not progress``. num_processes: default ``$WORLD_SIZE`` (set by ``accelerate
    launch`` / ``torchrun``; 1 without a launcher). ``overrides`` go to ``GRPOConfig`` last (``use_vllm=True``,
    ``bf16=True``, ``activation_checkpointing=True``, ...).
    """
    missing = [k for k in ("lr", "max_new_tokens", "eval_prompts") if getattr(cfg, k) is None]
    if missing:
        raise ValueError(f"{', '.join(missing)} depend on the model: resolve them first (make_trainer does, or "
                         "claw_lib.config.resolve_for_model(cfg, n_params))")
    L = plan(cfg).loss
    # the launcher's WORLD_SIZE (torchrun / accelerate launch): accelerate's state is set up by the
    # GRPOConfig itself (with use_cpu), and creating it earlier would set it up without that flag
    R = num_processes or int(os.environ.get("WORLD_SIZE", "1"))
    if L.kl_coef and L.kl_estimator == "k1":
        raise ValueError("TRL's KL penalty is the k3 estimator; kl_estimator='k1' has no TRL equivalent")
    if cfg.batch_size % (R * cfg.minibatches):
        raise ValueError(f"batch_size {cfg.batch_size} must split evenly over {R} processes x {cfg.minibatches} "
                         "minibatches")
    if cfg.batch_size % num_generations:
        raise ValueError(f"batch_size {cfg.batch_size} must be a multiple of num_generations {num_generations}")
    kw = dict(
        output_dir=str(output_dir or Path(tempfile.gettempdir()) / "claw_trl"),
        per_device_train_batch_size=cfg.batch_size // (R * cfg.minibatches), gradient_accumulation_steps=1,
        steps_per_generation=cfg.minibatches, num_iterations=cfg.epochs, num_generations=num_generations,
        max_steps=cfg.steps * cfg.minibatches * cfg.epochs, max_completion_length=cfg.max_new_tokens,
        temperature=cfg.temperature, top_k=0, top_p=1.0,
        learning_rate=cfg.lr, lr_scheduler_type="constant", warmup_steps=0, weight_decay=0.0, optim="adamw_torch",
        max_grad_norm=L.max_grad_norm,
        loss_type=LOSS_TYPES[L.loss_agg], epsilon=L.eps, epsilon_high=L.eps_high, beta=L.kl_coef,
        scale_rewards="none", mask_truncated_completions=False,
        seed=cfg.seed, shuffle_dataset=False, use_cpu=cfg.device == "cpu",
        bf16=False, fp16=False, disable_dropout=True, disable_tqdm=not cfg.progress,
        logging_steps=1, save_strategy="no", report_to="none", log_completions=False,
        dataloader_num_workers=0, ddp_find_unused_parameters=False,
    )
    # transformers 5 renamed gradient_checkpointing (TRL once defaulted it to True for GRPO)
    kw["activation_checkpointing" if "activation_checkpointing" in _GRPO_FIELDS else "gradient_checkpointing"] = False
    kw.update(overrides)
    return GRPOConfig(**kw)


def make_trainer(cfg: PPOConfig, out_dir=None, *, num_generations: int = 2, teacher: Optional[str] = None,
                 peft_config=None, model=None, tokenizer=None, grpo_args: Optional[Dict] = None,
                 judge=None) -> ClawGRPOTrainer:
    """A :class:`ClawGRPOTrainer` for the toy world with the settings of ``claw_lib.rl.run.train(cfg)``.

    The prompts of step k are the first ``batch_size / num_generations`` tasks the kit's loop would
    sample at step k (``FactEnv`` re-seeded with ``seed * 100_003 + k``); the user answering them is
    ``FactEnv.step`` of a ``FactEnv(seed=cfg.seed)`` (one per process, seeded apart); ``eval/score``
    uses the same evaluation env and prompts as ``train`` (``FactEnv(seed=10_000 + seed)``,
    ``eval_prompts`` tasks; with ``task.world == "real"`` the real-world questions, evaluated on their "eval"
    split). model / tokenizer: an already loaded policy (default: ``load_causal_lm(cfg.model)`` in
    ``cfg.dtype``, on the CPU; accelerate moves it); grpo_args: ``GRPOConfig`` overrides (see
    :func:`grpo_config`); judge: the next-state judge that ``cfg.opd.judge`` names
    (:func:`claw_lib.apps.train_judge.training_judge`; None: the rule judge). The per-model settings are resolved
    from the model
    (:func:`claw_lib.rl.ppo.prepare_policy`): with ``lora_rank > 0`` and no ``peft_config`` the kit's own
    adapters are added (claw_lib.models.lora; the teacher is then the adapter-disabled model, no copy).
    """
    check_judge(cfg, judge)
    set_threads(cfg.threads)
    t_load = time.perf_counter()
    if model is None:
        model, tok = load_causal_lm(cfg.model, dtype=resolve_dtype(cfg.dtype, resolve_device(cfg.device), cfg.model))
        tokenizer = tokenizer or tok
    elif tokenizer is None:
        raise ValueError("pass the tokenizer with the model (make_trainer(cfg, model=m, tokenizer=tok))")
    peft_config = peft_config or trl_peft_config(cfg, model)  # cfg.lora_impl: PEFT's adapters, through TRL
    if peft_config is not None and cfg.lora_rank is None:
        cfg = replace(cfg, lora_rank=int(getattr(peft_config, "r", 16)))   # the adapter's learning rate
    cfg, _ = prepare_policy(model, cfg, reference=False, adapters=peft_config is None)
    args = grpo_config(cfg, Path(out_dir) / "trl" if out_dir else None, num_generations, **(grpo_args or {}))
    env = make_env(cfg.task, cfg.seed, tokenizer)
    eval_env = make_env(cfg.task, 10_000 + cfg.seed, tokenizer, env.world, evaluation=True)
    tasks: List[Task] = []
    for step in range(cfg.steps):
        env.reset(cfg.seed * 100_003 + step)
        tasks += env.sample(cfg.batch_size // num_generations)
    check_fits(cfg, model, tokenizer, [], tasks[: cfg.batch_size // num_generations] * num_generations,
               resolve_device(cfg.device), engine="trl")
    trainer = ClawGRPOTrainer(model, args, tasks=tasks, feedback=env.step, cfg=cfg, teacher=teacher,
                              processing_class=tokenizer, peft_config=peft_config, eval_env=eval_env,
                              eval_tasks=eval_env.sample(cfg.eval_prompts), out_dir=out_dir, judge=judge)
    if args.generation_batch_size != cfg.batch_size:  # e.g. num_processes guessed wrong without a launcher
        raise ValueError(f"one generation batch holds {args.generation_batch_size} completions "
                         f"({trainer.accelerator.num_processes} processes), not the config's batch_size {cfg.batch_size}")
    # the user who answers: one per process, its replies seeded apart (the process index is known now)
    trainer.feedback = make_env(cfg.task, cfg.seed + 7_919 * trainer.accelerator.process_index, tokenizer,
                                env.world).step
    if not cfg.progress:  # without a progress bar transformers prints every log dict instead
        trainer.remove_callback(PrinterCallback)
    trainer.load_s = time.perf_counter() - t_load
    return trainer


def train_trl(cfg: PPOConfig, out_dir=None, *, num_generations: int = 2, teacher: Optional[str] = None,
              peft_config=None, grpo_args: Optional[Dict] = None, judge=None) -> List[Dict]:
    """Train with TRL as ``claw_lib.rl.run.train(cfg, out_dir)`` trains with the kit's loop; returns
    the per-step metrics (step 0: the evaluation before training), also written to ``out_dir``
    (``metrics.jsonl``, ``metrics.csv``, ``config.json``, and ``engine.json`` with TRL's settings) by
    the main process. Launch with ``accelerate launch`` for several processes (docs/trl.md). judge: as
    :func:`make_trainer`'s."""
    trainer = make_trainer(cfg, out_dir, num_generations=num_generations, teacher=teacher, peft_config=peft_config,
                           grpo_args=grpo_args, judge=judge)
    trainer.train()
    if out_dir and trainer.accelerator.is_main_process:  # PEFT's adapter in PEFT's format: RUN/adapter
        save_run_adapter(trainer.accelerator.unwrap_model(trainer.model), out_dir)
    return trainer.history
