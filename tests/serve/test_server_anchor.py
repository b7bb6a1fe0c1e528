"""The live server's anchor (claw serve --anchor, claw_lib/serve/anchoring.py) through real HTTP on the tiny GPT:
the initial model's answers to the anchor prompts are built at the start, each optimizer step is followed by the anchor's
step (anchor/kl in the metrics and the status), and after the same corrections the policy is closer to the initial model on those
prompts with the anchor than without; bad files and values are refused in one line."""
import json
import subprocess

import openai
import pytest

from claw_lib.config import PPOConfig
from claw_lib.rl.anchor import anchor_kl
from claw_lib.serve import LiveServer, ServeConfig
from claw_lib.serve.config import check_serve_config
from tests.serve.test_server_resume import CLAW
from tests.serve.test_server_training import _correct

ANCHOR = ["法国的首都是哪里？", "日本的首都是哪里？", "德国的首都是哪里？"]


def _cfg(anchor, coef):
    ppo = PPOConfig(strategy="combined", batch_size=2, progress=False, threads=1, max_new_tokens=12, epochs=3)
    return ServeConfig(ppo=ppo, anchor=str(anchor), anchor_coef=coef)


def _anchor_file(tmp_path):
    f = tmp_path / "anchor.jsonl"
    f.write_text("".join(json.dumps({"prompt": q}, ensure_ascii=False) + "\n" for q in ANCHOR), encoding="utf-8")
    return f


def _after_corrections(tmp_path, name, coef):
    """(the status, the metrics rows, the anchor KL of the trained policy) after 4 corrected sessions (2 updates)."""
    with LiveServer(_cfg(_anchor_file(tmp_path), coef), port=0, out=tmp_path / name) as srv:
        c = openai.OpenAI(base_url=srv.url + "/v1", api_key="none", max_retries=0, timeout=60)
        for k in range(4):
            _correct(c, f"{name}-{k}")
        srv.wait_idle(120)
        s = srv.system
        return s.status(), list(s.metrics), anchor_kl(s.engine.trainer, s.anchor)


def test_the_anchor_keeps_the_policy_nearer_the_initial_model_on_its_prompts(tmp_path):
    st0, rows0, kl0 = _after_corrections(tmp_path, "free", 0.0)
    st1, rows1, kl1 = _after_corrections(tmp_path, "anchored", 100.0)
    assert st0["updates"] == st1["updates"] == 2
    assert st1["anchor"]["prompts"] == 3 and st1["anchor"]["tokens"] > 3 and st1["anchor"]["coef"] == 100.0
    assert st1["anchor"]["steps"] == 1 and st1["anchor"]["reference_kept"]
    assert st1["anchor"]["last_kl"] == rows1[-1]["anchor/kl"] > 0
    assert all(r["anchor/kl_after"] <= r["anchor/kl"] for r in rows1)  # (means over the update's steps)
    assert all("anchor/kl" not in r for r in rows0)  # coef 0: the term is not computed
    assert kl0 > 0 and kl1 < 0.5 * kl0, (kl1, kl0)
    with open(tmp_path / "anchored" / "metrics.csv", encoding="utf-8") as f:
        assert "anchor/kl" in f.readline()


def test_bad_anchor_settings_are_refused_in_one_line(tmp_path):
    bad = tmp_path / "anchor.jsonl"
    for text, words in (('{"text": "hi"}\n', "anchor .*line 1 must be a JSON object with \"prompt\""),
                        ("\n", "holds no probes")):
        bad.write_text(text)
        with pytest.raises(ValueError, match=words):
            check_serve_config(ServeConfig(anchor=str(bad)))
    with pytest.raises(ValueError, match=r"anchor_steps must be an integer in \[1, 100\]"):
        check_serve_config(ServeConfig(anchor=str(_anchor_file(tmp_path)), anchor_steps=0))
    with pytest.raises(ValueError, match="anchor_coef must be a finite number >= 0"):
        check_serve_config(ServeConfig(anchor=str(_anchor_file(tmp_path)), anchor_coef=-1.0))
    r = subprocess.run(CLAW + ["serve", "--port", "0", "--anchor", str(tmp_path / "none.jsonl")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "--anchor" in r.stderr and "cannot be read" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    long = tmp_path / "long.jsonl"  # a prompt longer than the tiny GPT reads: refused at the start, in one line
    long.write_text(json.dumps({"prompt": "法国" * 2000}, ensure_ascii=False) + "\n", encoding="utf-8")
    for flag in ("--anchor", "--publish-gate"):
        if flag == "--publish-gate":
            long.write_text(json.dumps({"prompt": "法国" * 2000, "expected": "x"}, ensure_ascii=False) + "\n")
        r = subprocess.run(CLAW + ["serve", "--port", "0", flag, str(long)], capture_output=True, text=True, timeout=120)
        assert r.returncode == 2 and "probe 1 is" in r.stderr and "positions" in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
