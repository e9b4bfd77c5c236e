"""The executors' compiled kernels, seeded from the driver's: on a cluster the executors cache numba's
compiled kernels in the store (NUMBA_CACHE_DIR), so one host's compilation serves every host; the
driver has usually compiled them already, so its cache files are copied there first and an executor
loads them instead of compiling the same kernels again. numba checks each file against its source
(path, modification time, size) and this CPU, so a host whose checkout or CPU differs compiles anew,
as it would without the seed."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

KERNEL_SUFFIXES = (".nbi", ".nbc")  # numba's index of a function's compilations, and one compilation


def seed(target_root: Path) -> int:
    """Copy the driver's cached kernels of `implementations/` into `target_root` (a NUMBA_CACHE_DIR),
    where numba looks for that package's; the files it lacks or has older. Returns how many were copied."""
    from numba.core.caching import UserProvidedCacheLocator

    from implementations.warm import compiled_kernels

    source, package_file = compiled_kernels()  # the driver's, wherever numba keeps them
    target = target_root / UserProvidedCacheLocator.get_suitable_cache_subpath(package_file)
    if not source.is_dir() or source.resolve() == target.resolve():
        return 0
    target.mkdir(parents=True, exist_ok=True)
    copied = 0
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
