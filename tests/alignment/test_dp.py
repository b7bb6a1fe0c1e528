"""DP alignment against brute force, Levenshtein (rapidfuzz) and the recurrence; tie rules; the article's loop."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from rapidfuzz.distance import Levenshtein

from claw_lib.alignment.dp import align, align_reference, align_seed_loop


def all_alignment_costs(c, ins, dele):
    """Every monotone alignment, enumerated explicitly: yields (total, ops)."""
    n, m = c.shape

    def rec(i, j):
        if i == n and j == m:
            yield 0.0, []
            return
        if i < n and j < m:
            for t, ops in rec(i + 1, j + 1):
                yield c[i, j] + t, [("sub", i, j)] + ops
        if i < n:
            for t, ops in rec(i + 1, j):
                yield dele + t, [("delete", i, None)] + ops
        if j < m:
            for t, ops in rec(i, j + 1):
                yield ins + t, [("insert", None, j)] + ops

    yield from rec(0, 0)


def check_path(al, n, m):
    """Monotone, and covers every output and every correction index exactly once."""
    seen_i = [o.i for o in al.ops if o.i is not None]
    seen_j = [o.j for o in al.ops if o.j is not None]
    assert seen_i == list(range(n))
    assert seen_j == list(range(m))
    for o in al.ops:
        assert o.op in {"match", "replace", "insert", "delete"}
        assert (o.i is None) == (o.op == "insert")
        assert (o.j is None) == (o.op == "delete")
    assert math.isclose(sum(o.cost for o in al.ops), al.total_cost, rel_tol=1e-9, abs_tol=1e-9)


@pytest.mark.parametrize("seed", range(40))
def test_dp_equals_brute_force(seed):
    rng = np.random.default_rng(seed)
    n, m = rng.integers(0, 5, size=2)
    c = rng.random((n, m)) * 2
    ins, dele = rng.choice([0.3, 0.5, 1.0]), rng.choice([0.3, 0.5, 1.0])
    best = min(t for t, _ in all_alignment_costs(c, ins, dele))
    al = align(c, insert_cost=ins, delete_cost=dele)
    assert math.isclose(al.total_cost, best, rel_tol=1e-12, abs_tol=1e-12)
    check_path(al, n, m)


@pytest.mark.parametrize("seed", range(30))
def test_unit_costs_equal_levenshtein(seed):
    rng = np.random.default_rng(100 + seed)
    a = "".join(rng.choice(list("abcd"), size=rng.integers(0, 12)))
    b = "".join(rng.choice(list("abcd"), size=rng.integers(0, 12)))
    c = np.array([[0.0 if x == y else 1.0 for y in b] for x in a]).reshape(len(a), len(b))
    al = align(c, insert_cost=1.0, delete_cost=1.0, match_threshold=0.5)
    assert al.total_cost == Levenshtein.distance(a, b)
    # matches are exactly the equal characters that were paired
    for o in al.ops:
        if o.op == "match":
            assert a[o.i] == b[o.j]
        if o.op == "replace":
            assert a[o.i] != b[o.j]


@settings(max_examples=150, deadline=None)
@given(
    arrays(np.float64, st.tuples(st.integers(0, 9), st.integers(0, 9)),
           elements=st.sampled_from([0.0, 0.25, 0.5, 1.0, 1.5]) | st.floats(0, 2)),
    st.sampled_from([0.0, 0.5, 1.0]), st.sampled_from([0.0, 0.5, 1.0]),
)
def test_fast_equals_reference(c, ins, dele):
    """Identical totals (bit for bit), ops and DP tables, ties included (few distinct values)."""
    a = align(c, ins, dele, return_dp=True, method="diagonal")
    b = align_reference(c, ins, dele, return_dp=True)
    assert a.total_cost == b.total_cost
    assert a.ops == b.ops
    assert np.array_equal(a.dp, b.dp)
    check_path(a, *c.shape)


def test_seed_example_replaces_london_by_paris():
    # rows: 法国 的 首都 是 伦敦 。 ; cols: 不对 ， 法国 的 首都 是 巴黎 。 (costs as the article's story)
    c = np.full((6, 8), 0.9)
    for i, j in [(0, 2), (1, 3), (2, 4), (3, 5), (5, 7)]:
        c[i, j] = 0.05
    c[4, 6] = 0.7
    al = align(c)
    ops = [(o.op, o.i, o.j) for o in al.ops]
    assert ops == [("insert", None, 0), ("insert", None, 1), ("match", 0, 2), ("match", 1, 3),
                   ("match", 2, 4), ("match", 3, 5), ("replace", 4, 6), ("match", 5, 7)]
    assert math.isclose(al.total_cost, 2 + 5 * 0.05 + 0.7)


def test_threshold_is_inclusive_for_match():
    al = align(np.array([[0.5]]), match_threshold=0.5)
    assert al.ops[0].op == "match"
    al = align(np.array([[0.5000001]]), match_threshold=0.5)
    assert al.ops[0].op == "replace"


def test_ties_prefer_substitution_then_delete():
    # substitute (cost 2) vs delete+insert (1 + 1): a tie, substitution wins
    al = align(np.array([[2.0]]))
    assert [o.op for o in al.ops] == ["replace"]
    # 2x1: delete row 0 or delete row 1, both cost 1 + 0; the backtrace keeps the later pairing
    al = align(np.array([[0.0], [0.0]]))
    assert [(o.op, o.i, o.j) for o in al.ops] == [("delete", 0, None), ("match", 1, 0)]


@pytest.mark.parametrize("shape", [(0, 0), (0, 4), (3, 0)])
def test_empty_sides(shape):
    al = align(np.zeros(shape), insert_cost=0.5, delete_cost=0.25)
    n, m = shape
    assert al.total_cost == 0.5 * m + 0.25 * n
    assert [o.op for o in al.ops] == ["delete"] * n + ["insert"] * m
    check_path(al, n, m)


def test_nan_cost_is_a_clear_error():
    c = np.zeros((3, 3))
    c[1, 2] = np.nan
    with pytest.raises(ValueError, match=r"non-finite value .* \(i=1, j=2\)"):
        align(c)
    with pytest.raises(ValueError, match="2-D"):
        align(np.zeros(3))
    with pytest.raises(ValueError, match="insert_cost"):
        align(np.zeros((2, 2)), insert_cost=-1)


def test_seed_loop_agrees_on_total():
    rng = np.random.default_rng(7)
    c = rng.random((12, 9))
    total, ops = align_seed_loop(c)
    assert math.isclose(total, align(c).total_cost, rel_tol=1e-12)
    assert [o[1] for o in ops if o[1] is not None] == list(range(12))


def test_dp_table_matches_recurrence():
    rng = np.random.default_rng(3)
    c = rng.random((5, 6))
    D = align(c, 0.7, 0.4, return_dp=True).dp
    assert D.shape == (6, 7)
    for i in range(1, 6):
        for j in range(1, 7):
            assert D[i, j] == min(D[i - 1, j - 1] + c[i - 1, j - 1], D[i - 1, j] + 0.4, D[i, j - 1] + 0.7)


@pytest.mark.parametrize("shape", [(130, 140), (200, 3), (1, 300)])
def test_diagonal_and_loop_agree_on_large_inputs(shape):
    rng = np.random.default_rng(sum(shape))
    c = np.round(rng.random(shape) * 4) / 4  # many ties
    a, b = align(c, 0.5, 0.5, method="diagonal"), align(c, 0.5, 0.5, method="loop")
    assert a.total_cost == b.total_cost and a.ops == b.ops
    assert align(c, 0.5, 0.5).ops == a.ops  # auto


def test_path_cells():
    al = align(np.array([[0.0, 1.0]]))
    assert al.path() == [(0, 0), (1, 1), (1, 2)]
