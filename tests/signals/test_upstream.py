"""OpenClaw-RL's public implementation (snapshot 0d034dd), written out as cases: each expected value was
obtained by running the upstream function on the input, and each case says in one line why it is so.
The kit must give the same result by default."""
import math

import numpy as np
import pytest
import torch

from claw_lib.config import LossConfig
from claw_lib.prompts import HINT_MARKER, append_hint, template_messages
from claw_lib.rl.core import aggregate_loss, clipped_surrogate, kl_estimate
from claw_lib.signals.judges import (
    HINT_DECISIONS,
    SCORE_VALUES,
    HintVote,
    Vote,
    majority_vote,
    parse_boxed,
    parse_hint,
    select_hint,
)
from claw_lib.signals.opd import opd_advantages, topk_reverse_kl

# (judge output, upstream Binary RL score, upstream hint-judge decision, why)
BOXED = [
    (r"\boxed{-1} ... \boxed{ 1 }", -1, -1, "a padded box is not a box; the last valid one wins"),
    (r"The answer is \boxed{1} ... (put the score in \boxed{})", 1, 1, "an empty box is invisible"),
    (r"\boxed{1} \boxed{x}", 1, 1, "a box with a word is invisible"),
    (r"\boxed{+1}", 1, 1, "one optional sign"),
    (r"\boxed{2}", None, None, "a digit outside the allowed scores fails the vote"),
    (r"\boxed{1} then \boxed{2}", None, None, "the last valid box wins even if its value is not allowed"),
    (r"\boxed{0}", 0, None, "0 is a Binary RL score but not a hint decision"),
    (r"\boxed{-0}", 0, None, "-0 is 0"),
    ("no box here", None, None, "no box: a failed vote"),
    ("", None, None, "empty output: a failed vote"),
    (r"\boxed{\text{1}}", None, None, "nested braces are not a digit"),
    (r"\boxed{{1}}", None, None, "nested braces are not a digit"),
    (r"\boxed{ 1 }", None, None, "spaces inside the box"),
    (r"\boxed{1.0}", None, None, "a decimal is not one digit"),
    (r"\boxed{10}", None, None, "two digits"),
    (r"\boxed{-1}", -1, -1, "the plain negative"),
    (r"\boxed {1}", None, None, "a space before the brace"),
    (r"\boxed{1}\boxed{-1}", -1, -1, "the last box wins"),
    (r"\boxed{--1}", None, None, "two signs"),
    ("\\boxed{\uff11}", 1, 1, "a full-width digit is a digit (Python's \\d)"),
    (r"\boxed{progress}", None, None, "words are not scores"),
    (r"<think>maybe \boxed{-1}</think> final: \boxed{1}", 1, 1, "the final box after the thinking wins"),
    (r"\boxed{1} \boxed{0}", 0, None, "the last box wins; 0 is no hint decision"),
]


@pytest.mark.parametrize("text, score, decision, why", BOXED)
def test_boxed_scores(text, score, decision, why):
    assert parse_boxed(text, SCORE_VALUES) == score, why
    assert parse_boxed(text, HINT_DECISIONS) == decision, why


# (votes, upstream majority, why)
MAJORITY = [
    ([1, 1, -1], 1, "a strict majority"), ([1, -1], 0, "a tie"), ([1, -1, 0], 0, "a three-way tie"),
    ([None, None, None], 0, "only failed votes"), ([], 0, "no votes"), ([None, None, 1], 1, "failed votes dropped"),
    ([0, 0, 1], 0, "a majority for 0"), ([-1, -1, None], -1, "a majority for -1"), ([1, None, -1], 0, "a tie after drops"),
    ([1, 1, -1, -1, 0], 0, "a tie between the top two"), ([-1], -1, "one vote"), ([1, 1, 0, 0, -1], 0, "a tie at the top"),
]


@pytest.mark.parametrize("votes, expected, why", MAJORITY)
def test_majority_vote(votes, expected, why):
    assert majority_vote([Vote(v) for v in votes]) == expected, why


