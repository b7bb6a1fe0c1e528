"""Promise 4: bad input gets one line that names the problem (the option, the line, the token), exit code 2 on the
command line and ValueError in the library; never a traceback, never garbage with exit code 0.

Each test names the review ids it covers (``../shared/notes/review-reliability.md``).
"""
import json
import math

import numpy as np
import pytest
import torch

from claw_lib.apps.cli import main

from .safety import PAIR, message, run

P = [PAIR["output"], PAIR["correction"]]
OPD = ["opd", "--prompt", "法国的首都是哪里？", "--response", "法国的首都是伦敦。", "--next-state", "不对，法国的首都是巴黎。"]


def refused(args, capsys):
    """Exit code and the one stderr line of a command that argparse or the command itself refuses."""
    capsys.readouterr()
    try:
        rc = main(args)
    except SystemExit as e:
        rc = e.code
    return rc, message(capsys.readouterr().err)


# --------------------------------------------------------------------------- --input files
def test_a_deeply_nested_json_line_is_that_lines_error_B15(tmp_path, capsys):
    """B15: one line of 100,000 nested brackets (RecursionError) is an error record; the other lines are done."""
    f, out = tmp_path / "deep.jsonl", tmp_path / "out.jsonl"
    f.write_text("[" * 100_000 + "]" * 100_000 + "\n" + json.dumps(PAIR, ensure_ascii=False) + "\n")
    rc, _, err = run(["align", "--input", str(f), "--out", str(out)], capsys)
    lines = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert rc == 1 and "1 of 2 lines failed" in message(err)
    assert lines[0] == {"line": 1, "error": "not valid JSON here (nested too deeply)"} and "ops" in lines[1]


def test_a_byte_order_mark_is_skipped_B11(tmp_path, capsys):
    """B11: a UTF-8 file that starts with a BOM (Windows editors) is read, not refused with advice the user cannot
    follow."""
    f = tmp_path / "bom.jsonl"
    f.write_bytes(b"\xef\xbb\xbf" + json.dumps(PAIR, ensure_ascii=False).encode() + b"\n")
    rc, out, _ = run(["align", "--input", str(f)], capsys)
    assert rc == 0 and "ops" in json.loads(out)


def test_a_question_that_is_not_a_string_is_that_lines_error_B18(tmp_path, capsys):
    """B18: `"question": 5` gives the record "'question' must be a string", not a message from str.replace."""
    f = tmp_path / "q.jsonl"
    f.write_text(json.dumps({**PAIR, "question": 5}, ensure_ascii=False) + "\n")
    rc, out, _ = run(["rewards", "--input", str(f), "--strategy", "perplexity"], capsys)
    assert rc == 1 and json.loads(out) == {"line": 1, "error": "'question' must be a string (or left out), got int"}


# --------------------------------------------------------------------------- numbers
@pytest.mark.parametrize("args, says", [
    (["train", "--steps", "1", "--seed", "-1"], "--seed must be in [0, 4294967295], got -1"),             # NT02
    (["train", "--steps", "1", "--seed", "100000000000000000000"], "--seed must be in [0, 4294967295]"),  # NT03
    (["reproduce", "--seeds", "100000000000000000000", "--steps", "1"], "argument --seeds: must be <= "),  # NT13
    (["pretrain", "--seed", "100000000000000000000", "--steps", "1"], "argument --seed: must be <= "),     # NT14
    (["train", "--steps", "2", "--lr", "1e10"], "--lr must be in (0, 1]"),                                # NT04
    (["train", "--steps", "2", "--kl-coef", "1e300"], "--kl-coef must be in [0, 100]"),                   # NT07
    (["train", "--steps", "2", "--strategy", "combined", "--w-rl-negative", "1e308"],                      # NT10
     "--w-rl-negative must be in [0, 100]"),
    (["rewards", *P, "--threshold", "-5"], "argument --threshold: must be >= 0"),                         # N05
    (OPD + ["--kappa", "1e308", "--combined", "--json"], "argument --kappa: must be <= 100"),               # N12
    (OPD + ["--w-opd=-1e308", "--w-rl=1e308"], "argument --w-opd: must be >= 0"),                         # N14
])
def test_out_of_range_numbers_are_refused_at_once_naming_the_option(args, says, capsys, tmp_path):
    """NT02, NT03, NT13, NT14 (seeds below 0 or past 2**32), NT04, NT07, NT10 (a learning rate or a loss weight
    that turns the weights into NaN), N05 (a negative match threshold), N12, N14 (an OPD scale that overflows):
    refused before any work, naming the option; nothing is written."""
    out = tmp_path / "s"
    if args[0] in ("train", "reproduce", "pretrain"):
        args = args + ["--out", str(out)]
    rc, line = refused(args, capsys)
    assert rc == 2 and says in line and not out.exists(), line


