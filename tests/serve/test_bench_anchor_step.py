"""benchmarks/bench_anchor_step.py on the tiny GPT: the anchor's step with the initial model's distributions kept
and recomputed, from the same weights, takes the same step (the KL before and after equal to rounding), and the
page gives the ratio; bad values are refused in one line."""
import json

import pytest

from tests.tool_module import load_tool


def test_the_kept_and_recomputed_anchor_steps_agree_and_the_page_gives_the_ratio(tmp_path):
    bench = load_tool("bench_anchor_step", "benchmarks")
    out, js = tmp_path / "a.md", tmp_path / "a.json"
    assert bench.main(["--model", "tiny", "--reps", "2", "--threads", "1", "--out", str(out), "--json", str(js)]) == 0
    res = json.loads(js.read_text())
    assert res["prompts"] == 10 and res["tokens"] > 10 and res["ratio"] > 0
    kept, again = res["runs"]["kept"], res["runs"]["recomputed"]
    assert len(kept) == len(again) == 2
    for x, y in zip(kept + again, again + kept):
        assert x["kl"] == pytest.approx(y["kl"], rel=1e-4, abs=1e-8)
    assert kept[0]["kl"][1] < kept[0]["kl"][0]  # the step undid part of the noise
    assert f"**{res['ratio']:.2f}x**" in out.read_text()
    with pytest.raises(ValueError, match="--reps must be >= 1"):
        bench.main(["--reps", "0", "--out", str(tmp_path / "x.md")])
