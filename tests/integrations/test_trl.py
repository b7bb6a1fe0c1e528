"""The TRL engine (claw_lib.integrations.trl): TRL's GRPOTrainer trains on the kit's advantages.

Checked against the kit's own functions and formulas, not against the engine's code:

* each row's advantages and mask equal what ``binary_rl_advantages`` / ``opd_advantages`` /
  ``combined_advantages`` give for that completion's ids, with the teacher and student log-probs
  recomputed here from the initial tiny GPT (no re-tokenised text anywhere);
* the first update's loss (ratio 1) equals the per-strategy aggregation written out by hand;
* the parameters move, the frozen teacher does not, and turns without a sample change neither the
  loss's numerator nor its denominator;
* two processes (DDP over gloo, launched with ``accelerate launch``) end with identical weights.

Skipped where trl is not installed (it is in the dev extra).
"""
import json
import math
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("trl", reason="the TRL engine needs trl and accelerate (pip install -e '.[dev]')")
pytest.importorskip("accelerate", reason="the TRL engine needs trl and accelerate (pip install -e '.[dev]')")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

from claw_lib.config import LossConfig, OPDConfig, PPOConfig, TaskConfig  # noqa: E402
from claw_lib.integrations.trl import make_trainer, merge_step_metrics, step_parts, train_trl  # noqa: E402
from claw_lib.models.lm import encode, ids_logprobs, load_causal_lm  # noqa: E402
from claw_lib.prompts import teacher_prompt  # noqa: E402
from claw_lib.rl.ppo import decode_response  # noqa: E402
from claw_lib.signals.opd import binary_rl_advantages, combined_advantages, judge_turn, opd_advantages  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning")  # TRL's


def _cfg(strategy, **kw):
    base = dict(strategy=strategy, steps=1, batch_size=8, max_new_tokens=12, eval_prompts=4, lr=1e-3, threads=1,
                progress=False, task=TaskConfig(misconception_share=0.5))
    base.update(kw)
    return PPOConfig(**base)


def digest(model):
    return [p.detach().clone() for _, p in sorted(model.named_parameters())]


def same(a, b):
    return all(torch.equal(x, y) for x, y in zip(a, b))


def hand_loss(A, M, rows, agg):
    """The loss at ratio 1: per-token -A over the mask, then the kit's aggregation, by hand."""
    A, M = A.double(), M.double()
    per_row = (-A * M).sum(1) / M.sum(1).clamp(min=1)
    if agg == "sample_mean":                        # each sample's token mean, mean over the sample rows
        return float((per_row * rows.double()).sum() / rows.double().sum().clamp(min=1))
    return float((-A * M).sum() / M.sum())          # token mean over every masked token


@pytest.fixture(scope="module")
def initial():
    """The tiny GPT as it ships: the policy before the update and the frozen teacher."""
    return load_causal_lm("tiny")


@pytest.fixture(scope="module")
def runs():
    """One update of each OpenClaw signal, on the same prompts and seed (trainer, initial weights)."""
    out = {}
    for strategy in ("binary_rl", "opd", "combined"):
        trainer = make_trainer(_cfg(strategy))
        before = digest(trainer.model)
        trainer.train()
        out[strategy] = (trainer, before)
    return out