def test_weights_that_become_nan_stop_the_run_naming_the_options_NT04_NT07_NT10(capsys, monkeypatch):
    """NT04 / NT07 / NT10 within the bounds: weights that become NaN in an update stop the run with one line that
    names --lr, --kl-coef and --w-rl-negative (before: a RuntimeError deep inside sampling at the next step)."""
    import claw_lib.rl.ppo as ppo

    real = ppo.ppo_update

    def diverging(policy, *a, **k):
        stats = real(policy, *a, **k)
        with torch.no_grad():
            next(policy.parameters()).fill_(float("nan"))
        return stats

    monkeypatch.setattr(ppo, "ppo_update", diverging)
    rc, _, err = run(["train", "--steps", "2", "--batch-size", "2", "--lr", "0.5", "--kl-coef", "10"], capsys)
    line = message(err)
    assert rc == 2 and "NaN or inf in the update of step 1" in line
    assert "--lr 0.5" in line and "--kl-coef 10" in line and "--w-rl-negative None" in line
    assert "claw train: warning: lr 0.5 is" in err  # and the lr warning came before the work


def test_json_output_is_always_valid_json_N12():
    """N12 / N14 (the writer): a non-finite number is written as null, never as the -Infinity JSON parsers reject."""
    from claw_lib.apps.cli import _json

    assert json.loads(_json({"a": [1.0, float("-inf")], "b": float("nan")})) == {"a": [1.0, None], "b": None}


def test_a_seed_given_twice_is_refused_RP04(tmp_path, capsys):
    """RP04: `--seeds 0 0` would count the same run twice ("+- 0.00" from one run); refused."""
    rc, _, err = run(["reproduce", "--out", str(tmp_path / "q"), "--users", "correcting", "--strategies", "binary",
                      "continuous", "--seeds", "0", "0", "--steps", "2"], capsys)
    assert rc == 2 and "seed 0 is given twice" in message(err) and not (tmp_path / "q").exists()


# --------------------------------------------------------------------------- languages
@pytest.mark.parametrize("output, correction, says", [
    ("法国的首都是伦敦。", "No, the capital of France is Paris.", "the output is in Chinese and the correction in English"),
    ("The capital of France is London.", "不对，法国的首都是巴黎。", "the output is in English and the correction in Chinese"),
    ("法国的capital是London。Париж", "不对，法国的首都是Paris。", "the output is in English, Chinese and Russian"),
])
def test_a_correction_in_another_language_warns_naming_both_T11_T12_T08(e5, output, correction, says):
    """T11, T12, T08: the rewards of a correction in another language are unreliable (法国, which the correction
    confirms, gets -1): token_rewards and align_texts warn, naming both languages; a name in another script inside
    a sentence does not warn."""
    from claw_lib.alignment.texts import align_texts
    from claw_lib.signals.rewards import token_rewards
    from claw_lib.text.langs import LanguageMismatchWarning, language_mismatch

    assert says in language_mismatch(output, correction)
    with pytest.warns(LanguageMismatchWarning, match="rarely align"):
        token_rewards(output, correction, encoder=e5)
    with pytest.warns(LanguageMismatchWarning, match="rarely align"):
        align_texts(output, correction, encoder=e5)
    assert language_mismatch("法国的首都是Paris。", "不对，法国的首都是巴黎。") is None
    assert language_mismatch("黄金的化学符号是Ag。", "Au。") is None  # too few letters to tell


