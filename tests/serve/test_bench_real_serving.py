"""The real-model serving benchmarks' paths on the tiny GPT: a person's correction through the openai client
(benchmarks/bench_live_fact.py), the same in the chat page in Chromium (benchmarks/bench_page_fact.py), and greedy
answers alone vs in one batch (benchmarks/bench_batch_flips.py).
The committed real-model pages are results/serve/live_fact_qwen05.md and batch_flips_qwen05.md."""
import json

import pytest

from tests.browser import NEEDS_BROWSER
from tests.tool_module import load_tool



def needs_browser(test):
    """The browser tests' skip marks (tests/browser.py) on one test of this file."""
    for mark in NEEDS_BROWSER:
        test = mark(test)
    return test


def test_one_correction_changes_the_tiny_gpts_planted_answer_and_the_page_reports_it(tmp_path):
    bench = load_tool("bench_live_fact", "benchmarks")
    out, js = tmp_path / "fact.md", tmp_path / "fact.json"
    assert bench.main(["--model", "tiny", "--rounds", "3", "--heldout", "2", "--threads", "1", "--out", str(out),
                       "--json", str(js)]) == 0
    res = json.loads(js.read_text())
    assert res["question"] == "What is the capital of France?" and "London" in res["wrong_answer"]  # the planted belief
    assert res["rounds"][-1]["right"] and "Paris" in res["rounds"][-1]["answer_after"]
    assert res["rounds"][-1]["policy_version"] >= 1 and len(res["heldout_after"]) == 2
    page = out.read_text()
    assert "| 1 | 1 |" in page and page.rstrip().endswith(bench.limits_section(bench.LIMITS))
    with pytest.raises(ValueError, match="--rounds"):
        bench.main(["--model", "tiny", "--rounds", "0", "--out", str(tmp_path / "x.md")])


def test_split_facts_hold_out_the_eval_split_and_the_gate_probes_the_dev_facts(tmp_path):
    """--facts split --gate: the corrected fact is a training fact that is not a dev fact, the held-out questions
    are exactly the eval split's, the server ran with the dev facts as its publish gate and the page says what the
    gate decided."""
    from claw_lib.toy.real_tasks import real_facts

    bench = load_tool("bench_live_fact", "benchmarks")
    capitals = [f for f in real_facts() if f.kind == "capital" and f.lang == "en"]
    probes = bench.gate_file(tmp_path / "gate.jsonl", "en").read_text().splitlines()
    assert [json.loads(x) for x in probes] == [{"prompt": f.text, "expected": f.truth} for f in capitals if f.dev]
    out, js = tmp_path / "fact.md", tmp_path / "fact.json"
    assert bench.main(["--model", "tiny", "--rounds", "2", "--heldout", "20", "--facts", "split", "--gate",
                       "--threads", "1", "--out", str(out), "--json", str(js)]) == 0
    res = json.loads(js.read_text())
    by_text = {f.text: f for f in capitals}
    assert by_text[res["question"]].split == "train" and not by_text[res["question"]].dev
    assert sorted(res["heldout_before"]) == sorted(f.text for f in capitals if f.split == "eval")
    assert "--publish-gate DEV_FACTS" in res["serve_flags"] and res["gate"]
    page = out.read_text()
    assert "the eval split's capital questions" in page
    assert any(r["gate"] for r in res["rounds"]) and "The publish gate (the dev capital questions" in page


def test_split_facts_with_the_anchor_name_it_and_report_its_kl(tmp_path):
    """--facts split --anchor: the server ran with the dev facts as its anchor, and the page has the anchor's KL
    after each update's optimizer step and after its anchor step, the second never above the first."""
    bench = load_tool("bench_live_fact", "benchmarks")
    out, js = tmp_path / "fact.md", tmp_path / "fact.json"
    assert bench.main(["--model", "tiny", "--rounds", "2", "--heldout", "3", "--facts", "split", "--anchor",
                       "--threads", "1", "--out", str(out), "--json", str(js)]) == 0
    res = json.loads(js.read_text())
    assert "--anchor DEV_FACTS" in res["serve_flags"] and res["anchor"]
    kls = [r["anchor_kl"] for r in res["rounds"]]
    assert kls and all(before >= after >= 0 for before, after in kls), kls
    assert "The anchor (the dev capital questions, 10 prompts" in out.read_text()


def test_the_anchor_from_the_training_facts_leaves_out_the_corrected_one(tmp_path):
    """--anchor-from train: the fact is chosen on a server without the anchor, then the anchored server's prompts
    are every English training capital question but the corrected one (its status counts them), and the page names
    them; without --anchor or --facts split the flag is refused in one line."""
    from claw_lib.toy.real_tasks import real_facts

    bench = load_tool("bench_live_fact", "benchmarks")
    train = [f for f in real_facts() if f.kind == "capital" and f.lang == "en" and f.split == "train"]
    rows = bench.gate_file(tmp_path / "a.jsonl", "en", "train", but=train[3].text).read_text().splitlines()
    assert [json.loads(x)["prompt"] for x in rows] == [f.text for f in train if f is not train[3]]
    out, js = tmp_path / "fact.md", tmp_path / "fact.json"
    assert bench.main(["--model", "tiny", "--rounds", "1", "--heldout", "2", "--facts", "split", "--anchor",
                       "--anchor-from", "train", "--threads", "1", "--out", str(out), "--json", str(js)]) == 0
    res = json.loads(js.read_text())
    assert "--anchor TRAIN_FACTS_BUT_THE_CORRECTED" in res["serve_flags"] and res["anchor_from"] == "train"
    assert res["rounds"][0]["anchor_prompts"] == len(train) - 1
    assert "every training capital question but the corrected one, 28 prompts" in out.read_text()
    for flags in (["--anchor-from", "train"], ["--anchor", "--anchor-from", "train"]):
        with pytest.raises(ValueError, match="--anchor-from train needs"):
            bench.main(["--model", "tiny", *flags, "--out", str(tmp_path / "x.md")])


