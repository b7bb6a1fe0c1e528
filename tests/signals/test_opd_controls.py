"""The style-drift removals of the OPD signal (issue 36): contrast with a control teacher, skip the first k tokens,
centre each response; and the teacher's temperature as a named option. Values against hand-computed formulas, and
the training path (the tiny GPT) against an independent computation."""
import numpy as np
import pytest
import torch

from claw_lib.config import OPDConfig, PPOConfig, TaskConfig, validate
from claw_lib.signals.opd import (
    TurnSignal,
    combined_advantages,
    contrast_gap,
    drift_controls,
    opd_advantages,
    teacher_temperature,
    unrelated_hint,
)

T = np.array([-1.0, -0.5, -6.0, -0.2])      # teacher log-probs of 4 response tokens
O = np.array([-0.5, -0.25, -1.0, -0.7])     # student (pi_old)
C = np.array([-1.5, -0.5, -1.0, -0.7])      # control teacher (unrelated follow-up)


def test_drift_controls_by_hand():
    a = np.array([-2.0, 0.5, -3.0, 1.5])
    assert drift_controls(a).tolist() == a.tolist()
    assert drift_controls(a, skip_first=1).tolist() == [0.0, 0.5, -3.0, 1.5]
    assert np.allclose(drift_controls(a, center=True), [-1.25, 1.25, -2.25, 2.25])          # mean -0.75
    assert np.allclose(drift_controls(a, skip_first=1, center=True), [0.0, 5 / 6, -8 / 3, 11 / 6])  # mean -1/3
    assert drift_controls(a, skip_first=9).tolist() == [0.0] * 4
    assert int(np.argmin(drift_controls(a, center=True))) == int(np.argmin(a))   # centring never moves the argmin
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="skip_first"):
            drift_controls(a, skip_first=bad)


def test_contrast_gap_is_hint_minus_mean_control():
    a, c1, c2 = np.array([-2.0, -5.0]), np.array([-2.0, 0.0]), np.array([-1.0, 1.0])
    assert np.allclose(contrast_gap(a, [c1, c2]), [-0.5, -5.5])
    with pytest.raises(ValueError, match="at least one"):
        contrast_gap(a, [])
    with pytest.raises(ValueError, match="shape"):
        contrast_gap(a, [np.zeros(3)])


def test_opd_advantages_defaults_are_upstream_and_options_by_hand():
    assert np.allclose(opd_advantages(T, O), T - O)                                   # [-0.5, -0.25, -5, 0.5]
    assert np.allclose(opd_advantages(T, O, OPDConfig(skip_first=1)), [0.0, -0.25, -5.0, 0.5])
    assert np.allclose(opd_advantages(T, O, OPDConfig(center=True)), (T - O) - (T - O).mean())
    con = opd_advantages(T, O, OPDConfig(contrast="unrelated"), control_logprobs=C)
    assert np.allclose(con, T - C) and np.allclose(con, [0.5, 0.0, -5.0, 0.5])       # (T - O) - (C - O)
    # order: contrast, clip, then skip / centre, then kappa
    both = opd_advantages(T, O, OPDConfig(contrast="unrelated", clip=2.0, skip_first=1, center=True, kappa=0.5), C)
    rest = np.array([0.0, -2.0, 0.5])
    assert np.allclose(both, 0.5 * np.concatenate([[0.0], rest - rest.mean()]))
    with pytest.raises(ValueError, match="control teacher"):
        opd_advantages(T, O, OPDConfig(contrast="unrelated"))
    with pytest.raises(ValueError, match="control log-probs have shape"):
        opd_advantages(T, O, OPDConfig(contrast="unrelated"), control_logprobs=C[:3])
    with pytest.raises(ValueError, match="control teacher's log-prob of token 1"):
        opd_advantages(T, O, OPDConfig(contrast="unrelated"), control_logprobs=np.array([0.0, np.nan, 0, 0]))


def test_combined_advantages_pass_the_control_through():
    cfg = OPDConfig(contrast="unrelated", w_rl=0.5, w_opd=2.0)
    a, m = combined_advantages(TurnSignal(-1, "a hint longer"), T, O, cfg, control_logprobs=C)
    assert m.all() and np.allclose(a, -0.5 + 2.0 * (T - C))
    a, _ = combined_advantages(TurnSignal(-1, None), None, O, cfg)                    # no hint: no teacher at all
    assert np.allclose(a, -0.5)


