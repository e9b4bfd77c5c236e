"""A cluster's executors load the kernels the driver compiled: harness.spark.kernel_cache.seed copies them
where numba looks under the executors' NUMBA_CACHE_DIR, and a process using that directory loads
every one of them from there (numba's own cache hits), compiling none. Another checkout (a second
clone, the gate's baseline tree) loads the kernels of the modules it shares with this one from the
user's cache (harness.core.numba_cache), and compiles those that differ or call one that differs."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.core import numba_cache
from harness.spark import kernel_cache
from implementations.warm import warm_families

REPO = Path(__file__).resolve().parent.parent
LOADS = """
import json
from numba.core.registry import CPUDispatcher
from implementations import local_gj
from implementations.warm import warm_families
warm_families(["local-gj"])
kernels = [v for v in vars(local_gj).values() if isinstance(v, CPUDispatcher)]
print(json.dumps({"hits": sum(sum(k._cache_hits.values()) for k in kernels),
                  "misses": sum(sum(k._cache_misses.values()) for k in kernels)}))
"""


def test_an_executor_loads_what_the_driver_compiled(tmp_path):
    warm_families(["local-gj"])  # this process, the driver, has them compiled (or loaded) in its cache
    cache = tmp_path / "numba-cache"
    assert kernel_cache.seed(cache) > 0
    assert kernel_cache.seed(cache) == 0  # nothing newer the second time
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache), "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", LOADS], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    counted = json.loads(done.stdout.strip().splitlines()[-1])
    assert counted["hits"] > 0 and counted["misses"] == 0, counted


def _other_tree(tmp_path: Path, changed: str | None = None) -> Path:
    """A copy of the project elsewhere (another clone, the gate's baseline checkout), one module changed if named."""
    tree = tmp_path / "other"
    for package in ("harness", "implementations"):
        shutil.copytree(REPO / package, tree / package, ignore=shutil.ignore_patterns("__pycache__"))
    if changed:
        with open(tree / "implementations" / f"{changed}.py", "a") as module:
            module.write("# changed\n")
    return tree


def test_another_checkout_loads_the_kernels_this_one_compiled(tmp_path):
    """The cache is keyed by the kernels' source, not their path: a copy elsewhere, its files newer, compiles nothing."""
    warm_families(["local-gj"])
    tree = _other_tree(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, "-c", LOADS], cwd=tree, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    counted = json.loads(done.stdout.strip().splitlines()[-1])
    assert counted["hits"] > 0 and counted["misses"] == 0, counted


def test_a_module_whose_source_or_an_imported_module_changed_has_another_key(tmp_path):
    """A changed kernel compiles anew, and so does one that calls it from another module (numba keys a
    compilation on its own bytecode only): each module's key digests every project module it imports."""
    tree = _other_tree(tmp_path, changed="gj/extension_kernels")  # local_gj and the dataflow call its kernels

    def keys(top: Path) -> dict[str, str]:
        names = ("gj/csr", "gj/extension_kernels", "local_gj", "extension/dataflow_kernels")
        return {n: numba_cache.source_stamp(top / "implementations" / f"{n}.py") for n in names}

    here, there = keys(REPO), keys(tree)
    assert here["gj/csr"] == there["gj/csr"]
    assert all(here[n] != there[n] for n in ("gj/extension_kernels", "local_gj", "extension/dataflow_kernels"))


def test_an_import_inside_a_function_does_not_key_a_kernel(tmp_path):
    """implementations.base imports the registry (every implementation) inside a function, which binds no
    module global a kernel could call: a change to bigjoin.py leaves local-gj's key as it was."""
    assert "    from implementations import REGISTRY\n" in (REPO / "implementations" / "base.py").read_text()
    tree = _other_tree(tmp_path, changed="bigjoin")
    for name, same in (("local_gj", True), ("shares", True), ("bigjoin", False)):
        here = numba_cache.source_stamp(REPO / "implementations" / f"{name}.py")
        assert (here == numba_cache.source_stamp(tree / "implementations" / f"{name}.py")) is same, name


def test_the_cache_lives_under_the_user_s_cache_directory(monkeypatch, tmp_path):
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert numba_cache.root() == tmp_path / "subgraph-harness" / "kernels"
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "store"))  # a cluster's executors: the store
    assert numba_cache.root() == tmp_path / "store"


def test_a_cache_index_that_names_moved_code_is_told_from_other_errors():
    """numba pickles a kernel's signature types in its cache index; a type whose module has moved since
    (a refactor) fails to unpickle there, and the warm-up then drops the package's cached kernels and
    compiles anew (warm._from_numba_cache). Any other error is raised as it is."""
    from implementations import warm

    where = os.path.join("site-packages", "numba", "core", "caching.py")
    scope: dict = {}
    exec(compile("def _load_index():\n    import implementations.moved_away\n", where, "exec"), scope)
    with pytest.raises(ImportError) as stale:
        scope["_load_index"]()
    assert warm._from_numba_cache(stale.value)
    with pytest.raises(AttributeError) as fault:
        raise AttributeError("a plain fault in the warm-up")
    assert not warm._from_numba_cache(fault.value)


ORACLE_CACHE = """
import json
from numba.core.registry import CPUDispatcher
from harness.verify.oracles import native  # imports nothing else of the harness
print(json.dumps(sorted({k._cache._cache_path for k in vars(native).values() if isinstance(k, CPUDispatcher)})))
"""


def test_a_process_this_one_starts_caches_its_kernels_here_too():
    """An oracle's count runs in a spawned process that imports nothing of the harness: the locator's
    setting, exported by this process, still keeps its kernels in the machine's cache, so a second clone
    compiles the oracles no more than the implementations."""
    assert os.environ[numba_cache.LOCATOR_SETTING].startswith("harness.core.numba_cache.ContentCacheLocator,")
    done = subprocess.run([sys.executable, "-c", ORACLE_CACHE], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    folders = [Path(p) for p in json.loads(done.stdout.strip().splitlines()[-1])]
    assert folders and all(
        f.parent == numba_cache.root() and f.name.startswith("harness.verify.oracles.native-") for f in folders
    )