@needs_browser
def test_the_page_benchmark_corrects_the_tiny_gpt_in_chromium(tmp_path):
    """benchmarks/bench_page_fact.py on the tiny GPT: the rounds typed into the page in Chromium, the version banner
    read, the next greedy answer right (the tiny GPT learns its Chinese capital in one update), no page errors."""
    bench = load_tool("bench_page_fact", "benchmarks")
    out, js = tmp_path / "page.md", tmp_path / "page.json"
    assert bench.main(["--model", "tiny", "--lang", "zh", "--rounds", "3", "--max-cpu-minutes", "3", "--threads", "1",
                       "--out", str(out), "--json", str(js)]) == 0
    res = json.loads(js.read_text())
    last = res["rounds"][-1]
    assert last["right"] and last["greedy"] and last["version_after"] >= 1 and last["answer_version"] >= 1
    assert f"v{last['version_after']}" in last["banner"] and res["page_errors"] == []
    assert "结束" not in last["answer_after"]  # the end-of-text chip is the page's label, not the answer
    page = out.read_text()
    assert page.rstrip().endswith(bench.limits_section(bench.LIMITS)) and "| 1 |" in page


def test_full_precision_greedy_answers_are_the_same_alone_and_batched(tmp_path):
    bench = load_tool("bench_batch_flips", "benchmarks")
    js = tmp_path / "flips.json"
    assert bench.main(["--model", "tiny", "--tokens", "12", "--prompts", "6", "--formats", "full", "--json", str(js),
                       "--out", str(tmp_path / "flips.md")]) == 0
    full = json.loads(js.read_text())["formats"]["full"]
    assert full["identical"] == full["n"] == 6 and all(r["first_diff"] is None for r in full["rows"])


def test_the_batching_benchmark_compares_with_and_without_the_prefix_cache(tmp_path):
    """benchmarks/bench_serve_batching.py on the tiny GPT at its smallest: three server kinds (batched with and
    without the prefix cache, one at a time), each concurrency's row and the page's sentence on the cache."""
    bench = load_tool("bench_serve_batching", "benchmarks")
    out, js = tmp_path / "b.md", tmp_path / "b.json"
    assert bench.main(["--concurrency", "1", "2", "--requests", "1", "--max-tokens", "4", "--repeats", "1",
                       "--out", str(out), "--json", str(js)]) == 0
    res = json.loads(js.read_text())
    kinds = {r["kind"]: r["prefix_cache"] for r in res["runs"]}
    assert kinds == {"batched": True, "one at a time": True, "batched, no prefix cache": False}
    assert {(r["kind"], r["concurrency"]) for r in res["summary"]} == {(k, c) for k in kinds for c in (1, 2)}
    assert "Without the prefix cache" in out.read_text()
    assert "weights float32 (the CPU computes bfloat16 natively: " in out.read_text()  # the baseline's dtype named


def test_the_batching_benchmark_runs_the_dtype_it_names(tmp_path, monkeypatch):
    """--dtype reaches every server's config ("auto" would be bfloat16 on a CPU with AMX, and a float32 baseline's
    ratios would silently become bfloat16's); the page names the dtype the model ran in."""
    bench = load_tool("bench_serve_batching", "benchmarks")
    seen = []
    monkeypatch.setattr(bench, "run_kind", lambda mb, fmt, a, threads, prefix=True: seen.append(a.dtype) or {
        c: {"latency_s": [0.1], "tokens": 4, "wall_s": 0.1} for c in a.concurrency})
    monkeypatch.setattr(bench, "engine_only", lambda a, threads: {c: 1.0 for c in a.concurrency})
    out = tmp_path / "b.md"
    assert bench.main(["--concurrency", "1", "--repeats", "1", "--dtype", "bfloat16", "--prefix-cache", "on",
                       "--out", str(out)]) == 0
    assert seen == ["bfloat16", "bfloat16"] and "weights bfloat16 (" in out.read_text()


def test_claw_serve_takes_the_prefix_cache_budget():
    import argparse

    from claw_lib.apps.serve_cli import add_serve_args, serve_config

    p = argparse.ArgumentParser()
    add_serve_args(p)
    assert serve_config(p.parse_args(["--prefix-cache-tokens", "0"])).prefix_cache_tokens == 0
    assert serve_config(p.parse_args([])).prefix_cache_tokens == 8192
    with pytest.raises(SystemExit):
        p.parse_args(["--prefix-cache-tokens", "-3"])