# (judge output, (decision, hint)); the kit's parse_hint gives None where upstream gives ""
HINT_PARSE = [
    ("\\boxed{1}\n[HINT_START] Use Paris as the capital. [HINT_END]", (1, "Use Paris as the capital.")),
    ("\\boxed{-1}\n[HINT_START] Use Paris as the capital. [HINT_END]", (-1, "Use Paris as the capital.")),
    ("\\boxed{1} no hint block", (1, None)),
    ("[HINT_START]a[HINT_END] [HINT_START]  second hint, longer  [HINT_END] \\boxed{1}", (1, "second hint, longer")),
    ("\\boxed{1}[HINT_START]\nmulti\nline hint text\n[HINT_END]", (1, "multi\nline hint text")),
    ("\\boxed{0}[HINT_START]some hint text here[HINT_END]", (None, "some hint text here")),
    ("\\boxed{1}[HINT_START]unterminated hint", (1, None)),
]


@pytest.mark.parametrize("text, expected", HINT_PARSE)
def test_hint_parsing(text, expected):
    assert (parse_boxed(text, HINT_DECISIONS), parse_hint(text)) == expected


# (votes as (decision, hint), selected hint, why)
HINT_SELECT = [
    ([(1, "short"), (1, "a longer hint text"), (-1, "an even much longer hint text")], "a longer hint text",
     "the longest hint of a positive vote; negative votes do not count"),
    ([(1, "0123456789"), (1, "  0123456789  ")], None, "10 characters after stripping is not more than 10"),
    ([(1, "01234567890")], "01234567890", "11 characters"),
    ([(1, "same length A"), (1, "same length B")], "same length A", "a tie: the first"),
    ([(None, "a long enough hint"), (-1, "a long enough hint")], None, "no positive vote"),
    ([(1, "  padded hint text  "), (1, "tiny")], "padded hint text", "hints are stripped"),
    ([], None, "no votes"),
]


@pytest.mark.parametrize("votes, expected, why", HINT_SELECT)
def test_hint_selection(votes, expected, why):
    assert select_hint([HintVote(d == 1, h) for d, h in votes]) == expected, why


HINT = "  Use Paris.  "
H = HINT_MARKER + "Use Paris."
# (messages, after append_hint, after template normalisation, why)
APPEND = [
    ([{"role": "system", "content": "sys"}, {"role": "user", "content": "Capital of France?"}],
     [{"role": "system", "content": "sys"}, {"role": "user", "content": "Capital of France?" + H}], None,
     "the user message takes the stripped hint"),
    ([{"role": "user", "content": "Q1"}, {"role": "assistant", "content": "A1"}, {"role": "user", "content": "Q2"}],
     [{"role": "user", "content": "Q1"}, {"role": "assistant", "content": "A1"}, {"role": "user", "content": "Q2" + H}],
     None, "the last user message"),
    ([{"role": "user", "content": "Q1"}, {"role": "assistant", "content": "A1"}, {"role": "tool", "content": "result"}],
     [{"role": "user", "content": "Q1" + H}, {"role": "assistant", "content": "A1"}, {"role": "tool", "content": "result"}],
     None, "the last *user* message, even when a tool spoke last"),
    ([{"role": "system", "content": "sys"}, {"role": "assistant", "content": "hello"}],
     [{"role": "system", "content": "sys"}, {"role": "assistant", "content": "hello" + H}], None,
     "no user message: the last message of any role"),
    ([{"role": "developer", "content": "dev rules"}], [{"role": "developer", "content": "dev rules" + H}],
     [{"role": "system", "content": "dev rules" + H}], "developer becomes system for the template, after the append"),
    ([], [{"role": "user", "content": "[user's hint / instruction]\n  Use Paris.  "}], None,
     "no messages: a new user message, marker without its blank line, hint as given"),
    ([{"role": "user", "content": [{"type": "text", "text": "part one"}, {"type": "image_url", "image_url": {"url": "x"}},
                                   {"type": "text", "text": "part two"}]}],
     [{"role": "user", "content": "part one part two" + H}], None, "text parts joined by spaces, images dropped"),
    ([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}],
     [{"role": "user", "content": H.lstrip("\n")}], None, "no text part: the result is stripped"),
    ([{"role": "user", "content": None}], [{"role": "user", "content": H.lstrip("\n")}], None, "no content"),
    ([{"role": "user", "content": "  padded question \n"}],
     [{"role": "user", "content": "padded question \n" + H}], None, "the whole new content is stripped"),
    ([{"role": "developer", "content": "dev"}, {"role": "user", "content": "Q"}],
     [{"role": "developer", "content": "dev"}, {"role": "user", "content": "Q" + H}],
     [{"role": "system", "content": "dev"}, {"role": "user", "content": "Q" + H}], "developer -> system"),
]


