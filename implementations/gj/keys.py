"""Which worker owns a key, how an edge becomes one sortable int64, and how a batch of codes is found in
a sorted array: one definition of each, for the numba kernels and the driver alike."""

from __future__ import annotations

import numpy as np
from numba import njit

from implementations.gj.csr import locate_sorted


@njit(cache=True)
def owner(k, workers):
    """The worker that owns key k (a vertex rank) in every partitioned index: a multiplicative hash."""
    h = (np.uint64(k) * np.uint64(2654435761)) & np.uint64(0xFFFFFFFF)
    return np.int64((h * np.uint64(workers)) >> np.uint64(32))


@njit(cache=True)
def _owners(keys, workers):
    out = np.empty(len(keys), dtype=np.int64)
    for i in range(len(keys)):
        out[i] = owner(keys[i], workers)
    return out


def partition_of(keys: np.ndarray, workers: int) -> np.ndarray:
    """owner() of each key."""
    return _owners(np.ascontiguousarray(keys), workers)


def edge_code(src, dst) -> np.ndarray:
    """(src, dst) as src << 32 | dst: sorts like the pair, and unpacks with >> 32 and & 0xFFFFFFFF."""
    return (np.asarray(src, np.int64) << 32) | np.asarray(dst, np.int64)


def find_sorted(sorted_codes: np.ndarray, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(position, found) of each code (cast to sorted_codes' dtype) in an ascending array, position its
    lower bound: in one galloping pass (csr.locate_sorted) over the codes in ascending order (sorted
    first if they are not: a random binary search per code into a large array cost more than the sort)."""
    codes = codes.astype(sorted_codes.dtype, copy=False)
    if len(codes) < 2 or not (codes[1:] < codes[:-1]).any():
        return locate_sorted(sorted_codes, codes)
    order = np.argsort(codes, kind="stable")
    at, found = locate_sorted(sorted_codes, codes[order])
    out_at, out_found = np.empty_like(at), np.empty_like(found)
    out_at[order], out_found[order] = at, found
    return out_at, out_found
