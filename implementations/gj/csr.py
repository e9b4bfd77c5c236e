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
    return _counting_csr(keys.astype(np.int64, copy=False), values.astype(np.int64, copy=False), n, bound)


def build_narrow_csr(keys: np.ndarray, values: np.ndarray, n: int, value_bound: int) -> tuple[np.ndarray, np.ndarray]:
    """`build_csr` of int32 keys and values, its lists int32 too: no int64 copy of either is made (a
    partition's build holds tens of millions of entries, under a worker's memory cap)."""
    if keys.dtype != np.int32 or values.dtype != np.int32:
        raise TypeError(f"build_narrow_csr takes int32 keys and values, not {keys.dtype} and {values.dtype}")
    return _counting_csr(keys, values, n, max(1, value_bound))


@njit(cache=True, nogil=True)
def _counting_csr(keys, values, n, bound):
    """Two stable counting sorts, by value then by key: O(edges + n + bound), no comparison sort."""
    m = len(keys)
    offsets = np.zeros(n + 1, np.int64)
    by_value = np.zeros(bound + 1, np.int64)
    for i in range(m):
        offsets[keys[i] + 1] += 1
        by_value[values[i] + 1] += 1
    for v in range(n):
        offsets[v + 1] += offsets[v]
    for v in range(bound):
        by_value[v + 1] += by_value[v]
    order = np.empty(m, np.int64)
    for i in range(m):
        order[by_value[values[i]]] = i
        by_value[values[i]] += 1
    fill = offsets[:-1].copy()
    lists = np.empty(m, values.dtype)
    for t in range(m):
        i = order[t]
        lists[fill[keys[i]]] = values[i]
        fill[keys[i]] += 1
    return offsets, lists


@njit(cache=True)
def lower_bound(values, start, end, x):
    """First position in the sorted values[start:end] holding a value >= x."""
    if start >= end or values[start] >= x:  # the common case of a bound below the whole range
        return start
    lo, hi = start + 1, end
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


@njit(cache=True, nogil=True)
def locate_sorted(values, queries):
    """(position, found) of each ascending query in the sorted values, each search galloping on from
    the previous one: a batch of q lookups costs O(q log(len/q)), not O(q log len)."""
    at = np.empty(len(queries), np.int64)
    found = np.zeros(len(queries), np.bool_)
    j = 0
    for i in range(len(queries)):
        j = gallop(values, j, len(values), queries[i])
        at[i] = j
        found[i] = j < len(values) and values[j] == queries[i]
    return at, found


# Above this size ratio the smaller list gallops through the larger one (O(small · log(large/small)),
# worst-case optimal); below it a linear merge is cheaper.
GALLOP_RATIO = 16


@njit(cache=True, nogil=True)
def intersect_gallop(a, a_lo, a_hi, b, b_lo, b_hi, out, out_lo, store, work):
    """a[a_lo:a_hi] ∩ b[b_lo:b_hi], each value of a galloped for in b: for a much smaller than b."""
    k = out_lo
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
    return k - out_lo


@njit(cache=True, nogil=True)
def intersect_merge(a, a_lo, a_hi, b, b_lo, b_hi, out, out_lo, store, work):
    """a[a_lo:a_hi] ∩ b[b_lo:b_hi] by a linear merge: for lists of comparable size. It branches on
    each comparison; a branch-free variant measured the same (clique4, R-MAT 16, local-gj profile)."""
    k = out_lo
    i, j = a_lo, b_lo
    while i < a_hi and j < b_hi:
        x, y = a[i], b[j]
        if x < y:
            i += 1
        elif x > y:
            j += 1
        else:
            if store:
                out[k] = x
            k += 1
            i += 1
            j += 1
    work[1] += (i - a_lo) + (j - b_lo)
    return k - out_lo