def test_the_language_warning_is_one_line_on_the_command_line_T11(e5, capsys):
    """T11 on the command line: rc 0, the rewards on stdout, one line `claw rewards: warning: ...` on stderr (no
    file name or source line), whatever warning display the caller had set up (here Python's default filter)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("default")  # Python's own filter: a warning once per place and message
        rc, out, err = run(["rewards", "法国的首都是伦敦。", "No, the capital of France is Paris.", "--json"], capsys)
    assert rc == 0 and len(json.loads(out)["tokens"]) > 0
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("claw rewards: warning: the output is in Chinese and the correction in English")


# --------------------------------------------------------------------------- the library
def test_opd_refuses_non_finite_log_probs_L24_L26():
    """L24 / L26: NaN or -inf log-probs are refused naming the token (align refuses NaN costs the same way)."""
    from claw_lib.signals.opd import opd_advantages

    for bad in (np.nan, -np.inf):
        with pytest.raises(ValueError, match="the teacher's log-prob of token 0 is .*must be finite"):
            opd_advantages(np.array([bad, -1.0]), np.array([-1.0, -1.0]))
        with pytest.raises(ValueError, match="the student's log-prob of token 1"):
            opd_advantages(np.array([-1.0, -1.0]), np.array([-1.0, bad]))


@pytest.mark.parametrize("cfg, says", [({"kappa": math.nan}, "opd.kappa must be a finite number"),
                                       ({"clip": -1.0}, r"opd.clip must be in \(0, inf\)")])
def test_opd_config_is_validated_in_the_library_L30_L31(cfg, says):
    """L30: kappa NaN (gave [nan]); L31: clip -1 (gave -1 for every token): refused as the CLI refuses them."""
    from claw_lib.config import OPDConfig
    from claw_lib.signals.opd import combined_advantages, opd_advantages, TurnSignal

    with pytest.raises(ValueError, match=says):
        opd_advantages(np.array([-1.0]), np.array([-2.0]), OPDConfig(**cfg))
    with pytest.raises(ValueError, match=says):
        combined_advantages(TurnSignal(1, "a hint longer than ten"), np.array([-1.0]), np.array([-2.0]), OPDConfig(**cfg))


def test_a_binary_score_outside_minus_one_zero_one_is_refused_L32():
    """L32: a judge's score is -1, 0 or +1; 5 gave advantages of 5."""
    from claw_lib.signals.opd import binary_rl_advantages

    with pytest.raises(ValueError, match="-1, 0 or \\+1.*got 5"):
        binary_rl_advantages(5, 3)
    a, m = binary_rl_advantages(-1, 2)
    assert a.tolist() == [-1.0, -1.0] and m.tolist() == [True, True]


def test_distillation_losses_check_their_inputs_L34_L37():
    """L34: vocabularies of 5 and 6 (an index error deep in gather); L37: beta 2 (a math domain error)."""
    from claw_lib.signals.opd import generalized_jsd, topk_reverse_kl

    with pytest.raises(ValueError, match=r"student and teacher vocabularies differ \(5 vs 6\)"):
        topk_reverse_kl(torch.zeros(2, 5), torch.zeros(2, 6))
    with pytest.raises(ValueError, match=r"beta must be in \[0, 1\]"):
        generalized_jsd(torch.zeros(2, 5), torch.zeros(2, 5), beta=2.0)
    assert float(generalized_jsd(torch.zeros(1, 5), torch.zeros(1, 5), beta=0.5)) == pytest.approx(0.0, abs=1e-7)


def test_fuse_rewards_refuses_a_misspelt_weight_L41():
    """L41: {'binray': 5.0} was ignored and weight 1 used."""
    from claw_lib.signals.rewards import fuse_rewards

    with pytest.raises(ValueError, match=r"weights for \['binray'\] but no such rewards"):
        fuse_rewards({"binary": np.array([0.5, -1.0])}, {"binray": 5.0})


def test_token_rewards_validates_its_config_L48(e5):
    """L48: RewardConfig(match=nan) gave NaN rewards; validate() existed but token_rewards never called it."""
    from claw_lib.config import RewardConfig
    from claw_lib.signals.rewards import token_rewards

    with pytest.raises(ValueError, match="reward.match must be a finite number"):
        token_rewards(*P, "binary", RewardConfig(match=float("nan")), encoder=e5)
