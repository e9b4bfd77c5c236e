"""filter_candidates (numba) against cb1aefa's numpy filter, clique4-like level 3: above every earlier value."""
import time
import numpy as np
from implementations.extension_kernels import filter_candidates

rng = np.random.default_rng(1)
prefixes, per = 2_000_000, 12
m, j = 4, 3
prefix = np.sort(rng.integers(0, 60000, size=(prefixes, j)), axis=1).astype(np.int32)
item = np.repeat(np.arange(prefixes), per).astype(np.int64)
value = rng.integers(0, 65536, size=len(item)).astype(np.int32)
above = np.tril(np.ones((m, m), np.bool_), -1)
below = np.zeros((m, m), np.bool_)
differ = np.zeros((m, m), np.bool_)
loops = np.zeros(0, np.int32)

def old():
    keep = np.ones(len(value), dtype=bool)
    for q in range(j):
        if above[j, q]:
            keep &= value > prefix[item, q]
        if below[j, q]:
            keep &= value < prefix[item, q]
        if differ[j, q]:
            keep &= value != prefix[item, q]
    return keep

def new():
    return filter_candidates(j, prefix, item, value, above, below, differ, False, loops)

assert (old() == new()).all()
for name, f in (("numpy (cb1aefa)", old), ("filter_candidates", new)):
    best = min((lambda t: (f(), time.perf_counter() - t)[1])(time.perf_counter()) for _ in range(5))
    print(f"{name}: {best * 1e3:.1f} ms for {len(value):,} candidates")
