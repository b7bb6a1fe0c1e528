"""Opt-in: the whole kit on a real causal LM that you have on disk (issue 25; docs/real_model.md).

    CLAW_REAL_MODEL=/path/to/Qwen2.5-0.5B-Instruct python -m pytest tests/test_real_model.py -m real_model

Skipped, saying why, when ``CLAW_REAL_MODEL`` is not set (CI has no real model). Each check runs the ``claw``
command in its own process, as a user would, with the per-model defaults: hindsight OPD on the article's
example (both languages, one model load), the perplexity reward with the model as judge, and two training steps
of each engine on the real-world questions with the teacher user; the model as the judge of training (``--judge``)
and a run's PEFT adapter loaded with ``PeftModel.from_pretrained`` (these two: 2 passed in 142 s with
Qwen2.5-Coder-0.5B-Instruct, one thread, on a shared 2-core CPU). ``CLAW_REAL_DEVICE`` (default ``cpu``)
chooses the device. Measured with Qwen2.5-Coder-0.5B-Instruct on a shared 2-core CPU: docs/real_model.md.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MODEL = os.environ.get("CLAW_REAL_MODEL")
DEVICE = os.environ.get("CLAW_REAL_DEVICE", "cpu")

pytestmark = [pytest.mark.real_model,
              pytest.mark.skipif(not MODEL, reason="set CLAW_REAL_MODEL=/path/to/a/local/causal-LM folder to run the "
                                                   "real-model checks (docs/real_model.md)")]


def claw(*args, timeout=3600):
    """``claw ARGS`` in a fresh process (this checkout's claw_lib); returns the completed process."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    r = subprocess.run([sys.executable, "-m", "claw_lib.apps.cli", *map(str, args)], capture_output=True, text=True,
                       timeout=timeout, env=env, cwd=ROOT)
    assert r.returncode in (0, 1), f"claw {' '.join(map(str, args[:2]))} failed ({r.returncode}): {r.stderr[-2000:]}"
    return r


def test_opd_puts_the_most_negative_advantage_on_the_wrong_capital(tmp_path):
    rows = [{"prompt": "法国的首都是哪里？", "response": "法国的首都是伦敦。", "next_state": "不对，法国的首都是巴黎。"},
            {"prompt": "What is the capital of France?", "response": "The capital of France is London.",
             "next_state": "No, the capital of France is Paris."},
            {"prompt": "问：法国的首都是哪里？答：", "response": "法国的首都是伦敦。", "next_state": "不对，法国的首都是巴黎。"}]
    f = tmp_path / "turns.jsonl"
    f.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    r = claw("opd", "--model", MODEL, "--device", DEVICE, "--input", f)
    out = [json.loads(line) for line in r.stdout.splitlines()]
    assert r.returncode == 0 and len(out) == 3
    for d, wrong in zip(out, ("伦敦", "London", "伦敦")):
        assert d["accepted"] and d["score"] == -1
        worst = min(d["tokens"], key=lambda t: t["advantage"])
        assert worst["text"].strip() in wrong and worst["advantage"] < -1, (wrong, d["tokens"])
    if out[2]["chat_template"]:  # the typed form is kept inside the user turn, not dropped
        assert "问：法国的首都是哪里？答：" in out[2]["prompt"]


def test_perplexity_rewards_with_the_model_as_judge():
    r = claw("rewards", "法国的首都是伦敦。", "不对，法国的首都是巴黎。", "--strategy", "perplexity", "--judge", MODEL,
             "--device", DEVICE, "--question", "法国的首都是哪里？", "--json")
    d = json.loads(r.stdout)
    worst = min(d["tokens"], key=lambda t: t["reward"])
    assert r.returncode == 0 and worst["text"] == "伦敦" and worst["reward"] < 0


