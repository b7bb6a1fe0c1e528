"""tools/real_model_judge.py's reading of judged turns (issue 36), on turns judged here by a scripted stand-in judge
(the real model's run itself is results/real_model/judge.md): agreement counts, failed votes, accepted and real
hints, and the 10-character rule on Chinese hints, each against counts written out by hand."""
import csv
import json

import pytest

from claw_lib.config import OPDConfig, PPOConfig
from claw_lib.signals.judges import HintVote, Vote
from claw_lib.toy.real_tasks import RealTaskEnv, real_facts
from claw_lib.toy.users import Task
from tests.tool_module import load_tool

@pytest.fixture(scope="module")
def tool():
    return load_tool("real_model_judge")


class _Scripted:
    """A stand-in LLM judge: every turn -1; a hint of ``hint`` (or a failed hint vote when None)."""

    def __init__(self, hint):
        self.hint = hint

    def votes(self, response, next_state, role="user"):
        return [Vote(-1, "\\boxed{-1}")]

    def hint_votes(self, response, next_state, role="user"):
        if self.hint is None:
            return [HintVote(False, None, "no box here")]
        return [HintVote(True, self.hint, f"\\boxed{{1}}[HINT_START]{self.hint}[HINT_END]")]


def _turn(persona, truth, response):
    """A turn as tools/real_model_judge.make_turns makes them: (persona, its env, the task, the policy's answer)."""
    fact = next(f for f in real_facts() if f.lang == "zh" and f.truth == truth)
    return persona, RealTaskEnv(user=persona, seed=0), Task(fact, fact.question()), response


def test_is_real_reads_the_true_answer_and_the_preference(tool):
    fact = next(f for f in real_facts() if f.lang == "zh" and f.truth == "堪培拉")
    assert tool.is_real("是堪培拉。", fact, "correcting")          # the true answer, 5 characters
    assert not tool.is_real("不是悉尼，是堪培拉", fact, "correcting")  # names the listed wrong answer too
    assert tool.is_real("别用句号", fact, "student") and not tool.is_real("别用句号", fact, "correcting")
    assert not tool.is_real("", fact, "teacher")


def test_rows_and_their_summary(tool, tmp_path):
    """Three Chinese turns judged by stand-ins: a short real hint (rejected by the 10-character rule), a long real hint
    (accepted), a failed hint vote; the summary's counts are these, by hand."""
    cfg = PPOConfig(strategy="combined", opd=OPDConfig())
    turns = [(_turn("correcting", "堪培拉", "澳大利亚的首都是悉尼。"), _Scripted("是堪培拉。")),
             (_turn("correcting", "堪培拉", "澳大利亚的首都是悉尼。"), _Scripted("澳大利亚的首都是堪培拉，不是那座海港城市。")),
             (_turn("student", "堪培拉", "澳大利亚的首都是堪培拉。"), _Scripted(None))]
    rows = [tool.judge_row(k, turn, judge, cfg) for k, (turn, judge) in enumerate(turns)]
    path = tmp_path / "judge.csv"
    with open(path, "w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=tool.FIELDS)
        w.writeheader()
        w.writerows(rows)
    rows = tool.read_rows(path)
    assert [int(r["expected"]) for r in rows] == [-1, -1, -1] and [int(r["judge_failed"]) for r in rows] == [0, 0, 1]
    a = tool.agreement(rows, "judge_score")
    assert (a["n"], a["agree"], a["-1/-1"], a["-1/+1"]) == (3, 1.0, 3, 0)
    h = tool.hint_stats(rows)
    assert (h["unsatisfied"], h["judge_accepted"], h["judge_real"]) == (3, 1, 1)
    assert (h["zh_good_hints"], h["zh_rejected_short"], h["zh_rejected_real"]) == (2, 1, 1)
    text = tool.summarise(rows)
    assert "failed votes 1 of 6" in text and "| correcting | 澳大利亚的首都是哪里？ | 是堪培拉。 | 5 | yes |" in text
    assert json.loads(rows[0]["hint_votes"])[0]["hint"] == "是堪培拉。"


def test_the_rule_on_hints_a_judge_could_write(tool):
    """Every shortest Chinese hint (是X。: at most 2 + 8 characters here) falls to the rule, no English correction
    does; the counts are those of the lengths, counted here."""
    rows = {(lang, form): (n, k) for lang, form, n, k in tool.rule_on_answers()}
    zh = [f for f in real_facts() if f.lang == "zh"]
    en = [f for f in real_facts() if f.lang == "en"]
    assert rows["zh", "shortest (是X。 / It is X.)"] == (len(zh), len(zh))
    assert rows["en", "correction"] == (len(en), 0)
    assert rows["zh", "full sentence"] == (len(zh), sum(len(f.sentence) <= 10 for f in zh)) and 0 < rows["zh", "full sentence"][1]