@pytest.mark.parametrize("strategy", ["binary_rl", "opd", "combined"])
def test_advantages_are_the_kits_row_by_row(runs, initial, strategy):
    """TRL's batch carries, on each completion's own token ids, the advantages of the kit's
    functions: the judge's score on every token (Binary RL), log pi_T(y | x + hint) - log pi_old(y | x)
    with both log-probs recomputed here from the initial model, unpadded (OPD), their sum with the
    dispatch (combined); rows without a sample are masked in tool_mask, padding is 0. TRL's own
    log-probs of left-padded rows agree only with position ids from the mask (GPT-2 positions are
    absolute; TRL 1.16 passes none, the engine adds them)."""
    trainer, _ = runs[strategy]
    model, tok = initial
    ro, gen, cfg = trainer.last_rollout, trainer.last_generation, trainer.cfg
    B, C = gen["completion_ids"].shape
    assert B == cfg.batch_size and len(ro.response_ids) == B     # one process: the whole generation batch
    kinds = set()
    for b in range(B):
        task, ids = ro.tasks[b], ro.response_ids[b]
        n = int(gen["completion_mask"][b].sum())
        assert ids == gen["completion_ids"][b, :n].tolist() and len(ids) == n
        assert ro.prompt_ids[b] == encode(tok, task.prompt)        # TRL's prompt ids, unpadded
        assert ro.texts[b] == decode_response(tok, ids)
        old = ids_logprobs(model, [ro.prompt_ids[b]], [ids], tok.pad_token_id)[0][0]
        np.testing.assert_allclose(ro.logprobs[b, :n].numpy(), old, atol=1e-4)   # TRL's log-probs
        s = judge_turn(ro.texts[b], ro.feedback[b].next_state)
        kinds.add(s.kind)
        t_lp = None
        if s.hint and strategy != "binary_rl":
            t_ids = encode(tok, teacher_prompt(task.fact.question(), s.hint, task.fact.lang))
            t_lp = ids_logprobs(model, [t_ids], [ids], tok.pad_token_id)[0][0]
        if strategy == "binary_rl":
            a, m = binary_rl_advantages(s.score, n)
        elif strategy == "opd":
            a, m = (opd_advantages(t_lp, old), np.ones(n, bool)) if t_lp is not None else (np.zeros(n), np.zeros(n, bool))
        else:
            a, m = combined_advantages(s, t_lp, old)
        np.testing.assert_allclose(gen["tool_mask"][b, :n].numpy(), m.astype(int))
        np.testing.assert_allclose(gen["advantages"][b, :n].numpy(), a * m, atol=1e-4)
        assert not gen["advantages"][b, n:].any() and not gen["tool_mask"][b, n:].any()
    assert {"both", "rl"} <= kinds                           # the batch holds corrections with hints and thanks
    assert (gen["prompt_mask"] == 0).any()                   # and left-padded prompts (their positions matter)
    # the step's metrics over the gathered rows are the kit's stages' own metrics
    merged = merge_step_metrics([step_parts(ro, trainer.last_signals, trainer.last_advantages)])
    for k, v in {**trainer.last_signals.metrics, **trainer.last_advantages.metrics}.items():
        assert merged[k] == pytest.approx(v, abs=1e-6), k


@pytest.mark.parametrize("strategy", ["binary_rl", "opd", "combined"])
def test_first_loss_is_the_kits_aggregation_and_the_parameters_move(runs, initial, strategy):
    """Ratio 1 on the first use of a batch, so the loss is -A averaged as the kit does for the
    strategy (OpenClaw's per-sample token mean over the sample rows); the update moves every
    parameter tensor, and the frozen teacher stays the initial model."""
    trainer, before = runs[strategy]
    adv, L = trainer.last_advantages, trainer.loss_cfg
    assert L.loss_agg == "sample_mean" and trainer.args.loss_type == "grpo"
    assert (trainer.args.epsilon, trainer.args.epsilon_high) == (L.eps, L.eps_high) == (0.2, 0.2 if strategy == "opd" else 0.28)
    expected = hand_loss(adv.advantages, adv.mask, adv.sample_rows, "sample_mean")
    assert trainer.history[1]["policy/loss"] == pytest.approx(expected, rel=1e-5, abs=1e-7)
    after = digest(trainer.model)
    assert not any(torch.equal(x, y) for x, y in zip(before, after))
    if strategy == "opd":
        assert same(digest(trainer._frozen), digest(initial[0]))
        assert trainer.scorer.teacher is trainer._frozen


