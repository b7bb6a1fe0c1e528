"""The personal-agent ceiling (claw_lib.toy.homework_eval): the three conditions' prompts, the counts against a
scripted model, and tools/personal_agent_ceiling.py on the tiny GPT (smoke)."""
import json
import os
from types import SimpleNamespace

import pytest

from claw_lib.config import CEILING_CONDITIONS
from claw_lib.models.lm import Generation
from claw_lib.prompts import HINT_MARKER
from claw_lib.toy import homework_eval
from claw_lib.toy.gsm8k import Problem, make_definition
from claw_lib.toy.homework import HomeworkUser, preference
from claw_lib.toy.homework import request_messages
from claw_lib.toy.homework_eval import ceiling, hinted_messages, render
from tests.tool_module import load_tool

PROBLEMS = [Problem(0, "Tom has 2 apples and buys 3 more. How many now?", "5"),
            Problem(1, "Ann has 9 pens and gives away 4. How many are left?", "5"),
            Problem(2, "A box holds 6 eggs. How many eggs are in 3 boxes?", "18")]
AI = "1. **Start**: 2 + 3 = 5\n2. **Check**: 5 - 0 = 5\n\n**Final answer:** \\boxed{5}"
PLAIN = "He has 2 + 3 = 5 apples, and 5 - 0 = 5 checks it, so 5."


def test_request_and_render_without_a_chat_template():
    u = HomeworkUser("student", "en")
    told = request_messages(u, PROBLEMS[0], preference("student", "en"))
    assert [m["role"] for m in told] == ["system", "user"] and PROBLEMS[0].question in told[1]["content"]
    text = render(None, told, "en")
    assert text.startswith("Q: " + preference("student", "en") + "\n\n") and text.endswith("\nA:")


def test_the_hinted_request_appends_the_judges_hint_as_opd_does():
    u = HomeworkUser("student", "en")
    msgs = request_messages(u, PROBLEMS[0])
    complaint = u.react(PROBLEMS[0], AI).text
    hinted = hinted_messages(msgs, AI, complaint)
    assert hinted[-1]["content"] == msgs[-1]["content"] + HINT_MARKER + complaint  # the rule judge keeps it whole
    assert msgs[-1]["content"] != hinted[-1]["content"]  # the request itself is not changed
    assert hinted_messages(msgs, PLAIN, u.react(PROBLEMS[0], PLAIN).text) is None  # thanks: no hint, no OPD sample


class ChatML:
    """A tokenizer stand-in with a ChatML chat template (what a Qwen instruct model's template writes)."""

    chat_template = "chatml"

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True):
        text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
        return text + ("<|im_start|>assistant\n" if add_generation_prompt else "")


def test_with_a_chat_template_the_requests_are_the_ones_opd_scores():
    """The untrained request is the student prompt explain_turn scores, the hinted one its teacher prompt (both built
    by claw_lib.prompts from the bare request), the prompted one the request after a system message."""
    from claw_lib.prompts import build_prompt, teacher_prompt
    from claw_lib.toy.homework import first_request

    tok = ChatML()
    user, base = first_request("student", "en", PROBLEMS[0], seed=2)
    ask = base[-1]["content"]
    assert render(tok, base, "en") == build_prompt(ask, "en", tokenizer=tok)
    complaint = user.react(PROBLEMS[0], AI).text
    hinted = hinted_messages(base, AI, complaint)
    assert render(tok, hinted, "en") == teacher_prompt(ask, complaint, "en", tokenizer=tok)
    told = [{"role": "system", "content": preference("student", "en")}] + base
    assert render(tok, told, "en") == (f"<|im_start|>system\n{preference('student', 'en')}<|im_end|>\n"
                                       f"<|im_start|>user\n{ask}<|im_end|>\n<|im_start|>assistant\n")


def _scripted_generate(model, tokenizer, prompts, max_new_tokens=32, greedy=False, seed=None, **kw):
    """A model that writes AI-looking homework unless told the preference or hinted; told, it reaches the cap."""
    told = preference("student", "en")
    return [Generation(PLAIN if (told in p or HINT_MARKER.strip() in p) else AI, [1] * (7 if told in p else 5),
                       told not in p) for p in prompts]


