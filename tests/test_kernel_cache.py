"""A cluster's executors load the kernels the driver compiled: harness.kernel_cache.seed copies them
where numba looks under the executors' NUMBA_CACHE_DIR, and a process using that directory loads
every one of them from there (numba's own cache hits), compiling none."""

import json
import os
import subprocess
import sys
from pathlib import Path

from harness import kernel_cache
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