@njit(cache=True, nogil=True)
def intersect(a, a_lo, a_hi, b, b_lo, b_hi, out, out_lo, store, work):
    """|a[a_lo:a_hi] ∩ b[b_lo:b_hi]| of two sorted duplicate-free ranges, by merge or by galloping
    the smaller through the larger (GALLOP_RATIO); with `store` the common values go to out[out_lo:],
    which may be a itself when out_lo <= a_lo (a write never passes a read). Only a is promised, so
    that a merge which writes before it compares stays allowed. An output position, not a slice,
    because a view per call costs reference counting in the hottest loop.
    Adds the elements stepped over to work[1]."""
    na, nb = a_hi - a_lo, b_hi - b_lo
    if na <= 0 or nb <= 0:
        return 0
    if na * GALLOP_RATIO < nb:
        return intersect_gallop(a, a_lo, a_hi, b, b_lo, b_hi, out, out_lo, store, work)
    if nb * GALLOP_RATIO < na:  # gallop writes only matches, so out may still be a
        return intersect_gallop(b, b_lo, b_hi, a, a_lo, a_hi, out, out_lo, store, work)
    return intersect_merge(a, a_lo, a_hi, b, b_lo, b_hi, out, out_lo, store, work)


@njit(cache=True, nogil=True)
def difference(a, a_lo, a_hi, b, b_lo, b_hi, out, out_lo, work):
    """|a[a_lo:a_hi] minus b[b_lo:b_hi]| of two sorted duplicate-free ranges (the anti-intersect): the
    values of a absent from b go to out[out_lo:], which may be a itself when out_lo <= a_lo. Each value
    of a is galloped for in b when a is much the smaller (GALLOP_RATIO), else the two are merged; a
    survivor is always written, so the cost is at least |a|. Adds the elements stepped over to work[1]."""
    k = out_lo
    j = b_lo
    gallop_b = (a_hi - a_lo) * GALLOP_RATIO < b_hi - b_lo
    for i in range(a_lo, a_hi):
        x = a[i]
        if gallop_b:
            j = gallop(b, j, b_hi, x)
        else:
            while j < b_hi and b[j] < x:
                j += 1
        if j >= b_hi or b[j] != x:
            out[k] = x
            k += 1
    work[1] += (a_hi - a_lo) + (0 if gallop_b else j - b_lo)
    return k - out_lo


def dense_vertices(src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(s, d, ids): the edges over vertices 0..n-1 and the id of each. Ids already in a small
    non-negative range are used as they are (unused numbers become isolated vertices, which cost a
    little memory and nothing else); others are renumbered in sorted order."""
    src, dst = src.astype(np.int64, copy=False), dst.astype(np.int64, copy=False)
    if len(src) == 0:
        return src, dst, np.zeros(0, np.int64)
    low, high = min(src.min(), dst.min()), max(src.max(), dst.max())
    if low >= 0 and high < 4 * len(src) + 1024:
        return src, dst, np.arange(high + 1, dtype=np.int64)
    ids, inverse = np.unique(np.concatenate([src, dst]), return_inverse=True)
    return inverse[: len(src)], inverse[len(src) :], ids


def vertex_ranks(ids: np.ndarray, degree: np.ndarray | None) -> np.ndarray:
    """Dense rank of each of the sorted `ids`: by (degree, id) when degrees are given (undirected
    symmetry breaking then sends each edge to its higher-degree end), else by id."""
    if degree is None:
        return np.arange(len(ids), dtype=np.int64)
    return _degree_ranks(degree.astype(np.int64, copy=False))


@njit(cache=True, nogil=True)
def _degree_ranks(degree):
    """Rank by (degree, position): a counting sort by degree, stable in position."""
    n = len(degree)
    top = 0
    for v in range(n):
        top = max(top, degree[v])
    start = np.zeros(top + 2, np.int64)
    for v in range(n):
        start[degree[v] + 1] += 1
    for d in range(top + 1):
        start[d + 1] += start[d]
    rank = np.empty(n, np.int64)
    for v in range(n):
        rank[v] = start[degree[v]]
        start[degree[v]] += 1
    return rank
