"""The arrays the kernels read: read-only, and store files memory-mapped from this host's copy."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import numpy as np
from numba.core import types
from numba.core.imputils import impl_ret_borrowed
from numba.extending import intrinsic

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


def _typed_readonly(typingctx, a):
    if not isinstance(a, types.Array):
        return None
    result = a.copy(readonly=True)

    def codegen(context, builder, signature, args):
        return impl_ret_borrowed(context, builder, result, args[0])

    return result(a), codegen


# `a` typed read-only inside a kernel, at no cost (the same array). Handed so to a kernel compiled out
# of line, it makes one compilation of that kernel (and of all it calls) serve candidates read from the
# index (read-only) and from a scratch buffer alike: each was compiled twice before.
as_readonly: Callable[[np.ndarray], np.ndarray] = cast(Any, intrinsic(_typed_readonly))
