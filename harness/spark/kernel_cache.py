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
    where numba looks for each folder's; the files it lacks or has older. Returns how many were copied."""
    from numba.core.caching import UserProvidedCacheLocator

    from implementations.warm import compiled_kernels

    copied = 0
    for folder, source in compiled_kernels().items():  # the driver's, wherever numba keeps them
        target = target_root / UserProvidedCacheLocator.get_suitable_cache_subpath(str(folder / "x.py"))
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


def share_with(other_tree: Path) -> int:
    """Seed another checkout's kernel cache (the gate's baseline commit, run beside this tree) with this
    tree's compiled kernels of the modules that are the same in both, along with every module of the
    package they import: numba keys a cache file on its own source's modification time and size, not
    on the kernels it calls, so a module that calls a changed one compiles anew. Each shared module's
    file in the other tree takes this tree's modification time, which numba checks. Returns the files copied."""
    from implementations.warm import compiled_kernels

    caches = compiled_kernels()
    if not caches:
        return 0
    package = _package_root(next(iter(caches)))
    here = {_module_name(path, package.parent): path for path in package.rglob("*.py")}
    there = {name: other_tree / path.relative_to(package.parent) for name, path in here.items()}
    same = {name for name, path in here.items() if there[name].is_file() and there[name].read_bytes() == path.read_bytes()}
    imports = {name: _package_imports(here[name], name, set(here)) for name in same}
    shared = set(same)
    while stale := {name for name in shared if not imports[name] <= shared}:
        shared -= stale
    copied = 0
    for name in sorted(shared):
        mine, source = here[name].stat(), caches.get(here[name].parent)
        os.utime(there[name], ns=(mine.st_atime_ns, mine.st_mtime_ns))
        if source is None or not source.is_dir():
            continue
        target = _cache_of(there[name].parent)
        target.mkdir(parents=True, exist_ok=True)
        for path in sorted(source.glob(f"{here[name].stem}.*")):
            if path.suffix in KERNEL_SUFFIXES:
                _copy_atomically(path, target / path.name)
                copied += 1
    return copied


def _cache_of(folder: Path) -> Path:
    """Where numba keeps the kernels of `folder`'s modules: under a NUMBA_CACHE_DIR, else a __pycache__ beside them."""
    from numba.core import config
    from numba.core.caching import UserProvidedCacheLocator

    cache_dir = vars(config).get("CACHE_DIR", "")  # NUMBA_CACHE_DIR; set when numba loads, not in its stubs
    if cache_dir:
        return Path(cache_dir) / UserProvidedCacheLocator.get_suitable_cache_subpath(str(folder / "x.py"))
    return folder / "__pycache__"


def _package_root(folder: Path) -> Path:
    """The top folder of the package that `folder` is in."""
    while (folder.parent / "__init__.py").is_file():
        folder = folder.parent
    return folder


def _module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package_imports(path: Path, name: str, modules: set[str]) -> set[str]:
    """The package's modules that the module `name` at `path` imports: `from a.b import c` names the
    module a.b.c where there is one, else a.b (its __init__ where a.b is a package)."""
    package = name.split(".")[0]
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name in modules}
        elif isinstance(node, ast.ImportFrom):
            base = name.split(".") if is_package else name.split(".")[:-1]
            if node.level:
                origin = ".".join(base[: len(base) - node.level + 1] + [node.module or ""]).strip(".")
            else:
                origin = node.module or ""
            if origin.split(".")[0] != package:
                continue
            for alias in node.names:
                found.add(f"{origin}.{alias.name}" if f"{origin}.{alias.name}" in modules else origin)
    return found & modules
