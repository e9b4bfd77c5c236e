"""A cluster's executors load the kernels the driver compiled: harness.spark.kernel_cache.seed copies them
where numba looks under the executors' NUMBA_CACHE_DIR, and a process using that directory loads
every one of them from there (numba's own cache hits), compiling none. The gate's baseline checkout
loads those of the modules it shares with this tree (share_with), and compiles those that differ or
call one that differs."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

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
    """A copy of the package elsewhere (as the gate's baseline checkout is), one module changed if named."""
    tree = tmp_path / "other"
    shutil.copytree(REPO / "implementations", tree / "implementations", ignore=shutil.ignore_patterns("__pycache__"))
    if changed:
        with open(tree / "implementations" / f"{changed}.py", "a") as module:
            module.write("# changed\n")
    return tree


def test_another_checkout_loads_the_kernels_of_the_modules_it_shares(tmp_path):
    warm_families(["local-gj"])
    tree = _other_tree(tmp_path)
    assert kernel_cache.share_with(tree) > 0
    env = {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{REPO}"}
    done = subprocess.run([sys.executable, "-c", LOADS], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    counted = json.loads(done.stdout.strip().splitlines()[-1])
    assert counted["hits"] > 0 and counted["misses"] == 0, counted


def test_a_module_that_imports_a_changed_one_is_not_shared(tmp_path, monkeypatch):
    from numba.core import config

    monkeypatch.setattr(config, "CACHE_DIR", "")  # the other tree's cache beside its sources, as in CI
    warm_families(["local-gj", "dataflow"])
    tree = _other_tree(tmp_path, changed="gj/extension_kernels")  # local_gj and the dataflow call its kernels
    kernel_cache.share_with(tree)
    cached = {p.name.split(".")[0] for p in (tree / "implementations").rglob("__pycache__/*.nbi")}
    assert "csr" in cached and not cached & {"extension_kernels", "local_gj", "dataflow_kernels"}, cached


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
