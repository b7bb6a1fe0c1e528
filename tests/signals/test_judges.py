"""Next-state judges: boxed scores, hints, votes, the rule judge on every user's replies, the LLM judge's prompts."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from claw_lib.config import OPDConfig
from claw_lib.signals.judges import (
    HintVote,
    LLMJudge,
    RuleJudge,
    Vote,
    hint_candidates,
    majority_vote,
    parse_boxed,
    parse_hint,
    select_hint,
)
from claw_lib.signals.opd import judge_turn


def test_parse_boxed_last_box_wins_and_malformed():
    """Strict (upstream) by default; the kit's earlier lenient rule on request (words, padded boxes)."""
    assert parse_boxed(r"first \boxed{1} then \boxed{-1}") == -1 and parse_boxed(r"\boxed{0}") == 0
    assert parse_boxed(r"\boxed{ +1 }") is None and parse_boxed(r"\boxed{correction}") is None
    assert parse_boxed("no box at all") is None
    assert parse_boxed(r"\boxed{maybe}") is None and parse_boxed(r"\boxed{}") is None
    assert parse_boxed(r"\boxed{1") is None
    assert parse_boxed(r"\boxed{0}", allowed=(1, -1)) is None  # the hint judge decides +1 or -1 only
    lenient = dict(lenient=True)
    assert parse_boxed(r"\boxed{ +1 }", **lenient) == 1 and parse_boxed(r"\boxed{0}", **lenient) == 0
    assert parse_boxed(r"\boxed{correction}", **lenient) == -1 and parse_boxed(r"\boxed{Progress}", **lenient) == 1
    assert parse_boxed(r"\boxed{maybe}", **lenient) is None and parse_boxed(r"\boxed{}", **lenient) is None


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
    from claw_lib.toy.users import FactEnv

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
    from claw_lib.text.phrases import STYLE_HINTS

    j = RuleJudge()
    for zh, en in STYLE_HINTS.values():
        assert j.hint("", zh).hint == zh and j.hint("", en).hint == en
    assert j.hint("", "Great, exactly like that!").hint is None


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
    system, user = j.prompts[0]
    assert system["role"] == "system" and "\\boxed{1}" in system["content"] and "redo" in system["content"]
    assert user["role"] == "user" and "不对，是巴黎。" in user["content"] and "[role: user]" in user["content"]
    h = Canned([r"\boxed{1} [HINT_START]The capital of France is Paris.[HINT_END]", r"\boxed{-1}",
                r"\boxed{1} [HINT_START]Paris.[HINT_END]"])
    assert select_hint(h.hint_votes("a", "b")) == "The capital of France is Paris."


# --------------------------------------------------------------------------- v2: hint candidates
@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.one_of(st.none(), st.sampled_from(
    ["short", "  a hint of some length ", "a hint of some length", "x" * 11, "y" * 30, "z" * 11, "w" * 10]))),
    max_size=6), st.integers(1, 4))
def test_hint_candidates_against_the_rule_written_out(votes, cap):
    """Upstream's rule, written out: keep positive votes whose stripped hint has more than 10 characters, drop exact
    duplicates (first kept), sort by length (stable), keep the first ``cap``."""
    hv = [HintVote(p, h) for p, h in votes]
    seen = []
    for p, h in votes:
        if p and h is not None and len(h.strip()) > 10 and h.strip() not in seen:
            seen.append(h.strip())
    assert hint_candidates(hv, 10, cap) == sorted(seen, key=len)[:cap]


def test_rule_judge_phrasings_split_correction_and_preference():
    """With phrasings 3 a style user's reply that corrects and states a preference gives three hint votes: the
    whole hint (v1's, so "longest" is unchanged), the correction alone and the preference alone; a reply with one
    part, a tool error and phrasings 1 give one."""
    from claw_lib.text.phrases import STYLE_HINTS

    pref = STYLE_HINTS["friendly"][0]
    reply = "不对，法国的首都是巴黎。" + pref
    one, three = RuleJudge().hint_votes("法国的首都是伦敦。", reply), RuleJudge(3).hint_votes("法国的首都是伦敦。", reply)
    assert [v.hint for v in one] == [reply] and [v.hint for v in three] == [reply, "不对，法国的首都是巴黎。", pref]
    assert hint_candidates(three, 10, 3) == sorted([reply, "不对，法国的首都是巴黎。", pref], key=len)
    assert select_hint(three) == select_hint(one) == reply
    assert len(RuleJudge(3).hint_votes("法国的首都是巴黎。", pref)) == 1
    assert len(RuleJudge(3).hint_votes("lookup(capital, Holland)", "Error: unknown country 'Holland'", "tool")) == 1
    for bad in (0, 1.5, True):
        with pytest.raises(ValueError, match="phrasings must be an integer >= 1"):
            RuleJudge(bad)
    sig = judge_turn("法国的首都是伦敦。", reply, cfg=OPDConfig(hint_candidates=3, hint_selection="shortest"))
    assert sig.hint == min([reply, "不对，法国的首都是巴黎。", pref], key=len)


