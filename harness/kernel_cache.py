"""The executors' compiled kernels, seeded from the driver's: on a cluster the executors cache numba's
compiled kernels in the store (NUMBA_CACHE_DIR), so one host's compilation serves every host; the
driver has usually compiled them already, so its cache files are copied there first and an executor
loads them instead of compiling the same kernels again. numba checks each file against its source
(path, modification time, size) and this CPU, so a host whose checkout or CPU differs compiles anew,
as it would without the seed."""

from __future__ import annotations

import ast
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


def share_with(other_tree: Path) -> int:
    """Seed another checkout's kernel cache (the gate's baseline commit, run beside this tree) with this
    tree's compiled kernels of the modules that are the same in both, along with every module of the
    package they import: numba keys a cache file on its own source's modification time and size, not
    on the kernels it calls, so a module that calls a changed one compiles anew. Each shared module's
    file in the other tree takes this tree's modification time, which numba checks. Returns the files copied."""
    from numba.core import config
    from numba.core.caching import UserProvidedCacheLocator

    from implementations.warm import compiled_kernels

    source, package_file = compiled_kernels()
    here, there = Path(package_file).parent, other_tree / Path(package_file).parent.name
    cache_dir = vars(config).get("CACHE_DIR", "")  # NUMBA_CACHE_DIR; set when numba loads, not in its stubs
    if cache_dir:  # numba's layout under a NUMBA_CACHE_DIR, else a __pycache__ beside the sources
        target = Path(cache_dir) / UserProvidedCacheLocator.get_suitable_cache_subpath(str(there / "x.py"))
    else:
        target = there / "__pycache__"
    if not source.is_dir() or not there.is_dir():
        return 0
    same = {p.stem for p in here.glob("*.py") if (there / p.name).is_file() and (there / p.name).read_bytes() == p.read_bytes()}
    imports = {stem: _package_imports(here / f"{stem}.py") for stem in same}
    shared = set(same)
    while stale := {stem for stem in shared if not imports[stem] <= shared}:
        shared -= stale
    target.mkdir(parents=True, exist_ok=True)
    copied = 0
    for stem in sorted(shared):
        mine = (here / f"{stem}.py").stat()
        os.utime(there / f"{stem}.py", ns=(mine.st_atime_ns, mine.st_mtime_ns))
        for path in sorted(source.glob(f"{stem}.*")):
            if path.suffix in KERNEL_SUFFIXES:
                _copy_atomically(path, target / path.name)
                copied += 1
    return copied


def _package_imports(path: Path) -> set[str]:
    """The package's modules `path` imports (relative imports: `from .csr import x`, `from . import csr`);
    `from . import name` of a non-module names the package itself (its __init__)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                found.add(node.module.split(".")[0])
            else:
                for alias in node.names:
                    is_module = (path.parent / f"{alias.name}.py").is_file()
                    found.add(alias.name if is_module else "__init__")
    return found
