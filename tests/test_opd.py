"""OPD, Binary RL and the combined advantage: parsing, voting, hints, prompts, signs, losses."""
import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from claw_lib.judges import (HintVote, LLMJudge, RuleJudge, Vote, majority_vote, parse_boxed, parse_hint,
                             select_hint)
from claw_lib.opd import (HINT_MARKER, OPDConfig, TurnSignal, append_hint, binary_rl_advantages,
                          combined_advantages, dispatch, generalized_jsd, judge_turn, opd_advantages,
                          teacher_prompt, token_logprobs, topk_reverse_kl)


def test_parse_boxed_last_box_wins_and_malformed():
    assert parse_boxed(r"first \boxed{1} then \boxed{-1}") == -1
    assert parse_boxed(r"\boxed{ +1 }") == 1 and parse_boxed(r"\boxed{0}") == 0
    assert parse_boxed(r"\boxed{correction}") == -1 and parse_boxed(r"\boxed{Progress}") == 1
    assert parse_boxed("no box at all") is None
    assert parse_boxed(r"\boxed{maybe}") is None and parse_boxed(r"\boxed{}") is None
    assert parse_boxed(r"\boxed{1") is None


def test_parse_hint():
    assert parse_hint("x [HINT_START] say Paris [HINT_END] y") == "say Paris"
    assert parse_hint("[HINT_START]a[HINT_END][HINT_START]b[HINT_END]") == "b"
    assert parse_hint("[HINT_START] unterminated") is None


@pytest.mark.parametrize("scores,expected", [
    ([1, 1, -1], 1), ([-1, -1, 1], -1), ([1, -1], 0), ([None, None], 0), ([], 0),
    ([1, None, None], 1), ([0, 0, 1], 0), ([1, -1, 0], 0), ([None, -1], -1),
])
def test_majority_vote(scores, expected):
    assert majority_vote([Vote(s) for s in scores]) == expected


def test_select_hint():
    votes = [HintVote(True, "short"), HintVote(True, "法国的首都是巴黎。"), HintVote(False, "a very long but negative vote"),
             HintVote(True, "不对，法国的首都是巴黎。"), HintVote(True, None)]
    assert select_hint(votes) == "不对，法国的首都是巴黎。"  # longest good; 9 chars is not > 10
    assert select_hint(votes[:3]) is None
    assert select_hint([HintVote(True, "0123456789")]) is None and select_hint([HintVote(True, "0123456789a")])


def test_rule_judge():
    j = RuleJudge()
    assert j.vote("", "不对，法国的首都是巴黎。").score == -1
    assert j.vote("", "谢谢！").score == 1 and j.vote("", "Thanks, that's right.").score == 1
    assert j.vote("", "No, the capital of France is Paris.").score == -1
    assert j.vote("", "不太对吧。").score == -1 and j.vote("", "嗯。").score == 0
    h = j.hint("", "你说的不对，法国的首都是巴黎，另外法国红酒也不错。")
    assert h.positive and h.hint == "不对，法国的首都是巴黎。"
    assert j.hint("", "No, the capital of France is Paris. Also, nice weather.").hint == "No, the capital of France is Paris."
    assert not j.hint("", "谢谢！").positive and not j.hint("", "不太对吧。").positive
    style = j.hint("", "请先说“好问题！”，完整回答后再说“继续加油！”")
    assert style.positive and "好问题" in style.hint


@pytest.mark.parametrize("user", ["correcting", "student", "teacher"])
def test_every_users_thanks_gives_a_plus_one_and_no_hint(user):
    """A satisfied user's reply carries no hindsight: Binary RL +1, no OPD sample. (Found by the
    ablation: "Great, exactly like that!" once passed as a 17-character hint and OPD pushed the
    teacher user's favourite answer *down* in English.)"""
    from claw_lib.users import FactEnv

    env = FactEnv(user=user, seed=0)
    for t in env.sample(30):
        f = t.fact
        answer = f.answer(style={"student": "casual", "teacher": "friendly"}.get(user, "formal"))
        fb = env.step(t, answer)
        assert fb.score == 1.0 and fb.kind == "thanks", (user, answer, fb)
        sig = judge_turn(answer, fb.next_state)
        assert sig.score == 1 and sig.hint is None, (fb.next_state, sig)


