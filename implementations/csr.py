"""Sorted adjacency lists (CSR) and the primitives every Generic Join needs on them: lower bound,
membership, galloping search and the adaptive intersection of two sorted lists. Shared by `local-gj`,
Shares' cells and the partitioned indices of the BiGJoin family."""
from __future__ import annotations

import numpy as np
from numba import njit


def build_csr(keys: np.ndarray, values: np.ndarray, n: int, value_bound: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """offsets (n + 1, int64) and the values sorted by (key, value); keys lie in [0, n) and values
    in [0, value_bound) (default n)."""
    bound = max(1, n if value_bound is None else value_bound)
    keys = keys.astype(np.int64, copy=False)
    combined = np.sort(keys * bound + values.astype(np.int64, copy=False))
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=n), out=offsets[1:])
    return offsets, combined % bound


@njit(cache=True)
def lower_bound(values, start, end, x):
    """First position in the sorted values[start:end] holding a value >= x."""
    lo, hi = start, end
    while lo < hi:
        mid = (lo + hi) >> 1
        if values[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True)
def contains(values, start, end, x):
    i = lower_bound(values, start, end, x)
    return i < end and values[i] == x


@njit(cache=True, nogil=True)
def gallop(values, start, end, x):
    """lower_bound for a search that moves forward: probe start+1, +2, +4, ... then bisect, so a
    run of searches over one list costs O(log gap) each instead of O(log length)."""
    if start >= end or values[start] >= x:
        return start
    below, step = start, 1  # values[below] < x
    ahead = start + 1
    while ahead < end and values[ahead] < x:
        below = ahead
        step <<= 1
        ahead = below + step
    return lower_bound(values, below + 1, min(ahead, end), x)


# Above this size ratio the smaller list gallops through the larger one (O(small · log(large/small)),
# worst-case optimal); below it a linear merge is cheaper.
GALLOP_RATIO = 16


@njit(cache=True, nogil=True)
def intersect_gallop(a, a_lo, a_hi, b, b_lo, b_hi, out, store, work):
    """a[a_lo:a_hi] ∩ b[b_lo:b_hi], each value of a galloped for in b: for a much smaller than b."""
    k = 0
    j = b_lo
    for i in range(a_lo, a_hi):
        x = a[i]
        j = gallop(b, j, b_hi, x)
        if j >= b_hi:
            break
        if b[j] == x:
            if store:
                out[k] = x
            k += 1
            j += 1
    work[1] += a_hi - a_lo
    return k


@njit(cache=True, nogil=True)
def intersect_merge(a, a_lo, a_hi, b, b_lo, b_hi, out, store, work):
    """a[a_lo:a_hi] ∩ b[b_lo:b_hi] by a branch-free linear merge: for lists of comparable size."""
    k = 0
    i, j = a_lo, b_lo
    while i < a_hi and j < b_hi:
        x, y = a[i], b[j]
        if store:
            out[k] = x
        k += x == y
        i += x <= y
        j += y <= x
    work[1] += (i - a_lo) + (j - b_lo)
    return k


@njit(cache=True, nogil=True)
def intersect(a, a_lo, a_hi, b, b_lo, b_hi, out, store, work):
    """|a[a_lo:a_hi] ∩ b[b_lo:b_hi]| of two sorted duplicate-free ranges, by merge or by galloping
    the smaller through the larger (GALLOP_RATIO); with `store` the common values go to out[0:],
    which may be a or b itself when that range starts at 0 (a write never passes a read). Adds the
    elements stepped over to work[1]."""
    if a_hi - a_lo > b_hi - b_lo:
        a, a_lo, a_hi, b, b_lo, b_hi = b, b_lo, b_hi, a, a_lo, a_hi
    if a_hi <= a_lo:
        return 0
    if (a_hi - a_lo) * GALLOP_RATIO < b_hi - b_lo:
        return intersect_gallop(a, a_lo, a_hi, b, b_lo, b_hi, out, store, work)
    return intersect_merge(a, a_lo, a_hi, b, b_lo, b_hi, out, store, work)


def vertex_ranks(ids: np.ndarray, degree: np.ndarray | None) -> np.ndarray:
    """Dense rank of each of the sorted `ids`: by (degree, id) when degrees are given (undirected
    symmetry breaking then sends each edge to its higher-degree end), else by id."""
    if degree is None:
        return np.arange(len(ids), dtype=np.int64)
    rank = np.empty(len(ids), dtype=np.int64)
    rank[np.lexsort((ids, degree))] = np.arange(len(ids), dtype=np.int64)
    return rank