@pytest.mark.parametrize("messages, appended, normalised, why", APPEND)
def test_teacher_messages(messages, appended, normalised, why):
    out = append_hint(messages, HINT)
    assert out == appended, why
    assert template_messages(out) == (normalised or appended), why


def test_loss_aggregation_sample_mean_vs_token_mean():
    """Upstream averages each sample's token losses, then over the samples (a fully masked sample counts)."""
    lengths, losses = [40, 3, 17, 25, 1, 9], [0.1, 0.0307, 0.02, 0.05, -0.0631, -0.2]
    x = torch.zeros(6, 40, dtype=torch.float64)
    m = torch.zeros(6, 40, dtype=torch.bool)
    for b, (n, v) in enumerate(zip(lengths, losses)):
        x[b, :n], m[b, :n] = v, True
    assert aggregate_loss(x, m, "sample_mean").item() == pytest.approx(-0.0104, abs=1e-9)
    assert aggregate_loss(x, m, "token_mean").item() == pytest.approx(3.819 / 95, abs=1e-9)   # 0.0402
    # a fully masked sample: [1,2,3,4], [-8], [0.5,0.5], [9,9,9] masked -> (2.5 - 8 + 0.5 + 0) / 4
    x = torch.tensor([[1, 2, 3, 4.], [-8, 0, 0, 0], [0.5, 0.5, 0, 0], [9, 9, 9, 0]], dtype=torch.float64)
    m = torch.tensor([[1, 1, 1, 1], [1, 0, 0, 0], [1, 1, 0, 0], [0, 0, 0, 0]], dtype=torch.bool)
    assert aggregate_loss(x, m, "sample_mean").item() == pytest.approx(-1.25)
    assert aggregate_loss(x, m, "token_mean").item() == pytest.approx(3 / 7)
    # only the samples that count: rows 0-2 -> -5/3
    rows = torch.tensor([True, True, True, False])
    assert aggregate_loss(x, m, "sample_mean", rows).item() == pytest.approx(-5 / 3)


@pytest.mark.parametrize("eps_high, adv, expected, why", [
    (0.2, 1.0, [-0.7, -0.85, -1.0, -1.2, -1.2, -1.2], "the OPD script: symmetric 0.2"),
    (0.28, 1.0, [-0.7, -0.85, -1.0, -1.25, -1.28, -1.28], "Binary RL and combined: 0.2 / 0.28"),
    (0.28, -1.0, [0.8, 0.85, 1.0, 1.25, 1.35, 1.5], "a negative advantage is clipped below only"),
])
def test_clipped_surrogate_per_token(eps_high, adv, expected, why):
    ratios = torch.tensor([[0.7, 0.85, 1.0, 1.25, 1.35, 1.5]], dtype=torch.float64)
    for t, e in enumerate(expected):  # one token at a time: the loss is that token's objective
        m = torch.zeros(1, 6, dtype=torch.bool)
        m[0, t] = True
        loss, _ = clipped_surrogate(ratios.log(), torch.zeros_like(ratios), torch.full_like(ratios, adv), m, 0.2, eps_high)
        assert loss.item() == pytest.approx(e, abs=1e-12), why


def test_per_strategy_clip_ranges_follow_the_scripts():
    L = LossConfig()
    assert {s: L.for_strategy(s).eps_high for s in ("binary_rl", "opd", "combined")} == \
        {"binary_rl": 0.28, "opd": 0.2, "combined": 0.28}


