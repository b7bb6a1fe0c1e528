"""Opt-in: a few sessions of the personal-agent stream on a real model (issue 46; docs/serve.md).

    CLAW_REAL_MODEL=/path/to/Qwen2.5-0.5B-Instruct \\
        python -m pytest tests/test_real_model_personal_agent.py -m real_model

Skipped, saying why, when ``CLAW_REAL_MODEL`` is not set (CI has no real model; CI runs the same path on the tiny
GPT in ``tests/serve/test_personal_agent_tool.py``). ``tools/personal_agent.py run`` starts ``claw serve`` on the
model with the combined strategy and LoRA adapters, the teacher persona's scripted user asks two problems of
``data/gsm8k/sample.jsonl`` (two answers per session, 48 tokens each), one update of two samples lands between the
sessions (``--wait-trained``), and two held-out problems are asked after. Checked: the run's records and numbers,
the runtime checks Reef reports (the importance ratio logged before the update and near 1 on fresh samples from a
full-precision serving copy, the update's adapter published as a PEFT folder with its record, or, if it did not move,
not published and said so). Measured: 2 passed in 171 s with Qwen2.5-Coder-0.5B-Instruct on the shared 2-core CPU.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MODEL = os.environ.get("CLAW_REAL_MODEL")
SAMPLE = ROOT / "data" / "gsm8k" / "sample.jsonl"

pytestmark = [pytest.mark.real_model,
              pytest.mark.skipif(not MODEL, reason="set CLAW_REAL_MODEL=/path/to/a/local/causal-LM folder to run the "
                                                   "real-model checks (docs/real_model.md)")]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One combined run of two sessions (the module's docstring); returns its folder."""
    root = tmp_path_factory.mktemp("pa_real")
    cmd = [sys.executable, str(ROOT / "tools" / "personal_agent.py"), "run", "--model", MODEL, "--persona", "teacher",
           "--arm", "combined", "--runs", str(root), "--problems", str(SAMPLE), "--sessions", "2", "--heldout", "2",
           "--max-tokens", "48", "--max-turns", "2", "--batch-size", "2", "--concurrency", "2", "--threads", "2",
           "--wait-trained", "1800", "--serving-format", "full"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    return root / "teacher_en" / "combined" / "seed0"


def test_the_stream_and_the_heldout_problems_are_recorded(run):
    done = json.loads((run / "done.json").read_text())
    assert done["sessions"] == 2 and done["heldout_n"] == 2 and done["cpu_minutes"] > 0
    assert len(done["first_accepted"]) == 2 and all(t <= 48 for t in done["first_tokens"])
    sessions = [json.loads(x) for x in (run / "sessions.jsonl").read_text().splitlines() if x]
    assert [s["first_version"] for s in sessions][0] == 0


def test_the_update_logs_the_ratio_near_one_and_publishes_an_adapter_or_says_why_not(run):
    rows = [json.loads(x) for x in (run / "server" / "metrics.jsonl").read_text().splitlines() if x]
    assert rows, "no update was recorded"
    first = rows[0]
    assert first["staleness_max"] == 0  # fresh samples: served by the version that trains on them
    assert abs(first["tis/ratio_mean"] - 1.0) < 0.05 and first["tis/rollout_logprob_abs_diff"] < 0.05
    assert "publish/adapter_delta_norm" in first  # the update's change, logged whether published or not
    if first["publish/published"]:
        record = json.loads((run / "server" / "adapters" / f"v{first['version']}" / "claw_version.json").read_text())
        assert record["base_model"] == MODEL and record["rank"] > 0 and first["publish/adapter_delta_norm"] > 0
    else:
        assert first["publish/adapter_delta_norm"] == 0.0 and first["version"] == 0