def test_config_refuses_bad_values():
    for bad, what in ((dict(contrast="wrong"), "opd.contrast"), (dict(skip_first=-1), "opd.skip_first"),
                      (dict(skip_first=1.5), "opd.skip_first"), (dict(teacher_temperature=0.0), "opd.teacher_temperature")):
        with pytest.raises(ValueError, match=what):
            validate(PPOConfig(opd=OPDConfig(**bad)))
    validate(PPOConfig(opd=OPDConfig(contrast="unrelated", skip_first=2, center=True, teacher_temperature=1.0)))
    d = OPDConfig()
    assert (d.contrast, d.skip_first, d.center, d.teacher_temperature) == ("none", 0, False, None)


def test_teacher_temperature_option(tiny):
    """Default (None): the rollout's temperature; 1.0: upstream's. The teacher's log-probs at that temperature equal
    log_softmax(logits / T) of the tiny GPT at the response positions."""
    from claw_lib.models.lm import encode, ids_logprobs, pad_token_id

    assert teacher_temperature(OPDConfig(), 0.7) == 0.7 and teacher_temperature(None, 0.7) == 0.7
    assert teacher_temperature(OPDConfig(teacher_temperature=1.0), 0.7) == 1.0
    model, tok = tiny
    p, r = encode(tok, "问：法国的首都是哪里？\n答："), encode(tok, "法国的首都是巴黎。")
    for cfg in (OPDConfig(), OPDConfig(teacher_temperature=1.0)):
        t = teacher_temperature(cfg, 0.7)
        got = ids_logprobs(model, [p], [r], pad_token_id(tok), temperature=t)[0][0]
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([p + r])).logits[0].float()
        want = torch.log_softmax(logits[len(p) - 1:-1] / t, -1)[torch.arange(len(r)), torch.tensor(r)]
        assert np.allclose(got, want.numpy(), atol=1e-5)


def test_unrelated_hint_pool():
    assert unrelated_hint("zh", 0) != unrelated_hint("zh", 1) and unrelated_hint("en", 4) == unrelated_hint("en", 0)
    assert any("\u4e00" <= ch <= "\u9fff" for ch in unrelated_hint("zh")) and unrelated_hint("en").isascii()
    with pytest.raises(ValueError, match="lang"):
        unrelated_hint("fr")


def test_training_path_uses_the_control_teacher(tiny):
    """compute_signals with opd.contrast="unrelated" (opd strategy, teacher user): each hinted turn's signal is
    log pi_T(hint) - log pi_T(unrelated follow-up), both teachers scored here independently on the response ids."""
    from claw_lib.models.lm import encode, ids_logprobs, load_causal_lm, pad_token_id
    from claw_lib.rl.ppo import Scorer, compute_signals, rollout
    from claw_lib.signals.opd import frozen_teacher
    from claw_lib.text.corrections import guess_lang
    from claw_lib.toy.users import FactEnv

    policy, tok = load_causal_lm("tiny")
    cfg = PPOConfig(strategy="opd", task=TaskConfig(user="teacher"), steps=1, batch_size=6, eval_prompts=4,
                    progress=False, opd=OPDConfig(contrast="unrelated", teacher_temperature=1.0))
    ref = frozen_teacher(policy)
    ro = rollout(policy, tok, FactEnv(user="teacher", seed=0), cfg, step=0)
    sig = compute_signals(ro, cfg, Scorer.for_run(cfg, policy, ref, tok))
    hinted = [b for b, h in enumerate(sig.hints) if h]
    assert hinted
    for b in hinted:
        ids = ro.response_ids[b]
        prompts = [ro.tasks[b].teacher_prompt(sig.hints[b], tok),
                   ro.tasks[b].teacher_prompt(unrelated_hint(guess_lang(ro.texts[b], sig.hints[b]), b), tok)]
        t, c = ids_logprobs(ref, [encode(tok, q) for q in prompts], [ids, ids], pad_token_id(tok), temperature=1.0)[0]
        got = sig.token_signal[b, :len(ids)].cpu().numpy()
        assert np.allclose(got, t - c, atol=1e-4)
