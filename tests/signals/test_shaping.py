"""Shaping functions against hand computations."""
import numpy as np

from claw_lib.signals.shaping import aggregate_corrections, confidence_weights, decayed_credit, positive_shaping


def test_shaping_functions():
    r = np.array([0.5, 0.5, -1.0, 0.5, 0.5, 0.5])
    d = decayed_credit(r, r < 0, k=2, gamma=0.5)
    assert d.tolist() == [0.5, 0.5, -1.0, 0.5 - 0.5, 0.5 - 0.25, 0.5]
    p = positive_shaping(r, np.array([0.1, 0.0, 0.9, 0.2, 2.0, 0.0]), r > 0, bonus=0.2)
    assert np.allclose(p, [0.5 + 0.18, 0.7, -1.0, 0.5 + 0.16, 0.5, 0.7])
    w = confidence_weights(np.array([0.3, 0.375, 0.0, 1.0]), threshold=0.3, margin=0.15, floor=0.2)
    assert np.allclose(w, [0.2, 0.5, 1.0, 1.0])
    R = [np.array([0.5, -1, 0.5]), np.array([0.5, -1, -1]), np.array([-1, 0.5, 0.5])]
    assert np.allclose(aggregate_corrections(R, "mean"), [0.0, -0.5, 0.0])
    assert np.allclose(aggregate_corrections(R, "vote"), [0.5, -1.0, 0.5])
    assert aggregate_corrections([np.array([1.0]), np.array([-1.0])], "vote").tolist() == [0.0]
