"""The arrays the kernels read: read-only, and store files memory-mapped from this host's copy."""

from __future__ import annotations

import numpy as np

from harness.core import store


def readonly(a: np.ndarray) -> np.ndarray:
    """Every array the kernels read is read-only, so numba compiles one version of each kernel for
    static and versioned indices alike (and the first count warms up what later batches use)."""
    a.setflags(write=False)
    return a


def mapped(stored: str) -> np.ndarray:
    """This host's copy of a store file, memory-mapped."""
    path = store.local_copy(stored)
    try:
        return np.asarray(np.load(path, mmap_mode="r"))  # a plain read-only view, which numba accepts
    except ValueError:  # numpy cannot map an empty array
        return readonly(np.load(path))