def test_low_var_kl_is_k3_clamped():
    logp = torch.tensor([-1.0, -0.5, -2.0, -0.1, -20.0, -1.0], dtype=torch.float64)
    ref = torch.tensor([-1.2, -0.5, -1.0, -3.0, -1.0, -13.0], dtype=torch.float64)
    assert kl_estimate(logp, ref, "k1").tolist() == pytest.approx([0.2, 0.0, -1.0, 2.9, -19.0, 12.0])
    k3 = kl_estimate(logp, ref, "k3").tolist()
    assert k3[:4] == pytest.approx([0.018731, 0.0, 0.718282, 1.955023], abs=1e-6) and k3[4] > 1e8
    assert kl_estimate(logp, ref, "low_var_kl").tolist() == pytest.approx([0.018731, 0.0, 0.718282, 1.955023, 10, 10],
                                                                          abs=1e-6)
    assert LossConfig().kl_estimator == "low_var_kl" and LossConfig().kl_coef == 0.0
    # at ref - logp = 3: k3 = e^3 - 4 = 16.1, clamped to 10
    assert kl_estimate(torch.tensor([0.0]), torch.tensor([3.0]), "k3").item() == pytest.approx(math.exp(3) - 4)


def test_opd_advantage_has_no_clip_by_default():
    t, old = np.array([-0.1, -2.0, -0.5, -0.05]), np.array([-0.3, -0.2, -4.0, -3.0])
    assert opd_advantages(t, old).tolist() == pytest.approx([0.2, -1.8, 3.5, 2.95])
    from claw_lib.config import PPOConfig

    assert PPOConfig().opd.clip is None


def _exact_topk_reverse_kl(p_s, p_t, k):
    """float64, exactly: reverse KL over the teacher's top-K ids plus one tail bin."""
    p_s, p_t = np.asarray(p_s, np.float64), np.asarray(p_t, np.float64)
    idx = np.argsort(-p_t)[:k]
    s = np.append(p_s[idx], 1 - p_s[idx].sum())
    t = np.append(p_t[idx], 1 - p_t[idx].sum())
    keep = s > 0
    return float((s[keep] * np.log(s[keep] / np.maximum(t[keep], 1e-300))).sum())


@pytest.mark.parametrize("p_s, p_t, k, expected, why", [
    ([0.5, 0.2, 0.1, 0.1, 0.05, 0.05], [0.999, 0.0004, 0.0003, 0.0002, 0.00005, 0.00005], 2, 2.761231,
     "a near-one-hot teacher: the tail terms are finite"),
    ([0.5, 0.2, 0.1, 0.1, 0.05, 0.05], [0.999, 0.0004, 0.0003, 0.0002, 0.00005, 0.00005], 6, 2.789999,
     "K = V: the full reverse KL"),
    ([0.5, 0.2, 0.1, 0.1, 0.05, 0.05], [0.5, 0.2, 0.1, 0.1, 0.05, 0.05], 2, 0.0, "equal distributions"),
])
def test_topk_reverse_kl_against_float64(p_s, p_t, k, expected, why):
    got = topk_reverse_kl(torch.tensor(p_s).log(), torch.tensor(p_t).log(), k).item()
    assert got == pytest.approx(expected, abs=2e-5), why
    if k < len(p_t):
        assert got == pytest.approx(_exact_topk_reverse_kl(p_s, p_t, k), abs=2e-5), why


def test_topk_tail_of_a_one_hot_teacher_is_bounded():
    """float32 teacher with all its mass on one id: the tail log-prob is floored at log(1 - e^-1e-7) = -16.118,
    not at log(1e-20); upstream gives 7.3659 here (the earlier kit 22.33)."""
    student = torch.tensor([0.5, 0.1, 0.1, 0.1, 0.1, 0.1]).log()
    teacher = torch.tensor([40.0, 0, 0, 0, 0, 0])
    assert topk_reverse_kl(student, teacher, 1).item() == pytest.approx(7.3659, abs=1e-3)
    from claw_lib.signals.opd import TOPK_DEFAULT

    assert TOPK_DEFAULT == 50 and LossConfig().distill_topk == 50
