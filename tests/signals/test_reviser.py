"""The reviser stage (claw_lib.signals.reviser, issue 35) with a scripted LM: the gate, the candidates and their
validation, the score, the retry, the per-pair fallback to the rules, what the result says (source, revision), one
reward per output word whatever the input, binary / continuous values against hand-computed cases, the LM cache, the
OpenAI-compatible path through a real local HTTP endpoint, and one-line errors. CI has no real model: the quality
with Qwen2.5-Coder-0.5B-Instruct is measured opt-in (tools/probe_report.py, results/probe_sets.md)."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from claw_lib.config import RewardConfig, ReviserConfig
from claw_lib.signals.reviser import (CachedLM, Reviser, agreement, auto_reviser, check_candidate, load_reviser,
                                      revised_rewards, revision_rewards, similarity)
from claw_lib.signals.reviser_lm import LocalLM, parse_yes
from claw_lib.signals.rewards import token_rewards
from claw_lib.text.tokens import tokenize


def revision_first(**kw) -> ReviserConfig:
    """Settings with combine "revision": most tests here are about the revision's own path (the default, "rules_first",
    and "union" are tested in test_the_revision_and_the_rules_combine_as_set)."""
    return ReviserConfig(**{"combine": "revision", **kw})


class Scripted:
    """An LM for the reviser: ``rewrite(text, prompt) -> [replies]`` answers each chat prompt (text: the text the
    prompt asks to rewrite), ``p_yes`` the gate; every call recorded."""

    def __init__(self, rewrite, p_yes=0.9):
        self.rewrite, self.p_yes, self.calls = rewrite, p_yes, []

    def length(self, text):
        return 2 * len(tokenize(text))  # as CachedLM without an LM counts

    @staticmethod
    def text_of(prompt: str) -> str:
        for head, tail in (("One sentence of the answer:\n", "\n\nRewrite"), ("Text: ", "\n"), ("原文：", "\n"),
                           ("Answer: ", "\nThe user replied")):
            if head in prompt:
                return prompt.split(head, 1)[1].split(tail, 1)[0]
        raise AssertionError(prompt)

    def chat(self, conversations, budgets, samples, temperature, seed, batch_size):
        self.calls.append(("chat", [m[-1]["content"] for m in conversations], list(budgets), samples))
        return [list(self.rewrite(self.text_of(m[-1]["content"]), m[-1]["content"]))[:1 + samples]
                for m in conversations]

    def yes_probability(self, conversations, batch_size):
        self.calls.append(("yes", [m[-1]["content"] for m in conversations]))
        return [self.p_yes(m[-1]["content"]) if callable(self.p_yes) else self.p_yes for m in conversations]


def swap(old, new):
    return lambda text, prompt: [text.replace(old, new)]


@pytest.fixture(scope="module")
def e5():
    from claw_lib.alignment.encoders import load_encoder

    return load_encoder("e5")


ZH = {"output": "法国的首都是伦敦。", "correction": "不对，是巴黎。"}
EN = {"output": "The capital of France is London. It has many museums.", "correction": "Paris.",
      "question": "What is the capital of France?"}


def test_a_revision_gives_the_changed_word_the_reject_reward_and_says_its_source(e5):
    tr = revised_rewards([ZH], "binary", Reviser(Scripted(swap("伦敦", "巴黎")), revision_first()), encoder=e5)[0]
    assert [t.text for t in tr.tokens] == ["法国", "的", "首都", "是", "伦敦", "。"]
    assert tr.rewards.tolist() == [0.5, 0.5, 0.5, 0.5, -1.0, 0.5]
    assert tr.info["source"] == "revision" and tr.info["revision"] == "法国的首都是巴黎。"
    assert tr.info["reviser"]["why"] == "revised" and tr.to_dict()["revision"] == "法国的首都是巴黎。"


def test_the_gate_decides_there_is_nothing_to_correct_and_no_word_is_negative(e5):
    lm = Scripted(swap("伦敦", "巴黎"), p_yes=0.2)
    tr = revised_rewards([ZH], "continuous", Reviser(lm, revision_first(gate=0.5)), encoder=e5)[0]
    assert tr.info["source"] == "revision" and tr.info["revision"] == ZH["output"]
    assert tr.info["reviser"]["why"] == "nothing to correct" and tr.info["reviser"]["p_corrects"] == 0.2
    assert (tr.rewards == RewardConfig().hi).all() and not tr.rejected.any()
    assert [c[0] for c in lm.calls] == ["yes"]  # nothing was rewritten
    lm = Scripted(swap("伦敦", "巴黎"), p_yes=0.8)
    tr = revised_rewards([ZH], "binary", Reviser(lm, revision_first(gate=0.5)), encoder=e5)[0]
    assert tr.info["reviser"]["why"] == "revised" and [c[0] for c in lm.calls] == ["yes", "chat"]
    lm = Scripted(swap("伦敦", "巴黎"))
    revised_rewards([ZH], "binary", Reviser(lm, revision_first(gate=0.0)), encoder=e5)
    assert [c[0] for c in lm.calls] == ["chat"]  # gate 0: never asked


@pytest.mark.parametrize("reply, why", [("对，谢谢！", "affirmation"), ("对，而且伦敦也很大。", "affirmed"),
                                        ("Right, and it is big too.", "affirmed")])
def test_an_affirmation_asks_nothing_and_keeps_the_rules_rewards(e5, reply, why):
    lm = Scripted(swap("伦敦", "巴黎"))
    row = {"output": ZH["output"], "correction": reply}
    tr = revised_rewards([row], "binary", Reviser(lm, revision_first(gate=0.5)), encoder=e5)[0]
    assert lm.calls == [] and tr.info["source"] == "rules" and tr.info["reviser"]["why"] == why
    assert tr.rewards.tolist() == token_rewards(row["output"], row["correction"], encoder=e5).rewards.tolist()


def test_a_reply_that_only_asks_something_corrects_nothing(e5):
    lm = Scripted(swap("伦敦", "巴黎"))
    row = {"output": "法国的首都是伦敦。", "correction": "那德国的首都是哪里呢？"}
    for combine in ("rules_first", "revision"):
        tr = revised_rewards([row], "binary", Reviser(lm, ReviserConfig(combine=combine)), encoder=e5)[0]
        assert tr.info["reviser"]["why"] == "a question" and tr.info["source"] == "rules"
        assert (tr.rewards == 0.5).all() and not tr.rejected.any()
    assert lm.calls == []
    tr = revised_rewards([row], "binary", Reviser(lm, ReviserConfig(questions=False, combine="revision")), encoder=e5)[0]
    assert len(lm.calls) == 1 and tr.info["reviser"]["why"] != "a question"


def test_the_revision_and_the_rules_combine_as_set(e5):
    row = {"output": "The river is 500 km long and 80 km wide.", "correction": "No, 600 km long."}
    rules = token_rewards(row["output"], row["correction"], "binary", encoder=e5)
    assert [t.text for t, r in zip(rules.tokens, rules.rewards) if r < 0] == ["500"]
    lm = Scripted(swap("80", "90"))  # a revision that reads the correction wrong
    got = {c: revised_rewards([row], "binary", Reviser(lm, revision_first(combine=c)), encoder=e5)[0]
           for c in ("revision", "rules_first", "union")}
    neg = {c: [t.text for t, r in zip(tr.tokens, tr.rewards) if r < 0] for c, tr in got.items()}
    assert neg == {"revision": ["80"], "rules_first": ["500"], "union": ["500", "80"]}
    assert [tr.info["source"] for tr in got.values()] == ["revision", "rules", "revision"]
    assert got["union"].rewards.tolist() == np.minimum(got["revision"].rewards, rules.rewards).tolist()
    lm = Scripted(swap("80", "90"))  # rules first: where the rules find a contradiction the LM is not asked
    tr = revised_rewards([row], "binary", Reviser(lm, ReviserConfig(combine="rules_first")), encoder=e5)[0]
    assert lm.calls == [] and tr.info["reviser"]["why"] == "rules first" and tr.info["revision"] is None
    quiet = {"output": "The river is 500 km long.", "correction": "Hm, 600?"}  # the rules find nothing here
    tr = revised_rewards([quiet], "binary", Reviser(Scripted(swap("500", "600")), ReviserConfig(combine="rules_first")),
                         encoder=e5)[0]
    if not token_rewards(quiet["output"], quiet["correction"], encoder=e5).rejected.any():
        assert tr.info["source"] == "revision" and [t.text for t in np.array(tr.tokens)[tr.rejected]] == ["500"]


@pytest.mark.parametrize("reply, why", [
    ("", "empty"), ("   ", "empty"), ("\ud800伦敦", "unreadable"), ("法国的首都是巴黎，" * 8 + "。", "too long"),
    ("法国的首都是伦敦。", "unchanged"), ("  法国的首都是伦敦。 ", "unchanged"), ("。。。！", "no words"),
    ("法国的首都，是伦敦。", "no content word changed"), ("法国首都是伦敦。", "no content word changed"),
    ("不对，是巴黎。", "copied the correction"), ("他们说的首都是一个很大的城市吧。", "rewrote too much"),
    ("法国的首都是巴黎。", "ok"), ("Corrected answer: 法国的首都是巴黎。", "ok"), ("“法国的首都是巴黎。”", "ok")])
def test_each_candidate_gets_its_reason(reply, why):
    c = check_candidate(reply, ZH["output"], ZH["correction"], ReviserConfig())
    assert c.why == why
    if why == "ok":  # label and quotes stripped; similarity by difflib: 2 x 7 equal characters / (9 + 9)
        assert c.text == "法国的首都是巴黎。" and c.similarity == pytest.approx(14 / 18, abs=1e-4)


def test_agreement_and_score_by_hand():
    # content words: output {capital, france, london}; correction "No, it is Paris." brings {pari} ("No" and "it" are
    # function words); "Paris" added by the candidate is the correction's: (a) 1/1, (b) 1/1
    assert agreement("The capital of France is Paris.", "The capital of France is London.", "No, it is Paris.") == 1.0
    # a candidate that adds "Rome": (a) 0/1, (b) 0/1
    assert agreement("The capital of France is Rome.", "The capital of France is London.", "No, it is Paris.") == 0.0
    # adds nothing, the correction brings Paris: (b) 0/1 alone
    assert agreement("The capital of France.", "The capital of France is London.", "No, it is Paris.") == 0.0
    # neither defined: 0.5
    assert agreement("The capital of France.", "The capital of France is London.", "No.") == 0.5
    c = check_candidate("The capital of France is Paris.", "The capital of France is London.", "No, it is Paris.",
                        ReviserConfig(edit_weight=2.0, min_similarity=0.5))
    sim = similarity("The capital of France is Paris.", "The capital of France is London.")
    assert c.score == pytest.approx(1.0 - 2.0 * (1 - sim), abs=1e-4)


def test_the_best_scoring_valid_candidate_wins_and_samples_are_asked_for(e5):
    replies = ["法国的首都是罗马。", "法国的首都是巴黎。", "不对"]  # agreement 0, 1; the last is refused
    lm = Scripted(lambda text, prompt: replies)
    tr = revised_rewards([ZH], "binary", Reviser(lm, revision_first(samples=2)), encoder=e5)[0]
    assert lm.calls[0][3] == 2 and tr.info["revision"] == "法国的首都是巴黎。"
    whys = [c["why"] for c in tr.info["reviser"]["candidates"]]
    assert whys == ["ok", "ok", "copied the correction"]
    assert [c["agreement"] for c in tr.info["reviser"]["candidates"][:2]] == [0.0, 1.0]


def test_a_retry_follows_when_no_candidate_is_valid_and_uses_the_output_language(e5):
    lm = Scripted(lambda text, prompt: [text.replace("伦敦", "巴黎") if "原文" in prompt else text])
    tr = revised_rewards([ZH], "binary", Reviser(lm, revision_first()), encoder=e5)[0]
    assert tr.info["reviser"]["attempts"] == 2 and tr.info["revision"] == "法国的首都是巴黎。"
    assert "原文：法国的首都是伦敦。" in lm.calls[1][1][0]  # the Chinese retry prompt
    lm = Scripted(lambda text, prompt: [text])
    tr = revised_rewards([ZH], "binary", Reviser(lm, revision_first(retry=False)), encoder=e5)[0]
    assert len(lm.calls) == 1 and tr.info["reviser"]["attempts"] == 1 and tr.info["source"] == "rules"


def test_the_fallback_to_the_rules_is_per_pair_and_the_lm_is_called_in_batches(e5):
    rows = [ZH, {"output": "水的沸点是九十度。", "correction": "一百度。"}, {"output": "2 + 2 = 5.", "correction": "No, 4."}]
    lm = Scripted(lambda text, prompt: [text.replace("伦敦", "巴黎").replace("5", "4")])
    out = revised_rewards(rows, "binary", Reviser(lm, revision_first()), encoder=e5)
    assert [tr.info["source"] for tr in out] == ["revision", "rules", "revision"]
    assert len(lm.calls) == 2 and len(lm.calls[0][1]) == 3 and len(lm.calls[1][1]) == 1  # all, then the retry
    rules = token_rewards(rows[1]["output"], rows[1]["correction"], "binary", encoder=e5)
    assert out[1].rewards.tolist() == rules.rewards.tolist() and out[1].info["revision"] is None
    assert out[2].rewards.tolist() == [0.5, 0.5, 0.5, 0.5, -1.0, 0.5]


def test_in_a_long_output_only_the_addressed_sentence_is_rewritten(e5):
    seen = []

    def rewrite(text, prompt):
        seen.append(text)
        return [text.replace("London", "Paris").replace("many", "few")]
    tr = revised_rewards([EN], "binary", Reviser(Scripted(rewrite), revision_first()), encoder=e5)[0]
    assert seen == ["The capital of France is London."]  # the second sentence is copied, never shown
    assert tr.info["revision"] == "The capital of France is Paris. It has many museums."
    assert tr.info["reviser"]["spans"] == [[0, 32]]
    neg = [t.text for t, r in zip(tr.tokens, tr.rewards) if r < 0]
    assert neg == ["London"]
    seen.clear()
    tr = revised_rewards([EN], "binary", Reviser(Scripted(rewrite), revision_first(scope="output")), encoder=e5)[0]
    assert seen == [EN["output"]] and [t.text for t, r in zip(tr.tokens, tr.rewards) if r < 0] == ["London", "many"]


def test_revision_rewards_binary_and_continuous_by_hand(e5):
    cfg = RewardConfig()
    out, rev = "The river is 500 km long and very old.", "The river is 6650 km long."
    b = revision_rewards(out, rev, "binary", cfg, e5)
    c = revision_rewards(out, rev, "continuous", cfg, e5)
    ops = b.alignment.alignment.op_for_output()
    ev = b.info["evidence"]
    assert ev == ["kept", "kept", "kept", "changed", "kept", "kept", "deleted", "deleted", "deleted", "kept"]
    for i, (o, e) in enumerate(zip(ops, ev)):
        formula = min(max(cfg.a - cfg.b * o.cost, cfg.lo), cfg.hi)
        want_b = {"kept": 0.5, "changed": -1.0, "deleted": -1.0, "punct": 0.0}[e]
        want_c = {"kept": max(formula, cfg.absent), "changed": formula if formula < 0 else cfg.lo,
                  "deleted": cfg.lo, "punct": cfg.absent}[e]
        assert b.rewards[i] == want_b and c.rewards[i] == pytest.approx(want_c, abs=1e-12), (i, e)
    s = revision_rewards(out, rev, "sentence", cfg, e5)
    assert (s.rewards == cfg.reject).all()
    same = revision_rewards(out, out, "sentence", cfg, e5)
    assert (same.rewards == cfg.match).all()
    om = revision_rewards("巴黎是首都。", "巴黎是法国的首都。", "binary", RewardConfig(omissions=True), e5)
    assert om.info["evidence"][om.info["evidence"].index("omitted")] == "omitted" and om.rewards.min() == -1.0


_WORDS = st.sampled_from(["法国", "的", "首都", "是", "伦敦", "巴黎", "The", "capital", "is", "London", "Paris", "。",
                          ".", "!", "1945", "不", "对", "谢谢", "no", " ", "\n", "🙂", "a.b()"])
_TEXT = st.lists(_WORDS, max_size=12).map("".join)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(output=_TEXT, correction=_TEXT, replies=st.lists(_TEXT, min_size=3, max_size=3),
       strategy=st.sampled_from(["binary", "continuous", "sentence"]), scope=st.sampled_from(["sentence", "output"]),
       gate=st.sampled_from([0.0, 0.5]))
def test_one_finite_reward_per_output_word_whatever_the_input(e5, output, correction, replies, strategy, scope, gate):
    lm = Scripted(lambda text, prompt: replies, p_yes=lambda prompt: len(prompt) % 3 / 2)
    cfg = ReviserConfig(samples=2, scope=scope, gate=gate)  # the default combine: rules_first
    tr = revised_rewards([{"output": output, "correction": correction}], strategy, Reviser(lm, cfg),
                         RewardConfig(reviser=cfg), encoder=e5)[0]
    assert len(tr.rewards) == len(tokenize(output)) == len(tr.rejected)
    assert np.isfinite(tr.rewards).all() and tr.info["source"] in ("revision", "rules")
    assert ((tr.rewards < 0) == tr.rejected).all() or strategy == "sentence"


def test_the_cache_answers_a_second_run_without_the_lm(tmp_path, e5):
    path = tmp_path / "replies.jsonl"
    lm = Scripted(swap("伦敦", "巴黎"), p_yes=0.7)
    first = revised_rewards([ZH], "binary", Reviser(CachedLM(lm, path, lambda m: {"id": "zh-1"}),
                                                    revision_first(gate=0.5)), encoder=e5)[0]
    lines = [json.loads(x) for x in path.read_text("utf-8").splitlines()]
    assert [x["kind"] for x in lines] == ["yes", "chat"] and lines[1]["reply"] == ["法国的首都是巴黎。"]
    assert lines[0]["reply"] == 0.7 and all(x["id"] == "zh-1" for x in lines)
    again = CachedLM(None, path)  # no LM: every reply from the file
    second = revised_rewards([ZH], "binary", Reviser(again, revision_first(gate=0.5)), encoder=e5)[0]
    assert second.rewards.tolist() == first.rewards.tolist() and again.hits == 2 and again.misses == 0
    with pytest.raises(KeyError, match="no cached reply"):
        revised_rewards([EN], "binary", Reviser(again, revision_first()), encoder=e5)


def test_bad_input_gets_one_line_errors(e5):
    rv = Reviser(Scripted(swap("a", "b")), revision_first())
    for call, match in [
        (lambda: revised_rewards([ZH], "perplexity", rv, encoder=e5), "binary, continuous, sentence rewards"),
        (lambda: revised_rewards([{"output": "x"}], "binary", rv, encoder=e5), "row 0: needs string fields"),
        (lambda: revised_rewards([{"output": 3, "correction": "x"}], "binary", rv, encoder=e5), "row 0"),
        (lambda: rv.revise([(None, "abc. def.", "x", [(0, 5), (3, 8)])]), "non-overlapping"),
        (lambda: rv.revise([(None, "abc", "x", [(0, 9)])]), "inside the output"),
        (lambda: revision_rewards("a", "b", "opd"), "not 'opd'"),
    ]:
        with pytest.raises(ValueError, match=match) as e:
            call()
        assert "\n" not in str(e.value)


def test_which_lm_revises():
    from claw_lib.models.lm import load_causal_lm

    tiny, tok = load_causal_lm("tiny")
    assert auto_reviser(ReviserConfig(model="none")) is None
    assert auto_reviser(ReviserConfig(model="auto"), tiny, tok) is None  # the tiny GPT: the rules
    assert auto_reviser(ReviserConfig(model="auto")) is None  # no model given (claw rewards without --reviser)
    with pytest.raises(ValueError, match="chat template"):
        auto_reviser(ReviserConfig(model="base"), tiny, tok)
    with pytest.raises(ValueError, match="chat template"):
        LocalLM(tiny, tok)
    assert parse_yes("Yes.") == 1.0 and parse_yes(" no") == 0.0 and parse_yes("是的") == 1.0 and parse_yes("?") is None


def _endpoint():
    """The scripted OpenAI-compatible endpoint (tests/scripted_judge.py): a gate prompt gets "yes" with top log-probs
    (yes -0.2, no -1.8, "Y" -3), any other prompt the text it asks to rewrite with London -> Paris."""
    from tests.scripted_judge import ScriptedJudge

    def gate(messages):
        return "Answer with one word" in messages[-1]["content"]

    def reply(messages):
        return "yes" if gate(messages) else Scripted.text_of(messages[-1]["content"]).replace("London", "Paris")

    def logprobs(messages):
        top = [{"token": t, "logprob": v, "bytes": None} for t, v in (("yes", -0.2), ("no", -1.8), ("Y", -3.0))]
        return {"content": [{"token": "yes", "logprob": -0.2, "bytes": None, "top_logprobs": top}]} if gate(
            messages) else None
    return ScriptedJudge(reply, logprobs)


def test_an_openai_compatible_url_revises_through_the_official_client(e5):
    endpoint = _endpoint()
    with endpoint as url:
        rv = load_reviser(url, settings=ReviserConfig(gate=0.5, samples=1, combine="revision"))
        tr = revised_rewards([{"output": "The capital of France is London.", "correction": "No, Paris."}], "binary",
                             rv, encoder=e5)[0]
    assert tr.info["source"] == "revision" and tr.info["revision"] == "The capital of France is Paris."
    p = math.exp(-0.2) / (math.exp(-0.2) + math.exp(-1.8))  # "Y" is neither yes nor no
    assert tr.info["reviser"]["p_corrects"] == pytest.approx(p, abs=1e-9)
    gate, greedy, sampled = endpoint.requests
    assert gate["max_tokens"] == 1 and gate["top_logprobs"] == 10 and gate["model"] == "scripted-judge"
    assert greedy["temperature"] == 0.0 and sampled["n"] == 1 and sampled["temperature"] == 0.7


def test_an_endpoint_that_does_not_answer_is_refused_in_one_line():
    import socket

    with socket.socket() as s:  # a free port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ValueError, match="does not answer /v1/models") as e:
        load_reviser(f"http://127.0.0.1:{port}")
    assert "\n" not in str(e.value)


def test_claw_rewards_with_a_reviser_url_single_pair_and_batch(tmp_path, capsys):
    from claw_lib.apps.cli import main

    endpoint = _endpoint()
    with endpoint as url:
        assert main(["rewards", "The capital of France is London.", "No, Paris.", "--reviser", url,
                     "--reviser-combine", "revision", "--no-color"]) == 0
        text = capsys.readouterr().out
        assert "source=revision" in text and "revision: 'The capital of France is Paris.'" in text
        assert "London[-1.00]" in text and "capital[+0.50]" in text
        assert main(["rewards", "The capital of France is London.", "No, Paris.", "--reviser", url, "--json",
                     "--reviser-combine", "revision"]) == 0
        d = json.loads(capsys.readouterr().out)
        assert d["source"] == "revision" and d["revision"] == "The capital of France is Paris."
        src = tmp_path / "in.jsonl"
        src.write_text("\n".join([json.dumps({"output": "The capital of France is London.", "correction": "Paris."}),
                                  "not json", json.dumps({"output": "x" * 5000, "correction": "y"}),
                                  json.dumps({"output": "Berlin is in Spain.", "correction": "Germany."})]) + "\n")
        n = len(endpoint.requests)
        assert main(["rewards", "--input", str(src), "--reviser", url, "--reviser-combine", "revision"]) == 1
        lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [x.get("source") for x in lines] == ["revision", None, None, "rules"]
    assert lines[1]["line"] == 2 and "not valid JSON" in lines[1]["error"] and "max-chars" in lines[2]["error"]
    assert len(endpoint.requests) - n == 3  # the two good lines in one batch, then the retry of the unchanged one


def test_the_explorer_shows_the_revision_and_its_source(e5):
    from claw_lib.apps.explorer import report_html

    page = report_html(ZH["output"], ZH["correction"], reviser=Reviser(Scripted(swap("伦敦", "巴黎")), revision_first()), encoder=e5,
                       embed_png=False)
    assert "source: <b>revision</b> (revised); revision: 法国的首都是巴黎。" in page
    assert "claw-source" not in report_html(ZH["output"], ZH["correction"], encoder=e5, embed_png=False)


def test_the_training_loop_reads_the_corrections_through_the_runs_reviser(e5):
    from types import SimpleNamespace

    from claw_lib.config import PPOConfig
    from claw_lib.models.lm import encode, load_causal_lm
    from claw_lib.rl.ppo import Scorer, _token_reward_rows
    from claw_lib.signals.reviser import batch_rewards, wants_base

    _, tok = load_causal_lm("tiny")
    text = "法国的首都是伦敦。"
    task = SimpleNamespace(question="法国的首都是哪里？")  # what the stages read of a task (rl.driver.TaskView)
    ro = SimpleNamespace(tasks=[task], texts=[text], feedback=[SimpleNamespace(next_state="不对，是巴黎。")],
                         response_ids=[encode(tok, text)])
    cfg = PPOConfig(strategy="binary", subtokens="first")
    rules = _token_reward_rows(ro, cfg, Scorer(tok, encoder=e5))
    lm = Scripted(swap("伦敦", "巴黎"))
    revised = _token_reward_rows(ro, cfg, Scorer(tok, encoder=e5, reviser=Reviser(lm, revision_first())))
    assert len(lm.calls) == 1 and len(revised[0][0]) == len(ro.response_ids[0])
    assert revised[0][0].min() == -1.0 and rules[0][0].tolist() != revised[0][0].tolist()  # 法国的首都 now +0.5
    pair = [{"output": text, "correction": "不对，是巴黎。", "question": "法国的首都是哪里？"}]
    assert batch_rewards(pair, "binary", cfg.reward, e5)[0].rewards.tolist() == token_rewards(
        text, "不对，是巴黎。", "binary", cfg.reward, encoder=e5, question="法国的首都是哪里？").rewards.tolist()
    assert wants_base(PPOConfig(strategy="binary"), 630_000_000) and not wants_base(PPOConfig(strategy="binary"), 1_600_000)
    assert not wants_base(PPOConfig(strategy="combined"), 630_000_000)
    assert not wants_base(PPOConfig(strategy="binary", reward=RewardConfig(reviser=ReviserConfig(model="none"))), 6e8)


def test_a_changed_name_is_wrong_as_a_whole_initials_and_dots_too(e5):
    tr = revision_rewards("The books were written by J. R. R. Tolkien.", "The books were written by J. K. Rowling.",
                          "binary", RewardConfig(), e5)
    assert [t.text for t, r in zip(tr.tokens, tr.rewards) if r < 0] == ["J", ".", "R", ".", "R", ".", "Tolkien"]
    assert tr.info["evidence"][5] == "same name" and tr.rewards[-1] == 0.5  # the sentence's full stop is kept
    off = revision_rewards("The books were written by J. R. R. Tolkien.", "The books were written by J. K. Rowling.",
                           "binary", RewardConfig(exact=False), e5)
    assert "same name" not in off.info["evidence"]
