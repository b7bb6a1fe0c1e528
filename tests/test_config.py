"""The config tree: every field documented, overrides by dotted name, one source of defaults."""
import dataclasses

import pytest

from claw_lib.config import (
    PER_MODEL,
    AlignConfig,
    LossConfig,
    OPDConfig,
    PPOConfig,
    RewardConfig,
    TaskConfig,
    field_docs,
    flatten,
    override,
    validate,
)

ALL = (AlignConfig, RewardConfig, OPDConfig, TaskConfig, LossConfig, PPOConfig)


@pytest.mark.parametrize("cls", ALL)
def test_every_field_has_a_docstring(cls):
    docs = field_docs(cls)
    missing = [f.name for f in dataclasses.fields(cls) if not docs.get(f.name)]
    assert not missing, f"{cls.__name__}: fields without a docstring: {missing}"


def test_override_nested_and_flat():
    cfg = PPOConfig()
    new = override(cfg, {"opd.w_rl_negative": 0.0, "loss.kl_coef": 0.1, "reward.align.layer": 6, "steps": 3})
    assert (new.opd.w_rl_negative, new.loss.kl_coef, new.reward.align.layer, new.steps) == (0.0, 0.1, 6, 3)
    # the original is untouched, and untouched fields keep their values
    assert cfg.opd.w_rl_negative is None and cfg.loss.kl_coef == 0.0 and cfg.reward.align.layer is None
    assert new.opd.clip == cfg.opd.clip and new.reward.omissions is True and new.task == cfg.task
    with pytest.raises(ValueError, match="no setting 'kl_coef'"):
        override(cfg, {"kl_coef": 0.1})
    with pytest.raises(ValueError, match="OPDConfig has no setting 'bogus'"):
        override(cfg, {"opd.bogus": 1})


def test_ppo_defaults_differ_from_the_tutorials_where_documented():
    """PPO charges omissions, the tutorials' RewardConfig does not; neither clips the OPD gap (upstream)."""
    assert RewardConfig().omissions is False and PPOConfig().reward.omissions is True
    assert OPDConfig().clip is None and PPOConfig().opd.clip is None


def test_loss_settings_per_strategy_follow_the_upstream_scripts():
    L = LossConfig()
    assert (L.for_strategy("opd").eps_high, L.for_strategy("opd").loss_agg) == (0.2, "sample_mean")
    assert (L.for_strategy("binary_rl").eps_high, L.for_strategy("combined").eps_high) == (0.28, 0.28)
    assert (L.for_strategy("binary").eps_high, L.for_strategy("binary").loss_agg) == (0.28, "token_mean")
    set_ = LossConfig(eps_high=0.3, loss_agg="token_mean").for_strategy("opd")
    assert (set_.eps_high, set_.loss_agg) == (0.3, "token_mean")  # a value set by the user wins


def test_flatten_names_every_leaf():
    flat = flatten(PPOConfig())
    assert flat["task.user"] == "correcting" and flat["reward.align.encoder"] == "e5" and flat["loss.eps"] == 0.2
    assert all(not dataclasses.is_dataclass(v) for v in flat.values())
    assert override(PPOConfig(), flat) == PPOConfig()


def test_cli_takes_its_defaults_from_the_config(capsys):
    """`claw train`'s options default to PPOConfig's values and show the field docstrings as help."""
    from claw_lib.apps.cli import TRAIN_FLAGS, build_parser

    a = build_parser().parse_args(["train"])
    flat = flatten(PPOConfig())
    for path in TRAIN_FLAGS.values():  # the per-model settings default to None: resolved once the model is known
        assert getattr(a, path) == (None if path in PER_MODEL else flat[path]), path
    assert override(PPOConfig(), {p: getattr(a, p) for p in TRAIN_FLAGS.values()}) == PPOConfig()  # tiny: the same
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "checkpoint every N steps when writing to a folder (0: never) (default: 4)" in out


def test_per_model_settings():
    """The tiny GPT's settings are known at once (its recorded results do not move); a real model's come from its
    parameter count, with adapters by default, and an lr far above the recommended one is flagged."""
    from claw_lib.config import lr_warning, model_defaults, recommended_lr, resolve_for_model

    tiny = PPOConfig()
    assert (tiny.lr, tiny.max_new_tokens, tiny.eval_prompts, tiny.lora_rank, tiny.dtype) == (3e-4, 32, 40, 0, "auto")
    assert model_defaults(1_600_000) == {"lr": 3e-4, "max_new_tokens": 32, "eval_prompts": 40, "lora_rank": 0}
    real = PPOConfig(model="/some/qwen")
    assert real.lr is None and real.lora_rank is None
    r = resolve_for_model(real, 630_000_000)
    assert r.lora_rank == 16 and r.max_new_tokens == 48 and r.eval_prompts == 32
    assert r.lr == recommended_lr(630_000_000, adapter=True) == float(f"{20 * 1e-6 * (5e8 / 630e6) ** 0.5:.2g}")
    assert recommended_lr(500_000_000) == 1e-6 and recommended_lr(200_000_000) == 1e-6      # capped at 1e-6
    assert recommended_lr(7_000_000_000) == float(f"{1e-6 * (5 / 70) ** 0.5:.2g}")
    full = resolve_for_model(PPOConfig(model="/some/qwen", lora_rank=0, lr=2e-6), 630_000_000)
    assert (full.lr, full.lora_rank) == (2e-6, 0)                                          # given settings are kept
    assert lr_warning(3e-4, 630_000_000, 0).startswith("lr 0.0003 is 337x the 8.9e-07 recommended for full")
    assert lr_warning(5e-6, 630_000_000, 0) is None and lr_warning(3e-4, 1_600_000, 0) is None
    assert "LoRA rank 16" in lr_warning(3e-3, 630_000_000, 16)
    with pytest.raises(ValueError, match="dtype must be one of"):
        validate(PPOConfig(dtype="int8"))
    with pytest.raises(ValueError, match="lora_rank must be in"):
        validate(PPOConfig(lora_rank=-1))