@pytest.mark.parametrize("engine", ["kit", "trl"])
def test_two_training_steps_with_the_per_model_defaults(engine, tmp_path):
    out = tmp_path / engine
    r = claw("train", "--model", MODEL, "--device", DEVICE, "--engine", engine, "--task", "real", "--user", "teacher",
             "--strategy", "combined", "--steps", 2, "--batch-size", 4, "--eval-size", 8, "--save-every", 0,
             "--out", out)
    assert r.returncode == 0 and "peak memory" in r.stdout, r.stdout + r.stderr
    assert "warning" not in r.stderr                                  # the defaults are within what the model takes
    hist = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [h["step"] for h in hist] == [0, 1, 2]
    assert all(0 <= h["eval/score"] <= 1 for h in hist if "eval/score" in h)
    assert all(h["memory/peak_gib"] > 0 for h in hist[1:])
    cfg = json.loads((out / "config.json").read_text())
    from claw_lib.config import SMALL_MODEL_PARAMS, recommended_lr

    assert cfg["lora_rank"] in (0, 16) and cfg["lr"] <= recommended_lr(SMALL_MODEL_PARAMS + 1, cfg["lora_rank"] > 0)


def _lines(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_the_real_model_as_the_judge_of_training(tmp_path):
    """``claw train --judge MODEL`` (issue 36): the real model reads each sampled turn's next state (its votes and hint
    votes in samples.jsonl), the run's config.json names it, and judge/failed_share is logged; a failed vote is counted,
    never a crash."""
    out = tmp_path / "judge"
    r = claw("train", "--model", MODEL, "--device", DEVICE, "--task", "real", "--user", "correcting", "--strategy",
             "combined", "--steps", 1, "--batch-size", 2, "--eval-size", 2, "--save-every", 0, "--judge", MODEL,
             "--out", out)
    assert r.returncode == 0 and "judge votes failed" in r.stdout, r.stdout + r.stderr
    assert json.loads((out / "config.json").read_text())["opd"]["judge"] == MODEL
    samples = _lines(out / "samples.jsonl")
    assert len(samples) == 2 and all(len(s["judge"]["votes"]) == 1 and len(s["judge"]["hint_votes"]) == 1
                                     for s in samples)
    assert all(s["judge"]["representative_eval"] for s in samples)   # the model wrote something for every vote
    assert 0.0 <= _lines(out / "metrics.jsonl")[-1]["judge/failed_share"] <= 1.0


def test_a_real_runs_adapter_loads_with_peft(tmp_path):
    """The PEFT adapter a real run saves (RUN/adapter) loads with ``PeftModel.from_pretrained`` on the base model, and
    the loaded model gives the run's own last greedy answers (eval.jsonl) to the same evaluation prompts."""
    out = tmp_path / "adapter"
    r = claw("train", "--model", MODEL, "--device", DEVICE, "--task", "real", "--user", "teacher", "--strategy",
             "combined", "--steps", 1, "--batch-size", 2, "--eval-size", 2, "--save-every", 0, "--lr", "1e-4",
             "--out", out)
    assert r.returncode == 0, r.stdout + r.stderr
    import torch
    from peft import PeftModel

    from claw_lib.config import from_dict
    from claw_lib.models.lm import load_causal_lm
    from claw_lib.rl.fit import eval_tokens
    from claw_lib.toy.envs import make_env
    from claw_lib.toy.evaluation import greedy_feedback

    cfg = from_dict(json.loads((out / "config.json").read_text()))
    base, tok = load_causal_lm(MODEL, device=DEVICE, dtype=cfg.dtype)
    model = PeftModel.from_pretrained(base, str(out / "adapter")).eval()
    assert model.peft_config["default"].r == cfg.lora_rank
    trained = [p for n, p in model.named_parameters() if "lora_B" in n]
    assert trained and any(float(p.abs().max()) > 0 for p in trained)   # B starts at 0: the step moved it
    env = make_env(cfg.task, 10_000 + cfg.seed, tok, evaluation=True)
    with torch.no_grad():
        gens, _ = greedy_feedback(model, tok, env, env.sample(cfg.eval_prompts), eval_tokens(cfg))
    last = [e for e in _lines(out / "eval.jsonl") if e["step"] == 1]
    assert [g.text.strip() for g in gens] == [e["answer"] for e in last]
