"""Where numba keeps the project's compiled kernels: a folder per module and version of its source under
the user's cache directory, so a machine compiles a kernel once, whatever checkout or path it is in.

numba's own locators key a cache file on its source file's path and modification time, so every fresh
clone compiled every kernel again (minutes). This one keys it on content: the module's source and that
of every project module it imports at module level, transitively (a kernel inlines or calls theirs; an
import inside a function binds nothing a kernel sees), so a changed kernel, or one whose callee changed,
still compiles anew. numba adds the CPU (its index keys each compilation on
the target machine) and its own and Python's versions. The root is NUMBA_CACHE_DIR where set (a cluster's
executors share one in the store), else $XDG_CACHE_HOME or ~/.cache, then subgraph-harness/kernels.

Importing it installs the locator (`install`): the project's packages import it before their kernels.
Self-contained (the standard library and numba): the gate loads it by file into an older checkout's runs
(`LOCATOR_SETTING`), so both sides of a paired gate share one cache."""

from __future__ import annotations

import ast
import functools
import hashlib
import os
from pathlib import Path

from numba.core.caching import CacheImpl, _CacheLocator

PACKAGES = ("harness", "implementations")  # the project's top packages, whose modules key a kernel
LOCATOR_SETTING = "NUMBA_CACHE_LOCATOR_CLASSES"  # numba's own: the locators it tries, by import path


def root() -> Path:
    """The cache's top folder (created on first use)."""
    explicit = os.environ.get("NUMBA_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "subgraph-harness" / "kernels"


def project_root(source: Path) -> Path | None:
    """The folder that holds the project's top package `source` is in, or None outside the project."""
    folder = source.resolve().parent
    while (folder / "__init__.py").is_file():
        if folder.name in PACKAGES and not (folder.parent / "__init__.py").is_file():
            return folder.parent
        folder = folder.parent
    return None


def module_name(path: Path, top: Path) -> str:
    parts = path.relative_to(top).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def _modules(top: Path) -> dict[str, Path]:
    """Every module of the project's packages under `top`, by name."""
    return {module_name(p, top): p for package in PACKAGES for p in sorted((top / package).rglob("*.py"))}


def _module_level(tree: ast.Module):
    """The nodes of the statements a module runs as it is imported: not the bodies of its functions
    (nor of its classes' methods), whose imports bind no module global, so no kernel can call what
    they import (a kernel's callees and constants are module globals, and nopython code imports nothing)."""
    todo: list[ast.AST] = [tree]
    while todo:
        node = todo.pop()
        yield node
        todo += [c for c in ast.iter_child_nodes(node) if not isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))]


@functools.cache
def imports(path: Path, top: Path) -> frozenset[str]:
    """The project's modules that the module at `path` imports as it is imported (`_module_level`):
    `from a.b import c` names the module a.b.c where there is one, else a.b (its __init__ where a.b is
    a package). The registry that implementations.base imports inside a function is not one of
    local-gj's, so a change to any implementation does not recompile local-gj's kernels."""
    modules = _modules(top)
    name = module_name(path, top)
    base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()
    for node in _module_level(ast.parse(path.read_bytes())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            origin = (
                ".".join(base[: len(base) - node.level + 1] + [node.module or ""]).strip(".") if node.level else node.module or ""
            )
            found |= {f"{origin}.{a.name}" if f"{origin}.{a.name}" in modules else origin for a in node.names}
    return frozenset(found & set(modules))


@functools.cache
def source_stamp(path: Path) -> str:
    """A digest of the module at `path` and of every project module it imports, transitively."""
    top = project_root(path)
    if top is None:
        raise ValueError(f"{path} is not in the project's packages {PACKAGES}")
    modules = _modules(top)
    seen, todo = {module_name(path.resolve(), top)}, [path.resolve()]
    while todo:
        for name in imports(todo.pop(), top) - seen:
            seen.add(name)
            todo.append(modules[name])
    digest = hashlib.sha256()
    for name in sorted(seen):
        digest.update(name.encode() + b"\0" + modules[name].read_bytes() + b"\0")
    return digest.hexdigest()


class ContentCacheLocator(_CacheLocator):
    """numba's locator for the project's kernels: `root()/<module>-<source stamp>`."""

    def __init__(self, py_func, py_file: str):
        self._lineno = py_func.__code__.co_firstlineno
        self._stamp = source_stamp(Path(py_file).resolve())
        self._cache_path = str(root() / f"{py_func.__module__}-{self._stamp[:20]}")

    def get_cache_path(self) -> str:
        return self._cache_path

    def get_source_stamp(self) -> str:
        return self._stamp

    def get_disambiguator(self) -> str:
        return str(self._lineno)

    @classmethod
    def from_function(cls, py_func, py_file: str):
        if project_root(Path(py_file)) is None:
            return None  # not the project's: numba's own locators
        locator = cls(py_func, py_file)
        try:
            locator.ensure_cache_path()
        except OSError:
            return None  # an unwritable cache: numba's own locators decide
        return locator


def install() -> None:
    """Make numba look here first for every kernel decorated from now on (before the project's kernel
    modules are imported: their decorators pick the locator)."""
    if ContentCacheLocator not in CacheImpl._locator_classes:
        CacheImpl._locator_classes.insert(0, ContentCacheLocator)
    # The Python processes this one starts (an oracle's spawned count, which imports nothing of the
    # harness) cache their kernels here too, not beside the sources of each checkout.
    os.environ.setdefault(LOCATOR_SETTING, locator_setting(__name__))


def locator_setting(module: str | None = None) -> str:
    """NUMBA_CACHE_LOCATOR_CLASSES: this locator, imported from `module`, first, then numba's own. By
    default from `_SHIM`, for a process of another checkout that cannot import this module under its own
    name (the gate's baseline tree)."""
    names = [c.__name__ for c in CacheImpl._locator_classes if c is not ContentCacheLocator]
    return ",".join([f"{module or _SHIM}.ContentCacheLocator", *(f"numba.core.caching.{n}" for n in names)])


_SHIM = "harness_numba_cache"  # this file's name where `place_shim` copies it


def place_shim(tree: Path) -> None:
    """This module as a top-level one (`_SHIM`) at the root of another checkout, where its driver and its
    Python workers (whose PYTHONPATH Spark sets to the checkout) import it for `locator_setting`."""
    (tree / f"{_SHIM}.py").write_bytes(Path(__file__).read_bytes())


install()