def test_style_hint_is_the_users_words():
    """The cleaned hint keeps the preference as the user wrote it (no space slipped in after a
    quoted "!"), so the teacher reads the same instruction the model was trained to follow."""
    from claw_lib.world import STYLE_HINTS

    j = RuleJudge()
    for zh, en in STYLE_HINTS.values():
        assert j.hint("", zh).hint == zh and j.hint("", en).hint == en
    assert j.hint("", "Great, exactly like that!").hint is None


def test_dispatch_table():
    assert dispatch(1, "hint text!!") == "both" and dispatch(-1, "hint text!!") == "both"
    assert dispatch(0, "hint text!!") == "opd" and dispatch(-1, None) == "rl" and dispatch(0, None) == "none"
    lp_old, lp_t = np.array([-0.1, -0.2, -3.0]), np.array([-0.1, -0.1, -9.0])
    a, m = combined_advantages(TurnSignal(-1, "a hint longer"), lp_t, lp_old)
    assert np.allclose(a, -1 + (lp_t - lp_old)) and m.all()
    a, m = combined_advantages(TurnSignal(0, "a hint longer"), lp_t, lp_old)
    assert np.allclose(a, lp_t - lp_old)
    a, m = combined_advantages(TurnSignal(1, None), None, lp_old, OPDConfig(w_rl=0.5))
    assert np.allclose(a, 0.5)
    a, m = combined_advantages(TurnSignal(0, None), None, lp_old)
    assert not m.any()


def test_combined_weight_of_the_negative_broadcast():
    lp_old, lp_t = np.array([-0.1, -0.2, -3.0]), np.array([-0.1, -0.1, -9.0])
    half = OPDConfig(w_rl=2.0, w_rl_negative=0.5)
    a, m = combined_advantages(TurnSignal(-1, "a hint longer"), lp_t, lp_old, half)
    assert np.allclose(a, -0.5 + (lp_t - lp_old)) and m.all()
    a, _ = combined_advantages(TurnSignal(1, "a hint longer"), lp_t, lp_old, half)   # +1 keeps w_rl
    assert np.allclose(a, 2.0 + (lp_t - lp_old))
    pos_only = OPDConfig(w_rl_negative=0.0)
    a, m = combined_advantages(TurnSignal(-1, "a hint longer"), lp_t, lp_old, pos_only)  # = OPD alone
    assert np.allclose(a, opd_advantages(lp_t, lp_old)) and m.all()
    a, m = combined_advantages(TurnSignal(-1, None), None, lp_old, pos_only)  # nothing left: no sample
    assert not m.any()
    a, m = combined_advantages(TurnSignal(1, None), None, lp_old, pos_only)
    assert np.allclose(a, 1.0) and m.all()


def test_opd_advantage_options():
    t, o = np.array([-1.0, -10.0, 0.0]), np.array([-1.0, -0.5, -4.0])
    assert np.allclose(opd_advantages(t, o), [0, -9.5, 4])
    assert np.allclose(opd_advantages(t, o, OPDConfig(clip=2.0)), [0, -2, 2])
    assert np.allclose(opd_advantages(t, o, OPDConfig(clip=2.0, kappa=0.02)), [0, -0.04, 0.04])
    with pytest.raises(ValueError, match="same response token ids"):
        opd_advantages(t, o[:2])
    a, m = binary_rl_advantages(-1, 4)
    assert a.tolist() == [-1] * 4 and m.all()
    assert not binary_rl_advantages(0, 3)[1].any()


