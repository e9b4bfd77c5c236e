"""Delta-BiGJoin without Spark: update batches and the overlay path's cost, in this process.

    python -m implementations.overlay_cost EDGES.parquet [--query triangle] [--sizes 10000,10000,100000]

EDGES.parquet is a canonical graph (src, dst), e.g. `$HARNESS_STORE/graphs/<key>/edges.parquet` of
rmat-18 once a bench has cached it. Loads 90% of the edges (seed 1), applies batches of the given sizes
(80% insertions of held-back edges, 20% deletions of loaded ones) through `DeltaBiGJoin.in_process`,
both workers' tasks one after the other (the work of a batch without Spark's fixed cost), printing
each batch's index update and compaction time (slowest worker) and the overlay's size, then counts
the whole query through the versioned index twice, over base ⊕ overlay and after compacting it, and
prints the kernel time per proposal of each (the overlay path against the plain path)."""

from __future__ import annotations

import argparse
import shutil
import time

import numpy as np
import pyarrow.parquet as pq

from harness.core.query import BUILTINS, make_join_spec
from implementations import warm
from implementations.delta_bigjoin import DeltaBiGJoin
from implementations.gj import exchange
from implementations.indices import versioned_index
from implementations.warm import update_batch


def warm_edges(path: str) -> tuple[np.ndarray, np.ndarray]:
    """A canonical graph's (src, dst) as int64, the kernels compiled first so that nothing timed compiles."""
    table = pq.read_table(path)
    src, dst = (table.column(c).to_numpy().astype(np.int64) for c in ("src", "dst"))
    warm.warm_up()
    return src, dst


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("edges")
    parser.add_argument("--query", default="triangle")
    parser.add_argument("--sizes", default="10000,10000,100000")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    src, dst = warm_edges(args.edges)
    rng = np.random.default_rng(1)
    held = rng.random(len(src)) < 0.1
    index = versioned_index.build_locally(src[~held], dst[~held], True, args.workers, exchange.local_tokens(args.workers))
    delta = DeltaBiGJoin.in_process(make_join_spec(BUILTINS[args.query], "undirected"), args.workers, index)
    waiting, loaded = list(np.flatnonzero(held)), np.flatnonzero(~held)
    try:
        for size in (int(n) for n in args.sizes.split(",")):
            inserted = np.array(waiting[: size * 4 // 5], np.int64)
            waiting = waiting[len(inserted) :]
            deleted = rng.choice(loaded, size - len(inserted), replace=False)
            started = time.perf_counter()
            out = delta.apply_updates(update_batch(src, dst, inserted, deleted))
            seconds = time.perf_counter() - started
            applied, entries = out.applied, delta.index.describe()["overlay_entries"]
            print(
                f"batch {size}: {seconds:.3f} s, delta {out.delta}, proposals {out.counters['proposals']}, "
                f"update {applied['update_s']:.4f} s, compaction {applied['compaction_s']:.4f} s, overlay entries {entries}"
            )
        _full_count(delta, "overlay")
        delta.compact_ratio = -1.0  # the next (empty) batch folds the overlay into the base
        delta.apply_updates(update_batch(src, dst, np.zeros(0, np.int64), np.zeros(0, np.int64)))
        _full_count(delta, "compacted")
    finally:
        shutil.rmtree(index.root, ignore_errors=True)


def _full_count(delta: DeltaBiGJoin, label: str) -> None:
    started = time.perf_counter()
    count, counters, _ = delta.extend(0)
    kernel, proposals = counters.totals["kernel_us"] / 1e6, counters.totals["proposals"]
    entries = delta.index.describe()["overlay_entries"]
    print(
        f"{label}: count {count} in {time.perf_counter() - started:.2f} s, kernel {kernel:.3f} s, "
        f"{proposals} proposals, {kernel * 1e9 / max(1, proposals):.1f} ns per proposal, overlay entries {entries}"
    )


if __name__ == "__main__":
    main()
