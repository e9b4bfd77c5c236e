"""Sorted adjacency lists (CSR) and the two probes every Generic Join needs: lower bound and membership.
Shared by `local-gj` and by the partitioned indices of the BiGJoin family."""
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


def vertex_ranks(ids: np.ndarray, degree: np.ndarray | None) -> np.ndarray:
    """Dense rank of each of the sorted `ids`: by (degree, id) when degrees are given (undirected
    symmetry breaking then sends each edge to its higher-degree end), else by id."""
    if degree is None:
        return np.arange(len(ids), dtype=np.int64)
    rank = np.empty(len(ids), dtype=np.int64)
    rank[np.lexsort((ids, degree))] = np.arange(len(ids), dtype=np.int64)
    return rank
