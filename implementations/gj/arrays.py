"""The arrays the kernels read: read-only, and store files memory-mapped from this host's copy."""

from __future__ import annotations

import numpy as np

from harness.core import store


def readonly(a: np.ndarray) -> np.ndarray:
    """Every array the kernels read is read-only, so numba compiles one version of each kernel for
    static and versioned indices alike (and the first count warms up what later batches use)."""
    a.setflags(write=False)
    return a


def mapped(stored: str, copy_on_write: bool = False) -> np.ndarray:
    """This host's copy of a store file, memory-mapped: read-only, or (copy_on_write) typed writable for
    kernels compiled for arrays built in memory, its pages still shared while nothing writes them."""
    path = store.local_copy(stored)
    try:
        return np.asarray(np.load(path, mmap_mode="c" if copy_on_write else "r"))  # a plain view, which numba accepts
    except ValueError:  # numpy cannot map an empty array
        return np.load(path) if copy_on_write else readonly(np.load(path))
