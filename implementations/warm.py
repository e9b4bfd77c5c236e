"""Every kernel compiled (or loaded from numba's cache) before anything is timed, with the argument
types timed runs use. Run in the Python worker daemon before it forks a worker (`harness.spark_daemon`,
so every worker, even one started after a cancelled task, is born warm) and on the driver at session
start (`harness.spark`).

BiGJoin's kernels are warmed by running BiGJoin itself: a real index of a small graph, built on the
driver path and memory-mapped from the store as the executors map it, and a few queries through the
real dataflow, its stages called in this process (`prefix_extension.run_locally`) on blobs that
travel as Arrow record batches, as they do between Spark tasks. So the warm-up's types are the
run's types by construction, not by a list kept in step with the code."""

from __future__ import annotations

import contextlib
import shutil
import sys

import numpy as np

from harness.query import BUILTINS, make_join_spec

from . import distributed_index
from .local_gj import warm_up as warm_local_gj

# A graph with every shape the kernels meet: a 5-clique (all levels non-empty), a hub, a self-loop.
_EDGES = (
    [(i, j) for i in range(5) for j in range(i + 1, 5)]
    + [(0, v) for v in range(5, 40)]
    + [(v, v + 1) for v in range(5, 39)]
    + [(7, 7)]
)
# (query, semantics, W, pinned B'): both semantics, one and several workers, windows cut by bytes and by B'.
_RUNS = (("clique4", "undirected", 2, None), ("triangle", "directed", 3, 2), ("clique5", "undirected", 1, None))


_dispatchers: dict[str, list] = {}  # per module of the project's, found once it is imported


def signatures() -> int:
    """Kernel signatures this process has compiled or loaded so far, over the project's numba
    kernels: a timed stage that sees this grow paid for a compilation (`kernels_compiled`)."""
    from numba.core.registry import CPUDispatcher

    for name, module in list(sys.modules.items()):
        if name.startswith("implementations.") and module is not None and name not in _dispatchers:
            _dispatchers[name] = [v for v in vars(module).values() if isinstance(v, CPUDispatcher)]
    return sum(len(d.signatures) for found in _dispatchers.values() for d in found)


def warm_up() -> None:
    """Compile or load every kernel, with nothing written to stdout (the daemon's port goes there)."""
    with contextlib.redirect_stdout(sys.stderr):
        warm_local_gj()
        warm_dataflow()


def warm_dataflow() -> None:
    from . import REGISTRY
    from .bigjoin import BiGJoin
    from .budget import Budget

    src = np.array([s for s, _ in _EDGES], dtype=np.int64)
    dst = np.array([d for _, d in _EDGES], dtype=np.int64)
    indices = {}
    try:
        for query, semantics, workers, batch in _RUNS:
            for name in ("bigjoin", "bigjoin-carry"):
                key = (semantics, workers)
                if key not in indices:
                    indices[key] = distributed_index.build_on_driver(src, dst, semantics == "undirected", workers)
                spec = make_join_spec(BUILTINS[query], semantics)
                m = len(spec.attribute_order)
                # A pinned B', or a byte budget small enough to cut windows (the hub's lists).
                budget = Budget(None, batch, m, "warm-up") if batch is not None else Budget(256, None, m, "warm-up")
                impl = REGISTRY[name]
                assert issubclass(impl, BiGJoin)
                count, _, _ = impl.in_process(spec, workers, indices[key], budget).extend(5)
                if count <= 0:
                    raise RuntimeError(f"warm-up: {name} found no {query} in a graph with a 5-clique")
    finally:
        for index in indices.values():
            shutil.rmtree(index.root, ignore_errors=True)