def test_turns_without_a_sample_change_neither_numerator_nor_denominator(runs):
    """OPD: a turn without an accepted hint is masked. Changing its advantages leaves the loss as it
    is, and dropping its rows from the batch too (it is not in the denominator); changing a kept
    row's advantage does move the loss (the check is not vacuous)."""
    trainer, _ = runs["opd"]
    gen = trainer.last_generation
    keep = gen["tool_mask"].any(1)
    assert keep.any() and not keep.all(), "the seed must give both hinted and unhinted turns"
    trainer.model.train()
    loss = lambda batch: float(trainer._compute_loss(trainer.model, batch).detach())  # noqa: E731
    base = loss(gen)
    junk = gen["advantages"].clone()
    junk[~keep] = 100.0
    junk[keep] = torch.where(gen["tool_mask"][keep].bool(), junk[keep], torch.full_like(junk[keep], -50.0))
    assert loss({**gen, "advantages": junk}) == pytest.approx(base, rel=1e-6, abs=1e-9)
    sub = {k: (v[keep] if torch.is_tensor(v) and v.dim() > 0 and v.shape[0] == keep.numel() else v)
           for k, v in gen.items()}
    sub["claw_loss_scale"] = torch.tensor(1.0)   # every row left is a sample
    assert loss(sub) == pytest.approx(base, rel=1e-5)
    moved = gen["advantages"].clone()
    moved[keep.nonzero()[0, 0]] += 1.0
    assert loss({**gen, "advantages": moved}) != pytest.approx(base, rel=1e-4)


@pytest.mark.parametrize("strategy", ["perplexity", "binary"])
def test_token_mean_strategies_use_the_global_token_mean(strategy):
    """The kit's alignment / perplexity rewards average over all masked tokens: TRL's "dapo" with
    num_items_in_batch recomputed from the kit's mask gives exactly that token mean."""
    trainer = make_trainer(_cfg(strategy))
    trainer.train()
    adv, gen = trainer.last_advantages, trainer.last_generation
    assert trainer.args.loss_type == "dapo" and trainer.loss_cfg.loss_agg == "token_mean"
    assert int(gen["num_items_in_batch"]) == int(adv.mask.sum())
    expected = hand_loss(adv.advantages, adv.mask, adv.sample_rows, "token_mean")
    assert trainer.history[1]["policy/loss"] == pytest.approx(expected, rel=1e-5, abs=1e-7)


def test_train_trl_writes_the_kits_metrics(tmp_path):
    """train_trl writes the kit's metric columns (those the update of TRL can give) with the same
    step numbering and the same eval/score before training as the kit's loop."""
    from claw_lib.rl.run import train

    cfg = _cfg("combined", steps=2)
    hist = train_trl(cfg, tmp_path)
    kit = train(cfg)
    assert [h["step"] for h in hist] == [0, 1, 2]
    assert hist[0]["eval/score"] == kit[0]["eval/score"]
    kit_cols = {k for h in kit for k in h} - {"policy/approx_kl", "objective/kl"}  # no reference with beta = 0
    assert kit_cols <= {k for h in hist for k in h}
    header = (tmp_path / "metrics.csv").read_text().splitlines()[0].split(",")
    assert header[0] == "step" and set(header) == {k for h in hist for k in h}
    assert len((tmp_path / "metrics.jsonl").read_text().splitlines()) == 3
    from tests.tensorboard_events import read_events  # TensorBoard's reader on the event file beside metrics.csv

    assert [s for s, _ in read_events(tmp_path / "tensorboard")["eval/score"]] == [0, 1, 2]
    engine = json.loads((tmp_path / "engine.json").read_text())
    assert engine["loss_type"] == "grpo" and engine["epsilon_high"] == 0.28
    assert all(math.isfinite(v) for h in hist[1:] for v in h.values())