def test_ceiling_counts_against_a_scripted_model(monkeypatch):
    monkeypatch.setattr(homework_eval, "generate", _scripted_generate)
    model, tok = SimpleNamespace(config=SimpleNamespace()), None
    r = ceiling(model, tok, "student", "en", PROBLEMS, decodings=("greedy", "sampled"))
    for d in ("greedy", "sampled"):
        assert r[d]["untrained"] == {"n": 3, "too_long": 0, "cut": 0, "accepted": 0, "correct": 2, "tokens": 5.0}
        assert r[d]["prompted"] == {"n": 3, "too_long": 0, "cut": 3, "accepted": 3, "correct": 2, "tokens": 7.0}
        assert r[d]["hinted"] == {"n": 3, "too_long": 0, "cut": 0, "accepted": 3, "correct": 2, "tokens": 5.0}
    assert len(r["records"]) == 2 * 3 * 3 and r["problems"] == [0, 1, 2]
    seen = []
    monkeypatch.setattr(homework_eval, "generate", lambda m, t, prompts, **kw: seen.extend(prompts) or
                        _scripted_generate(m, t, prompts, **kw))
    ceiling(model, tok, "student", "en", PROBLEMS[:1], decodings=("greedy", "sampled"), seed=5)
    plain, told, hinted = seen[:3]
    request = plain[len("Q: "):-len("\nA:")]  # every condition asks the same request: told adds, hinted appends
    assert told.endswith("\n\n" + request + "\nA:") and hinted.startswith("Q: " + request + HINT_MARKER)
    assert seen[3:] == seen[:3]  # the sampled decoding meets the same requests and the same reaction
    with pytest.raises(ValueError, match="decodings must be some of"):
        ceiling(model, tok, "student", "en", PROBLEMS, decodings=("beam",))


def test_a_prompt_longer_than_the_positions_is_counted_not_run(monkeypatch):
    monkeypatch.setattr(homework_eval, "generate", _scripted_generate)
    monkeypatch.setattr(homework_eval, "encode", lambda tok, p: [0] * len(p))  # one token a character
    model = SimpleNamespace(config=SimpleNamespace(n_positions=150))
    r = ceiling(model, None, "student", "en", PROBLEMS[:1], max_new_tokens=8)
    assert r["greedy"]["prompted"] == {"n": 1, "too_long": 1, "cut": 0, "accepted": 0, "correct": 0,
                                          "tokens": None}


# --------------------------------------------------------------------------- the tool, on the tiny GPT
@pytest.fixture
def tiny_gsm8k(tmp_path):
    """A GSM8K-shaped file of short invented problems and a split definition over it."""
    f = tmp_path / "mini.jsonl"
    f.write_text("".join(json.dumps({"question": p.question, "answer": f"so\n#### {p.gold}"}) + "\n" for p in PROBLEMS))
    records = [(p.question, p.gold, "") for p in PROBLEMS]
    d = tmp_path / "split.json"
    d.write_text(json.dumps(make_definition(records, {"stream": [0], "stream_72": [0], "dev": [1, 2], "heldout": []},
                                            {"file": "mini"})))
    return f, d


def test_smoke_the_ceiling_tool_on_the_tiny_gpt(tmp_path, tiny_gsm8k, capsys):
    tool = load_tool("personal_agent_ceiling")
    f, d = tiny_gsm8k
    out = tmp_path / "ceiling.json"
    args = ["--gsm8k", str(f), "--definition", str(d), "--personas", "no_latex", "answer_first", "--langs", "en",
            "--max-new-tokens", "8", "--landing", "--out", str(out)]
    assert tool.main(args) == 0
    res = json.loads(out.read_text())
    assert [(r["persona"], r["lang"], r["problems"]) for r in res["results"]] == [("no_latex", "en", [1, 2]),
                                                                                  ("answer_first", "en", [1, 2])]
    for r in res["results"]:
        for dec in ("greedy", "sampled"):
            for c in CEILING_CONDITIONS:
                s = r[dec][c]
                assert 0 <= s["accepted"] <= s["n"] - s["too_long"] and s["n"] <= 2
    assert res["results"][0]["greedy"]["untrained"]["too_long"] == 0  # the tiny GPT answered these requests
    for r in res["results"]:  # --landing: OPD's view of the greedy untrained replies that drew a hint
        assert 0 <= r["landing"]["replies"] <= 2 and set(r["landing"]["classes"]) == {
            "raw", "skip_first", "skip_first_centred"}
    assert "| no_latex | en | greedy |" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="already exists"):  # never overwritten without --force
        tool.script_main(tool.main, args)


def test_the_ceiling_tool_says_in_one_line_where_gsm8k_is(monkeypatch):
    monkeypatch.delenv("CLAW_GSM8K", raising=False)
    tool = load_tool("personal_agent_ceiling")
    with pytest.raises(SystemExit, match=r"^error: GSM8K is not shipped with claw-kit") as e:
        tool.script_main(tool.main, [])
    assert "\n" not in str(e.value)


