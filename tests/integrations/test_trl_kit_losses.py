"""OPD as distillation (``opd_kl``) and the paper's second version's clipped top-k loss in the TRL engine (issue 36).

The TRL engine computes these with the kit's own loss functions (:data:`claw_lib.rl.ppo.LOSSES`) on the rows TRL
shuffled into each chunk (``ClawGRPOTrainer._kit_loss``). Checked on the tiny GPT with the teacher user (every turn
hinted), one TRL step each of opd_kl's three losses (forward KL, top-K reverse KL, the clipped top-k) and of the v2
hybrid (combined with ``loss.distill="topk_clipped"``):

* the loss TRL backpropagates equals the kit loop's (:func:`claw_lib.rl.ppo.ppo_update`'s ``policy/loss``) on the
  same rollout, signals and advantages from the same initial weights;
* the forward KL also equals KL(pi_T || pi_S) written out here over the whole vocabulary, from independent forwards
  of the initial policy (the student's prompt) and the frozen teacher (the hinted prompt), averaged per response and
  then over the hinted responses;
* the weights move, and the step's metrics carry the kit's columns.
"""
import os

import pytest
import torch

pytest.importorskip("trl", reason="the TRL engine needs trl and accelerate (pip install -e '.[dev]')")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from claw_lib.config import LossConfig, PPOConfig, TaskConfig  # noqa: E402
from claw_lib.integrations.trl import make_trainer  # noqa: E402
from claw_lib.models.lm import encode, load_causal_lm  # noqa: E402
from claw_lib.rl import ppo  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning")  # TRL's
CASES = [("opd_kl", "forward_kl"), ("opd_kl", "topk_reverse_kl"), ("opd_kl", "topk_clipped"), ("combined", "topk_clipped")]


def _cfg(strategy, distill):
    return PPOConfig(strategy=strategy, steps=1, batch_size=4, max_new_tokens=12, eval_prompts=2, lr=1e-3, threads=1,
                     progress=False, task=TaskConfig(user="teacher"), loss=LossConfig(distill=distill))


@pytest.fixture(scope="module")
def steps():
    """One TRL step per case: (trainer, the losses it backpropagated, the initial weights)."""
    out = {}
    for strategy, distill in CASES:
        trainer = make_trainer(_cfg(strategy, distill))
        initial = {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}
        losses, inner = [], trainer._compute_loss

        def record(model, inputs, inner=inner, losses=losses):
            loss = inner(model, inputs)
            losses.append(float(loss.detach()))
            return loss

        trainer._compute_loss = record
        trainer.train()
        out[strategy, distill] = (trainer, losses, initial)
    return out


def _initial_policy(initial):
    """A fresh tiny GPT with the trainer's initial weights (a deep copy of TRL's patched model would share them)."""
    policy, _ = load_causal_lm("tiny")
    policy.load_state_dict(initial)
    return policy


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(c))
def test_the_loss_is_the_kit_loops_on_the_same_batch(steps, case):
    trainer, losses, initial = steps[case]
    assert len(losses) == 1                                            # one chunk: minibatches=1
    ro, sig, adv = trainer.last_rollout, trainer.last_signals, trainer.last_advantages
    assert all(sig.hints) and adv.mask.any()                           # the teacher user: every turn is hinted
    policy = _initial_policy(initial)
    opt = torch.optim.AdamW([p for p in policy.parameters() if p.requires_grad], lr=1e-3)
    kit = ppo.ppo_update(policy, opt, ro, sig, adv, trainer.cfg, 0, teacher=trainer.scorer.teacher)
    assert losses[0] == pytest.approx(kit["policy/loss"], rel=1e-5, abs=1e-6)
    h = trainer.history[-1]
    assert h["policy/loss"] == pytest.approx(losses[0], rel=1e-4)   # TRL's logged loss (rounded to 4 digits)
    assert h["policy/clipfrac"] == pytest.approx(kit["policy/clipfrac"], abs=1e-6)
    if case == ("combined", "topk_clipped"):
        assert h["policy/topk_clipfrac"] == pytest.approx(kit["policy/topk_clipfrac"], abs=1e-6)
    moved = [k for k, v in trainer.model.state_dict().items() if k in initial and not torch.equal(v, initial[k])]
    assert moved                                                       # the update changed the weights


def test_forward_kl_is_the_kl_written_out(steps):
    trainer, losses, initial = steps["opd_kl", "forward_kl"]
    ro, sig = trainer.last_rollout, trainer.last_signals
    policy, tok = _initial_policy(initial), trainer.processing_class
    teacher, T = trainer.scorer.teacher, trainer.cfg.temperature
    per_row = []
    with torch.no_grad():
        for task, p_ids, r_ids, hint in zip(ro.tasks, ro.prompt_ids, ro.response_ids, sig.hints):
            t_ids = encode(tok, task.teacher_prompt(hint, tok))
            s = policy(input_ids=torch.tensor([p_ids + r_ids])).logits[0, len(p_ids) - 1:-1].double() / T
            t = teacher(input_ids=torch.tensor([t_ids + r_ids])).logits[0, len(t_ids) - 1:-1].double() / T
            log_s, log_t = s.log_softmax(-1), t.log_softmax(-1)
            per_row.append(float((log_t.exp() * (log_t - log_s)).sum(-1).mean()))   # KL(T || S), token mean
    want = sum(per_row) / len(per_row)                                             # sample mean over the hinted rows
    assert want > 0.01 and losses[0] == pytest.approx(want, rel=1e-4)