def test_teacher_prompt_with_and_without_chat_template(tmp_path):
    p = teacher_prompt("法国的首都是哪里？", "不对，法国的首都是巴黎。", "zh")
    assert p == "问：法国的首都是哪里？" + HINT_MARKER + "不对，法国的首都是巴黎。\n答："
    msgs = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "Q1"},
            {"role": "assistant", "content": "A1"}, {"role": "user", "content": "Q2"}]
    out = append_hint(msgs, "the hint")
    assert out[3]["content"] == "Q2" + HINT_MARKER + "the hint" and msgs[3]["content"] == "Q2"
    assert out[1]["content"] == "Q1"

    class Tok:
        chat_template = "x"

        def apply_chat_template(self, messages, tokenize, add_generation_prompt):
            return "|".join(f"<{m['role']}>{m['content']}" for m in messages) + ("|<assistant>" if add_generation_prompt else "")

    text = teacher_prompt("", "the hint", tokenizer=Tok(), messages=msgs)
    assert text.endswith("<user>Q2" + HINT_MARKER + "the hint|<assistant>")
    with pytest.raises(ValueError):
        append_hint([{"role": "system", "content": "x"}], "h")


def test_topk_reverse_kl_and_jsd_against_formulas():
    torch.manual_seed(0)
    s, t = torch.randn(5, 11), torch.randn(5, 11) * 2
    full_rev = F.kl_div(F.log_softmax(t, -1), F.log_softmax(s, -1), reduction="none", log_target=True).sum(-1)
    assert torch.allclose(topk_reverse_kl(s, t, k=11), full_rev, atol=1e-5)
    assert torch.allclose(generalized_jsd(s, t, beta=1.0), full_rev, atol=1e-5)
    fwd = F.kl_div(F.log_softmax(s, -1), F.log_softmax(t, -1), reduction="none", log_target=True).sum(-1)
    assert torch.allclose(generalized_jsd(s, t, beta=0.0), fwd, atol=1e-5)
    # beta = 0.5: the symmetric JSD, by hand
    ps, pt = s.softmax(-1), t.softmax(-1)
    m = 0.5 * (ps + pt)
    jsd = 0.5 * (pt * (pt / m).log()).sum(-1) + 0.5 * (ps * (ps / m).log()).sum(-1)
    assert torch.allclose(generalized_jsd(s, t, 0.5), jsd, atol=1e-5)
    # top-K with a tail bin: K bins + tail, by hand
    k = 3
    idx = pt.topk(k, -1).indices
    qs = torch.cat([ps.gather(-1, idx), 1 - ps.gather(-1, idx).sum(-1, keepdim=True)], -1)
    qt = torch.cat([pt.gather(-1, idx), 1 - pt.gather(-1, idx).sum(-1, keepdim=True)], -1)
    assert torch.allclose(topk_reverse_kl(s, t, k), (qs * (qs / qt).log()).sum(-1), atol=1e-5)
    assert (topk_reverse_kl(s, t, k) >= -1e-6).all() and (generalized_jsd(s, t, 0.3) >= -1e-6).all()


# ------------------------------------------------------------------ on the toy world's model
@pytest.fixture(scope="module")
def tiny():
    from claw_lib.lm import load_causal_lm

    return load_causal_lm("tiny")


