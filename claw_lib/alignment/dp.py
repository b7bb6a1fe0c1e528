"""Semantic edit-distance alignment by dynamic programming (introduced in notebook 02).

Given an ``(n, m)`` cost matrix ``C`` between the ``n`` tokens of the model output and the ``m``
tokens of the user's correction, find the cheapest monotone alignment in which every output
token is either *substituted* by one correction token (``match`` or ``replace``) or *deleted*,
and every correction token is either substituted or *inserted*::

    D[0, 0] = 0
    D[i, 0] = D[i-1, 0] + delete_cost            (output token i-1 deleted)
    D[0, j] = D[0, j-1] + insert_cost            (correction token j-1 inserted)
    D[i, j] = min(D[i-1, j-1] + C[i-1, j-1],     substitute (match / replace)
                  D[i-1, j]   + delete_cost,     delete output token i-1
                  D[i,   j-1] + insert_cost)     insert correction token j-1

A substitution is called ``match`` when ``C[i, j] <= match_threshold`` and ``replace`` otherwise.

Ties are broken deterministically in the order **substitute, delete, insert**: when two moves
give the same total, the backtrace prefers pairing the tokens, then deleting the output token.

Two implementations give bit-identical totals and identical paths:

* :func:`align_reference` -- the textbook double loop in plain Python (readable, slow);
* :func:`align` with ``method="diagonal"`` -- the same recurrence evaluated one anti-diagonal at a time with numpy
  (all cells on a diagonal ``i + j = d`` depend only on diagonals ``d-1`` and ``d-2``), with the
  same additions in the same order, so the floating-point results are identical.
  ``align`` picks the loop for small matrices (below ``AUTO_LOOP_CELLS``, where numpy's per-call
  overhead loses) and the diagonal sweep for large ones.

:func:`align_seed_loop` is the article's original loop (``np.argmin`` per cell), kept for the
benchmark in ``benchmarks/bench_align.py``.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import List, Optional

import numpy as np

__all__ = ["AlignOp", "Alignment", "align", "align_reference", "align_seed_loop", "AUTO_LOOP_CELLS"]

# op codes used in the backtrace tables
_SUB, _DEL, _INS = 0, 1, 2


@dataclass(frozen=True)
class AlignOp:
    """One step of an alignment.

    op:   "match" | "replace" | "insert" | "delete"
    i:    index of the output token (None for "insert")
    j:    index of the correction token (None for "delete")
    cost: the cost this step adds to the total (C[i, j], delete_cost or insert_cost)
    """

    op: str
    i: Optional[int]
    j: Optional[int]
    cost: float

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Alignment:
    """Result of :func:`align`.

    ops:        list of :class:`AlignOp` in order (output and correction indices increase)
    total_cost: D[n, m], the minimum total cost (float)
    n, m:       number of output / correction tokens
    dp:         the (n+1, m+1) float64 table D, only when ``return_dp=True``
    """

    ops: List[AlignOp]
    total_cost: float
    n: int
    m: int
    dp: Optional[np.ndarray] = field(default=None, repr=False)

    def op_for_output(self) -> List[AlignOp]:
        """The op that consumed each output token, a list of length n (no inserts)."""
        out: List[Optional[AlignOp]] = [None] * self.n
        for o in self.ops:
            if o.i is not None:
                out[o.i] = o
        assert all(o is not None for o in out)
        return out  # type: ignore[return-value]

    def path(self) -> List[tuple]:
        """DP cells visited, from (0, 0) to (n, m); for drawing the path on a heatmap."""
        i = j = 0
        cells = [(0, 0)]
        for o in self.ops:
            if o.op in ("match", "replace"):
                i, j = i + 1, j + 1
            elif o.op == "delete":
                i += 1
            else:
                j += 1
            cells.append((i, j))
        return cells

    def to_dict(self) -> dict:
        return {"ops": [o.to_dict() for o in self.ops], "total_cost": float(self.total_cost)}


def _check(cost, insert_cost: float, delete_cost: float, match_threshold: float) -> np.ndarray:
    c = np.asarray(cost, dtype=np.float64)
    if c.ndim != 2:
        raise ValueError(f"cost must be a 2-D (n, m) array, got shape {c.shape}")
    if not np.all(np.isfinite(c)):
        bad = np.argwhere(~np.isfinite(c))[0]
        raise ValueError(
            f"cost matrix contains a non-finite value ({c[tuple(bad)]}) at (i={bad[0]}, j={bad[1]}); "
            "check the embeddings (a zero vector gives NaN cosine) before aligning"
        )
    for name, v in (("insert_cost", insert_cost), ("delete_cost", delete_cost)):
        if not (isinstance(v, (int, float, np.floating)) and math.isfinite(v) and v >= 0):
            raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
    if not math.isfinite(match_threshold):
        raise ValueError(f"match_threshold must be finite, got {match_threshold!r}")
    return c


def _backtrace(op_at, c: np.ndarray, n: int, m: int, insert_cost: float, delete_cost: float,
               match_threshold: float) -> List[AlignOp]:
    """Walk back from (n, m); ``op_at(i, j)`` returns the op code stored for interior cell (i, j)."""
    ops: List[AlignOp] = []
    i, j = n, m
    while i > 0 or j > 0:
        if i == 0:
            code = _INS
        elif j == 0:
            code = _DEL
        else:
            code = op_at(i, j)
        if code == _SUB:
            cc = float(c[i - 1, j - 1])
            ops.append(AlignOp("match" if cc <= match_threshold else "replace", i - 1, j - 1, cc))
            i, j = i - 1, j - 1
        elif code == _DEL:
            ops.append(AlignOp("delete", i - 1, None, float(delete_cost)))
            i -= 1
        else:
            ops.append(AlignOp("insert", None, j - 1, float(insert_cost)))
            j -= 1
    ops.reverse()
    return ops


def _boundaries(n: int, m: int, insert_cost: float, delete_cost: float):
    """First column and first row of D, accumulated one addition at a time (shared by both paths)."""
    col = [0.0] * (n + 1)
    for i in range(1, n + 1):
        col[i] = col[i - 1] + delete_cost
    row = [0.0] * (m + 1)
    for j in range(1, m + 1):
        row[j] = row[j - 1] + insert_cost
    return col, row


def align_reference(cost, insert_cost: float = 1.0, delete_cost: float = 1.0,
                    match_threshold: float = 0.5, return_dp: bool = False) -> Alignment:
    """Plain-Python double loop over the recurrence in the module docstring. Same result as :func:`align`."""
    c = _check(cost, insert_cost, delete_cost, match_threshold)
    n, m = c.shape
    cl = c.tolist()
    col, row = _boundaries(n, m, insert_cost, delete_cost)
    D = [[0.0] * (m + 1) for _ in range(n + 1)]
    B = [[0] * (m + 1) for _ in range(n + 1)]
    D[0] = row[:]
    for i in range(1, n + 1):
        D[i][0] = col[i]
        prev, cur, ci = D[i - 1], D[i], cl[i - 1]
        for j in range(1, m + 1):
            best, code = prev[j - 1] + ci[j - 1], _SUB
            d = prev[j] + delete_cost
            if d < best:
                best, code = d, _DEL
            s = cur[j - 1] + insert_cost
            if s < best:
                best, code = s, _INS
            cur[j] = best
            B[i][j] = code
    ops = _backtrace(lambda i, j: B[i][j], c, n, m, insert_cost, delete_cost, match_threshold)
    return Alignment(ops, float(D[n][m]), n, m, np.array(D, dtype=np.float64) if return_dp else None)


#: Below this many cells the plain loop is faster than numpy's per-diagonal call overhead.
AUTO_LOOP_CELLS = 128 * 128


def _diagonal_sweep(c: np.ndarray, insert_cost: float, delete_cost: float):
    """The DP table of ``c`` (n, m), one anti-diagonal at a time: (S, OP), both (n + m + 1, n + 1) in the skewed
    layout S[d, i] = D[i, d - i] (cells outside the table +inf), OP the op that entered each cell (the back-pointer
    codes of :func:`_backtrace`)."""
    n, m = c.shape
    col, row = _boundaries(n, m, insert_cost, delete_cost)
    nd = n + m + 1
    # Skewed layout: S[d, i] = D[i, d - i]; cells outside the table stay +inf.
    S = np.full((nd, n + 1), np.inf)
    OP = np.zeros((nd, n + 1), dtype=np.int8)
    S[np.arange(n + 1), np.arange(n + 1)] = col  # D[i, 0] on diagonal d = i
    S[np.arange(m + 1), 0] = row                 # D[0, j] on diagonal d = j
    if n and m:
        # Cs[d, i] = C[i-1, d-i-1]: the substitution cost of entering cell (i, d-i)
        Cs = np.zeros((nd, n + 1))
        # Write C through a strided view: flat index of Cs[i+j+2, i+1] is i*(n+2) + j*(n+1) + 2(n+1) + 1,
        # distinct for every (i, j), so this is a plain copy.
        item = Cs.itemsize
        skew = np.lib.stride_tricks.as_strided(
            Cs.reshape(-1)[2 * (n + 1) + 1:], shape=(n, m), strides=((n + 2) * item, (n + 1) * item))
        skew[...] = c
        tmp = np.empty(n + 1)
        take = np.empty(n + 1, dtype=bool)
        for d in range(2, nd):
            lo, hi = max(1, d - m), min(n, d - 1)
            if lo > hi:
                continue
            k = hi - lo + 1
            best, code, t, tk = S[d, lo:hi + 1], OP[d, lo:hi + 1], tmp[:k], take[:k]
            np.add(S[d - 2, lo - 1:hi], Cs[d, lo:hi + 1], out=best)  # from D[i-1, j-1]
            np.add(S[d - 1, lo - 1:hi], delete_cost, out=t)           # from D[i-1, j]
            np.less(t, best, out=tk)
            np.copyto(best, t, where=tk)
            np.copyto(code, _DEL, where=tk)
            np.add(S[d - 1, lo:hi + 1], insert_cost, out=t)           # from D[i, j-1]
            np.less(t, best, out=tk)
            np.copyto(best, t, where=tk)
            np.copyto(code, _INS, where=tk)
    return S, OP


def align(cost, insert_cost: float = 1.0, delete_cost: float = 1.0, match_threshold: float = 0.5,
          return_dp: bool = False, method: str = "auto") -> Alignment:
    """Cheapest monotone alignment of output tokens (rows) to correction tokens (columns).

    cost:            (n, m) array-like of float, C[i, j] = cost of pairing output token i with
                     correction token j (the kit's semantic cost is 1 - cos, in [0, 2]).
                     n = 0 or m = 0 is valid (everything is deleted / inserted).
    insert_cost:     cost of a correction token that pairs with nothing (>= 0).
    delete_cost:     cost of an output token that pairs with nothing (>= 0).
    match_threshold: a substitution with cost <= threshold is a "match", otherwise a "replace".
    return_dp:       also return the (n+1, m+1) table D (memory O(n m)).
    method:          "diagonal" (numpy, one anti-diagonal at a time), "loop"
                     (:func:`align_reference`) or "auto": the loop below ``AUTO_LOOP_CELLS``
                     cells, where it is faster, the diagonal sweep above. All give identical results.

    Returns an :class:`Alignment`; raises ``ValueError`` on NaN/inf costs or a bad shape.
    """
    if method not in ("auto", "diagonal", "loop"):
        raise ValueError(f"method must be 'auto', 'diagonal' or 'loop', got {method!r}")
    c = _check(cost, insert_cost, delete_cost, match_threshold)
    if method == "loop" or (method == "auto" and c.size <= AUTO_LOOP_CELLS):
        return align_reference(c, insert_cost, delete_cost, match_threshold, return_dp)
    n, m = c.shape
    S, OP = _diagonal_sweep(c, insert_cost, delete_cost)
    ops = _backtrace(lambda i, j: OP[i + j, i], c, n, m, insert_cost, delete_cost, match_threshold)
    dp = None
    if return_dp:
        ii, jj = np.indices((n + 1, m + 1))
        dp = S[ii + jj, ii]
    return Alignment(ops, float(S[n + m, n]), n, m, dp)


def align_seed_loop(cost_matrix, match_threshold: float = 0.5):
    """The article's loop, as written (section 4), for the benchmark only.

    Unit insert/delete costs, ``np.argmin`` per cell (ties: delete, insert, substitute).
    Returns (total_cost, [(op, i, j), ...]).
    """
    cost_matrix = np.asarray(cost_matrix, dtype=np.float64)
    n, m = cost_matrix.shape
    dp = np.zeros((n + 1, m + 1))
    dp[0, :] = np.arange(m + 1) * 1.0
    dp[:, 0] = np.arange(n + 1) * 1.0
    backtrace = np.zeros((n + 1, m + 1, 2), dtype=int)
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            cost_delete = dp[i - 1, j] + 1.0
            cost_insert = dp[i, j - 1] + 1.0
            cost_replace = dp[i - 1, j - 1] + cost_matrix[i - 1, j - 1]
            costs = [cost_delete, cost_insert, cost_replace]
            k = np.argmin(costs)
            dp[i, j] = costs[k]
            backtrace[i, j] = [(i - 1, j), (i, j - 1), (i - 1, j - 1)][k]
    # the seed leaves the first row/column without back-pointers; point them at the border
    backtrace[0, 1:, 0], backtrace[0, 1:, 1] = 0, np.arange(m)
    backtrace[1:, 0, 0], backtrace[1:, 0, 1] = np.arange(n), 0
    i, j, alignment = n, m, []
    while i > 0 or j > 0:
        pi, pj = backtrace[i, j]
        if pi == i - 1 and pj == j - 1:
            op = "replace" if cost_matrix[i - 1, j - 1] > match_threshold else "match"
            alignment.append((op, i - 1, j - 1))
        elif pi == i - 1:
            alignment.append(("delete", i - 1, None))
        else:
            alignment.append(("insert", None, j - 1))
        i, j = int(pi), int(pj)
    alignment.reverse()
    return float(dp[n, m]), alignment