# --------------------------------------------------------------------------- where OPD's signal lands
def _tokens(reply, cuts, advantages):
    """Tokens of ``reply`` cut at ``cuts`` (character offsets), with the given advantages."""
    bounds = [0] + list(cuts) + [len(reply)]
    return [{"text": reply[a:b], "start": a, "end": b, "advantage": adv}
            for a, b, adv in zip(bounds, bounds[1:], advantages)]


def test_token_classes_read_first_style_number_other():
    from claw_lib.toy.homework_eval import token_classes

    reply = "To add: **Total** 20 + 44"  # "To", " add:", " **Total**", " 20", " +", " 44"
    toks = _tokens(reply, [2, 7, 17, 20, 22], [0] * 6)
    assert token_classes(toks, "student", reply) == ["first", "other", "style", "number", "other", "number"]
    assert token_classes(toks, "teacher", reply) == ["first", "other", "other", "number", "other", "number"]
    latex = "So \\frac{1}{2} of 8"
    toks = _tokens(latex, [2, 8, 14, 17], [0] * 5)
    assert token_classes(toks, "no_latex", latex) == ["first", "style", "number", "other", "number"]
    zh = "答案是 36 apples"
    toks = _tokens(zh, [3, 6, 7], [0] * 4)
    assert token_classes(toks, "chinese", zh) == ["first", "number", "other", "style"]


def test_landing_against_a_hand_count():
    from claw_lib.toy.homework_eval import landing

    reply = "To add: **Total** 20 + 44"
    a = [-2.0, 0.5, -1.0, -0.5, 0.0, 1.0]
    b = [-0.1, -0.3, 0.2, 0.0, 0.1, -0.4]
    turns = [(reply, _tokens(reply, [2, 7, 17, 20, 22], a)), (reply, _tokens(reply, [2, 7, 17, 20, 22], b)),
             (reply, [])]
    raw = landing(turns, "student")["raw"]
    neg = -2.0 - 1.0 - 0.5 - 0.1 - 0.3 - 0.4  # every negative advantage
    assert raw["first"] == {"n": 2, "mean": round((-2.0 - 0.1) / 2, 4), "negative_share": round(-2.1 / neg, 4),
                            "most_negative": 1}
    assert raw["style"] == {"n": 2, "mean": round((-1.0 + 0.2) / 2, 4), "negative_share": round(-1.0 / neg, 4),
                            "most_negative": 0}
    assert raw["number"]["n"] == 4 and raw["number"]["most_negative"] == 1  # b's argmin is its last " 44"
    skip = landing(turns, "student")["skip_first"]
    assert skip["first"]["mean"] == 0.0 and skip["first"]["most_negative"] == 0
    assert skip["style"]["most_negative"] == 1  # a's argmin moves from the first token to **Total**
    centred = landing(turns, "student")["skip_first_centred"]
    m = (0.5 - 1.0 - 0.5 + 0.0 + 1.0) / 5  # a's mean over the tokens kept
    assert centred["style"]["mean"] == round(((-1.0 - m) + (0.2 - (-0.3 + 0.2 + 0.0 + 0.1 - 0.4) / 5)) / 2, 4)


@pytest.mark.real_model
@pytest.mark.skipif(not (os.environ.get("CLAW_REAL_MODEL") and os.environ.get("CLAW_GSM8K")),
                    reason="opt-in: CLAW_REAL_MODEL (a local instruct model folder) and CLAW_GSM8K (GSM8K's test.jsonl)")
def test_real_model_ceiling_tool_on_two_dev_problems(tmp_path):
    """The ceiling tool on a real instruct model, two dev problems, the student in English, greedy, short answers:
    every condition runs (a real model's positions hold the requests) and OPD's view is read (not run here yet)."""
    tool = load_tool("personal_agent_ceiling")
    out = tmp_path / "ceiling.json"
    assert tool.main(["--model", os.environ["CLAW_REAL_MODEL"], "--limit", "2", "--personas", "student", "--langs",
                      "en", "--decodings", "greedy", "--max-new-tokens", "64", "--landing", "--out", str(out)]) == 0
    r = json.loads(out.read_text())["results"][0]
    assert all(r["greedy"][c]["too_long"] == 0 for c in ("untrained", "prompted"))
    assert r["greedy"]["untrained"]["n"] == 2 and r["landing"]["too_long"] == 0