def test_advantage_length_equals_response_length(tiny):
    model, tok = tiny
    from claw_lib.world import build_prompt

    ids = tok("法国的首都是伦敦。", add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    old = token_logprobs(model, tok, [build_prompt("法国的首都是哪里？", "zh")], [ids])[0]
    sig = judge_turn("法国的首都是伦敦。", "不对，法国的首都是巴黎。")
    assert sig.kind == "both" and sig.score == -1
    t = token_logprobs(model, tok, [teacher_prompt("法国的首都是哪里？", sig.hint, "zh")], [ids])[0]
    a, mask = combined_advantages(sig, t, old)
    assert len(a) == len(ids) == len(mask)
    city = [k for k in range(len(ids)) if tok.decode(ids[k:k + 1]) in ("伦", "敦")]
    assert (a[city] + 1).sum() < -5     # OPD term strongly negative on 伦敦
    rest = [k for k in range(len(ids) - 1) if k not in city]
    assert np.abs(a[rest] - (-1)).max() < 1.5  # near zero elsewhere (only the RL score)


def test_gap_sign_separates_right_from_wrong_on_heldout(tiny):
    """AUC of the summed OPD advantage, right vs wrong answers of held-out facts (>= 0.95)."""
    from claw_lib.pretrain import auc
    from claw_lib.users import CorrectingUser
    from claw_lib.world import FactWorld, build_prompt, response_text

    model, tok = tiny
    world = FactWorld()
    user = CorrectingUser(world, p_noise=0.0, p_vague=0.0)
    rng = np.random.default_rng(0)
    good, bad = [], []
    facts = [f for f in world.facts("heldout", relations=("capital",))]
    for f in facts:
        for value, bucket in ((f.truth, good), (world.distractor(f, __import__("random").Random(int(rng.integers(1e9)))), bad)):
            resp = response_text(f.answer(value), f.lang)
            ids = tok(resp, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
            fb = user.reply(f, resp)
            sig = judge_turn(resp, fb.next_state)
            hint = sig.hint or (("不对，" if f.lang == "zh" else "No, ") + f.answer())  # thanks carry no hint
            old = token_logprobs(model, tok, [build_prompt(f.question(), f.lang)], [ids])[0]
            t = token_logprobs(model, tok, [teacher_prompt(f.question(), hint, f.lang)], [ids])[0]
            bucket.append(float(opd_advantages(t, old).sum()))
    assert auc(np.array(good), np.array(bad)) >= 0.95


def test_llm_judge_prompts_and_parses():
    """The LLM judge's logic with canned model outputs: m votes, last box, hints, failed votes."""

    class Canned(LLMJudge):
        def __init__(self, outputs):
            super().__init__(None, None, m=len(outputs))
            self.outputs, self.prompts = outputs, []

        def _ask(self, prompt):
            self.prompts.append(prompt)
            return self.outputs

    j = Canned([r"progress? no. \boxed{-1}", "I cannot decide", r"\boxed{1} wait \boxed{-1}"])
    votes = j.votes("法国的首都是伦敦。", "不对，是巴黎。")
    assert [v.score for v in votes] == [-1, None, -1] and majority_vote(votes) == -1
    assert "不对，是巴黎。" in j.prompts[0] and "\\boxed{1}" in j.prompts[0]
    h = Canned([r"\boxed{1} [HINT_START]The capital of France is Paris.[HINT_END]", r"\boxed{-1}",
                r"\boxed{1} [HINT_START]Paris.[HINT_END]"])
    assert select_hint(h.hint_votes("a", "b")) == "The capital of France is Paris."


def test_too_long_prompt_is_a_clear_error(tiny):
    from claw_lib.lm import generate

    model, tok = tiny
    with pytest.raises(ValueError, match="positions"):
        generate(model, tok, ["很长的提示" * 100], max_new_tokens=4)
    with pytest.raises(ValueError, match="positions"):
        token_logprobs(model, tok, ["很长的提示" * 100], [[1, 2]])


def test_cli_opd_json(capsys):
    from claw_lib.cli import main

    rc = main(["opd", "--prompt", "法国的首都是哪里？", "--response", "法国的首都是伦敦。",
               "--next-state", "不对，法国的首都是巴黎。", "--json"])
    d = json.loads(capsys.readouterr().out)
    assert rc == 0 and d["accepted"] and d["hint"] == "不对，法国的首都是巴黎。"
    assert "".join(t["text"] for t in d["tokens"]) == "法国的首都是伦敦。"
    assert all(set(t) == {"text", "start", "end", "student_logprob", "teacher_logprob", "advantage"} for t in d["tokens"])
    worst = min(d["tokens"], key=lambda t: t["advantage"])
    assert worst["text"] in ("伦", "敦") and worst["advantage"] < -5
    rc = main(["opd", "--prompt", "法国的首都是哪里？", "--response", "法国的首都是巴黎。", "--next-state", "谢谢！", "--json"])
    d = json.loads(capsys.readouterr().out)
    assert not d["accepted"] and all(t["advantage"] == 0 for t in d["tokens"])
