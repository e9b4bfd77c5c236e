"""The executors' compiled kernels, seeded from the driver's: on a cluster the executors cache numba's
compiled kernels in the store (NUMBA_CACHE_DIR), so one host's compilation serves every host; the
driver has usually compiled them already (in the user's cache, harness.core.numba_cache), so its cache
files are copied there first and an executor loads them instead of compiling the same kernels again.
Each module's folder is named by its source's digest and numba checks each compilation against the
CPU, so a host whose code or CPU differs compiles anew, as it would without the seed."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

KERNEL_SUFFIXES = (".nbi", ".nbc")  # numba's index of a function's compilations, and one compilation


def seed(target_root: Path) -> int:
    """Copy the driver's cached kernels into `target_root` (a NUMBA_CACHE_DIR), each module's folder
    under its own name, as numba_cache.root() lays them out; the files it lacks or has older. Returns
    how many were copied."""
    from implementations.warm import compiled_kernels

    copied = 0
    for source in sorted(compiled_kernels()):  # the driver's, wherever numba keeps them
        target = target_root / source.name
        if not source.is_dir() or source.resolve() == target.resolve():
            continue
        target.mkdir(parents=True, exist_ok=True)
        for path in sorted(source.iterdir()):
            there = target / path.name
            if path.suffix in KERNEL_SUFFIXES and (not there.exists() or there.stat().st_mtime < path.stat().st_mtime):
                _copy_atomically(path, there)
                copied += 1
    return copied


def _copy_atomically(source: Path, target: Path) -> None:
    """An executor reading the cache meanwhile sees the old file or the whole new one, never a part."""
    handle, partial = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    os.close(handle)
    try:
        shutil.copy2(source, partial)
        os.replace(partial, target)
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise
