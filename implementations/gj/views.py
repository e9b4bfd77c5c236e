"""Typed views the kernels hand each other. Imports nothing of the harness: a kernel's compiled code is
cached under a digest of its module and of every project module it imports (harness.core.numba_cache),
so a change elsewhere does not make the kernels compile again."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import numpy as np
from numba.core import types
from numba.core.imputils import impl_ret_borrowed
from numba.extending import intrinsic


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