def test_peft_teacher_is_the_adapter_disabled_model(initial):
    """With a LoRA adapter the frozen teacher is the same model with its adapter switched off: no
    second copy, and after an update it still scores as the initial model while the policy moved."""
    pytest.importorskip("peft", reason="the PEFT teacher needs peft")
    from peft import LoraConfig

    from claw_lib.integrations.trl import _AdapterDisabled

    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["c_attn", "c_proj"], fan_in_fan_out=True,
                      task_type="CAUSAL_LM")
    trainer = make_trainer(_cfg("opd", lr=1e-2), peft_config=lora)
    assert trainer._frozen is None and isinstance(trainer.scorer.teacher, _AdapterDisabled)
    trainer.train()
    model, tok = initial
    ro = trainer.last_rollout
    ids = [ro.prompt_ids[0]], [ro.response_ids[0]]
    base = ids_logprobs(model, *ids, tok.pad_token_id)[0][0]
    np.testing.assert_allclose(ids_logprobs(trainer.scorer.teacher, *ids, tok.pad_token_id)[0][0], base, atol=1e-5)
    assert not np.allclose(ids_logprobs(trainer.model, *ids, tok.pad_token_id)[0][0], base, atol=1e-4)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_processes_hold_identical_parameters_after_an_update():
    """``accelerate launch`` with two CPU processes (DDP over gloo) runs tools/trl_ddp_check.py: both
    ranks start from the same weights, update them, and end with the same digest."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "", "TOKENIZERS_PARALLELISM": "false",
           "HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
           "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
           "--main_process_port", str(_free_port()), str(ROOT / "tools" / "trl_ddp_check.py"),
           "--strategy", "combined", "--steps", "1"]
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    lines = [json.loads(x.split(" ", 1)[1]) for x in p.stdout.splitlines() if x.startswith("CLAW_TRL_DDP ")]
    assert p.returncode == 0 and len(lines) == 2, p.stdout[-3000:] + p.stderr[-3000:]
    r0, r1 = sorted(lines, key=lambda x: x["rank"])
    assert (r0["world"], r1["world"], r0["backend"], r0["distributed"]) == (2, 2, "gloo", True)
    assert r0["before"] == r1["before"] and r0["after"] == r1["after"] and r0["after"] != r0["before"]
    assert [h["step"] for h in r0["history"]] == [0, 1] and math.isfinite(r0["history"][1]["policy/loss"])


def test_claw_train_engine_trl_writes_the_kits_columns(tmp_path):
    """`claw train --engine trl` takes the same settings as the kit's loop and writes the same metric columns."""
    import csv

    from claw_lib.apps.cli import main

    args = ["train", "--strategy", "binary_rl", "--steps", "1", "--batch-size", "4", "--device", "cpu"]
    assert main(args + ["--engine", "trl", "--out", str(tmp_path / "trl")]) == 0
    assert main(args + ["--engine", "kit", "--out", str(tmp_path / "kit")]) == 0
    cols = {}
    for engine in ("trl", "kit"):
        with open(tmp_path / engine / "metrics.csv", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        assert [r["step"] for r in rows] == ["0", "1"]
        cols[engine] = set(rows[0])
    assert {"step", "eval/score", "reward/score", "timing/rollout_s"} <= cols["trl"] & cols["kit"]


@pytest.mark.parametrize("changes, message", [
    ({"strategy": "binary_rl", "task": TaskConfig(user="tool-chain")}, "tool-chain' .* kit's loop only"),
    ({"strategy": "binary_rl", "task": TaskConfig(user="joint")}, "joint' .* kit's loop only"),
    ({"strategy": "opd_kl", "loss": LossConfig(kl_coef=0.1)}, "no KL-to-reference term"),
    ({"strategy": "opd", "opd": OPDConfig(hint_candidates=3, hint_selection="overlap")}, "overlap' .* kit's loop only"),
    ({"strategy": "binary_rl", "micro_batch": 2}, "micro_batch is the kit loop's gradient accumulation"),
])
def test_kit_loop_only_settings_are_refused_by_name(changes, message):
    """The multi-step tool task and the choice of hints by overlap live in the kit's loop, and the kit's distillation
    losses take no KL term in TRL: the engine refuses them with a line that names the setting, before any model is
    loaded. (OPD as distillation and the v2 top-k losses run: tests/integrations/test_trl_kit_losses.py.)"""
    with pytest.raises(ValueError, match=message):
        make_trainer(_cfg(changes.pop("strategy"), **changes))