@pytest.mark.parametrize("question", ["德国的首都是哪里？", "What is the capital of Germany?", "And the flag of Japan?"])
def test_rule_judge_takes_no_hint_from_a_new_question(question):
    """A live session's next question is the next state of the answer before it: vote 0 and no hint (it says
    nothing about that answer), where the rule used to keep any reply that is not a thanks."""
    j = RuleJudge()
    assert j.vote("巴黎", question).score == 0
    hv = j.hint("巴黎", question)
    assert not hv.positive and hv.hint is None


def test_the_new_question_rule_changes_no_toy_reply():
    """Every reply of every simulated user (vague complaints included) gets the same hint as before the rule: the
    rule only reads replies that vote 0 and end with a question mark, and none of theirs do."""
    from claw_lib.config import TaskConfig
    from claw_lib.toy.envs import make_env

    j = RuleJudge()
    for user in ("correcting", "teacher", "student", "ta", "tool"):
        for p_vague in (None, 0.9):
            env = make_env(TaskConfig(user=user) if p_vague is None else TaskConfig(user=user, p_vague=p_vague), 0)
            env.reset(1)
            for t in env.sample(200):
                for resp in ("", t.fact.answer(), "伦敦", "something else"):
                    fb = env.step(t, resp)
                    asks = fb.next_state.strip().endswith(("?", "？")) and j.vote(resp, fb.next_state, fb.role).score == 0
                    assert not asks, fb.next_state


@pytest.mark.parametrize("text, positive, hint", [
    ("NONE", False, None),
    ("  none.", False, None),
    ("", False, None),
    ("The answer should say Beijing. It should be one sentence. And more.", True,
     "The answer should say Beijing. It should be one sentence."),
    ("Yes. The answer should name Beijing as the capital!", True, "The answer should name Beijing as the capital!"),
    ("答案应该是北京。不要写成上海。还有别的。", True, "答案应该是北京。 不要写成上海。"),
    ("Nonetheless the answer should be shorter.", True, "the answer should be shorter."),
])
def test_parse_plain_hint(text, positive, hint):
    """The plain hint question's answer: NONE (any case, at the start) is a no; otherwise the first two sentences from
    "The answer should" on (or from the start) are the hint; a plain answer never fails."""
    from claw_lib.signals.judges import parse_plain_hint
    v = parse_plain_hint(text)
    assert (v.positive, v.hint) == (positive, hint)
    assert v.failed is (text == "")  # only no answer at all fails


def test_failed_votes_count_a_plain_hint_vote_by_its_own_verdict():
    """judge/failed_share: an OpenClaw-RL hint vote fails without its decision box; a plain one only when it came
    back empty (it has no box to miss). Counted by hand: one failed Binary RL vote, one boxless OpenClaw hint, one
    empty plain answer."""
    from claw_lib.signals.judges import HintVote, Vote, parse_plain_hint
    from claw_lib.signals.opd import TurnSignal, failed_share

    sig = TurnSignal(score=-1, hint="The answer should say Paris.",
                     votes=[Vote(None, "no box"), Vote(-1, "\\boxed{-1}")],
                     hint_votes=[parse_plain_hint("The answer should say Paris."), parse_plain_hint("NONE"),
                                 parse_plain_hint(""), HintVote(True, "h", "no box here"),
                                 HintVote(True, "h", "\\boxed{1} [HINT_START]h[HINT_END]")])
    assert sig.failed_votes == (3, 7)
    assert failed_share([sig]) == 3 / 7


def test_a_prompt_judge_asks_the_plain_question_and_keeps_its_hint():
    """hint_format "plain": the judge is asked plain_hint_prompt (no box, no block to write) and its answers become
    hint votes that select_hint reads; the votes still use OpenClaw-RL's prompt."""
    from claw_lib.signals.judges import _PromptJudge, plain_hint_prompt

    class Scripted(_PromptJudge):
        m = 2

        def __init__(self):
            self.asked = []

        def _ask(self, messages):
            self.asked.append(messages)
            return ["The answer should say Paris, not Lyon.", "NONE"]

    j = Scripted()
    j.hint_format = "plain"
    votes = j.hint_votes("The capital is Lyon.", "No, it is Paris.", "user")
    assert j.asked[-1] == plain_hint_prompt("The capital is Lyon.", "No, it is Paris.", "user")
    assert "NONE" in j.asked[-1][0]["content"] and "[HINT_START]" not in j.asked[-1][0]["content"]
    assert [(v.positive, v.hint) for v in votes] == [(True, "The answer should say Paris, not Lyon."), (False, None)]
    assert select_hint(votes) == "The answer should say Paris, not Lyon."
    j.votes("a", "b")
    assert "\\boxed" in j.asked[-1][0]["content"] + j.asked[-1][-1]["content"]


def test_make_judge_sets_the_hint_question():
    from claw_lib.models.lm import TINY_LM_DIR
    from claw_lib.signals.judges import make_judge
    assert make_judge(str(TINY_LM_DIR), hint_prompt="plain").hint_format == "plain"
    assert make_judge(str(TINY_LM_DIR)).hint_format == "openclaw"
    assert make_judge("rule", hint_prompt="plain") is None  # the rule judge has no prompt
    with pytest.raises(ValueError, match="hint_prompt"):
        make_judge(str(TINY_LM_DIR), hint_prompt="boxed")
