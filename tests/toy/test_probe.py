"""The probe set: alignment rewards find the rejected words (quality gate)."""
from claw_lib.toy.probe import load_probe_set, probe_metrics


def test_probe_set_quality_gate(e5):
    rows = load_probe_set()
    assert len(rows) >= 40 and {r["lang"] for r in rows} == {"zh", "en"}
    assert {"no_error", "noisy", "negation"} <= {r["kind"] for r in rows}
    for strategy in ("binary", "continuous"):
        m = probe_metrics(rows, strategy, encoder=e5)
        assert m["hit_rate"] >= 0.9, (strategy, m["hit_rate"])
        assert m["mean_inside"] < 0 < m["mean_outside"]
        assert m["no_error_ok"] == 1.0
