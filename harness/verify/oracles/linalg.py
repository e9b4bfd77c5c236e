"""Counts by sparse linear algebra in SuiteSparse:GraphBLAS (python-graphblas), a library that shares
nothing with this project. A is the 0/1 adjacency matrix of the canonical edges.

- undirected triangles: L is the strictly lower triangle of A; sum(L·L masked by L) counts each
  triangle w < v < u once (at the entry (u, w), its middle vertex v summed over).
- directed triangle patterns (three attributes, one edge between each pair, any directions, the
  plain join with self-loops kept): for attributes x, y, z with edges R1 on (x, y), R2 on (y, z) and
  R3 on (x, z), each A or its transpose as the edge's direction says, sum((R1·R2) masked by R3).
- undirected 4-cycles (the diamond): with C = A·A (common neighbours, unmasked),
  sum over i != j of C_ij·(C_ij − 1) counts every 4-cycle 8 times. A² is materialised, so this is
  refused where sum(degree²) says it would not fit (`FOUR_CYCLE_MAX_WEDGES`)."""

from __future__ import annotations

import time

import numpy as np

from harness.verify.oracles import edges as edge_arrays
from harness.verify.oracles.pattern import Pattern

THREADS = 2  # as DuckDB's
FOUR_CYCLE_MAX_WEDGES = 400_000_000  # sum(degree²) bounds the entries of A²


def applicable(pattern: Pattern) -> str | None:
    """None if this oracle counts the pattern, else why not."""
    if any(x == y for x, y in pattern.edges):
        return "self-loop atoms are not supported"
    if pattern.is_triangle_shape or pattern.is_four_cycle:
        return None
    return "counts triangles (undirected and directed) and undirected 4-cycles only"


def _matrix(rows: np.ndarray, cols: np.ndarray, n: int):
    from graphblas import Matrix

    return Matrix.from_coo(rows, cols, True, nrows=n, ncols=n, dtype=bool)  # a repeated entry is one entry


def count(src: np.ndarray, dst: np.ndarray, pattern: Pattern) -> tuple[int, float]:
    """(the count, seconds spent building the matrices and computing)."""
    import graphblas as gb
    from graphblas import monoid, semiring

    gb.ss.config["nthreads"] = THREADS
    start = time.perf_counter()
    s, d, n = edge_arrays.dense(src, dst)
    plus_pair = semiring.plus_pair["INT64"]
    if pattern.undirected and pattern.is_triangle_shape:
        lower = _matrix(np.maximum(s, d), np.minimum(s, d), n)
        total = lower.mxm(lower, plus_pair).new(mask=lower.S).reduce_scalar(monoid.plus).new().value
    elif pattern.is_triangle_shape:
        a = _matrix(s, d, n)
        transposed = a.T.new()
        x, y, z = pattern.attributes

        def relation(p: str, q: str):
            """The edge between p and q, read as a p-by-q matrix."""
            return a if (p, q) in pattern.edges else transposed

        product = relation(x, y).mxm(relation(y, z), plus_pair).new(mask=relation(x, z).S)
        total = product.reduce_scalar(monoid.plus).new().value
    elif pattern.is_four_cycle:
        degree = np.bincount(np.concatenate([s, d]), minlength=n).astype(np.int64)
        wedges = int((degree * degree).sum())
        if wedges > FOUR_CYCLE_MAX_WEDGES:
            raise MemoryError(f"4-cycles by A·A: sum(degree²) = {wedges:,} > {FOUR_CYCLE_MAX_WEDGES:,}, A² would not fit")
        a = _matrix(np.concatenate([s, d]), np.concatenate([d, s]), n)
        common = a.mxm(a, plus_pair).new()
        from graphblas import select

        off = select.offdiag(common).new()
        squares = off.ewise_mult(off, "times").reduce_scalar(monoid.plus).new().value or 0
        linear = off.reduce_scalar(monoid.plus).new().value or 0
        eightfold = int(squares) - int(linear)
        if eightfold % 8:
            raise RuntimeError(f"4-cycle identity gave {eightfold}, not a multiple of 8")
        total = eightfold // 8
    else:
        raise ValueError(applicable(pattern))
    return int(total or 0), time.perf_counter() - start
