"""The canonical edge rows as numpy arrays, for the oracles that count in memory (native, GraphBLAS)."""

from __future__ import annotations

import numpy as np


def read(parquet_glob: str) -> tuple[np.ndarray, np.ndarray]:
    """(src, dst) int64 arrays of the Parquet files matching the glob."""
    import glob

    import pyarrow.parquet as pq

    files = sorted(glob.glob(parquet_glob))
    tables = [pq.read_table(f, columns=["src", "dst"]) for f in files]
    if not tables:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    src = np.concatenate([t.column("src").to_numpy().astype(np.int64, copy=False) for t in tables])
    dst = np.concatenate([t.column("dst").to_numpy().astype(np.int64, copy=False) for t in tables])
    return src, dst


def dense(src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """The same edges over vertices 0..n-1: ids used as they are when they already lie in a small
    non-negative range (isolated numbers cost a little memory, nothing else), else renumbered."""
    if len(src) == 0:
        return src, dst, 0
    low, high = min(src.min(), dst.min()), max(src.max(), dst.max())
    if low >= 0 and high < 4 * len(src) + 1024:
        return src, dst, int(high) + 1
    ids, inverse = np.unique(np.concatenate([src, dst]), return_inverse=True)
    return inverse[: len(src)], inverse[len(src) :], len(ids)
