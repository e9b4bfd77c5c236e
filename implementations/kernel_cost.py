"""BiGJoin's three dataflow kernels timed in this process: how a kernel change moves Count, Propose and
Intersect, without Spark's fixed cost.

    python -m implementations.kernel_cost EDGES.parquet [--query clique4] [--repeats 2]

EDGES.parquet is a canonical graph (src, dst), e.g. `$HARNESS_STORE/graphs/<key>/edges.parquet` once a
bench has cached it. Builds BiGJoin's index for W = 2 on the driver, runs the whole query in process
(`BiGJoin.in_process(...).extend`, both workers' tasks in series) `repeats` times, and prints the count
and the seconds spent in `count_rows`, `propose_local` and `intersect_rows`."""

from __future__ import annotations

import argparse
import time

from harness.core.query import BUILTINS, make_join_spec
from implementations.bigjoin import BiGJoin
from implementations.extension import dataflow
from implementations.gj.budget import Budget
from implementations.indices import distributed_index
from implementations.overlay_cost import warm_edges

KERNELS = ("count_rows", "propose_local", "intersect_rows")


def _timed(name: str, spent: dict[str, float]) -> None:
    """Wrap dataflow's reference to kernel `name` so each call adds its seconds to spent[name]."""
    kernel = getattr(dataflow, name)

    def call(*args):
        started = time.perf_counter()
        try:
            return kernel(*args)
        finally:
            spent[name] = spent.get(name, 0.0) + time.perf_counter() - started

    setattr(dataflow, name, call)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("edges")
    parser.add_argument("--query", default="clique4")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    src, dst = warm_edges(args.edges)
    spent: dict[str, float] = {}
    for name in KERNELS:
        _timed(name, spent)
    index = distributed_index.build_on_driver(src, dst, True, 2)
    spec = make_join_spec(BUILTINS[args.query], "undirected")
    try:
        for _ in range(args.repeats):
            spent.clear()
            budget = Budget(1 << 30, None, len(spec.attribute_order), "kernel_cost")
            count, _counters, _ = BiGJoin.in_process(spec, 2, index, budget).extend(10)
            print(count, ", ".join(f"{name} {spent.get(name, 0.0):.3f} s" for name in KERNELS), flush=True)
    finally:
        index.close()


if __name__ == "__main__":
    main()
