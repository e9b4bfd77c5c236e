"""The two physical indices of the edge relation, forward and reverse, hash-partitioned by key over
the W workers and built once per (graph, W) by one Spark job.

Vertices are relabelled to dense ranks first: by (degree, id) for undirected graphs, so that forward
lists (neighbours ranked above the key) stay short; by id for directed ones. Worker p holds, for each
key k with partition_of(k) = p, the sorted forward list and the sorted reverse list of k. Partitions
are files, checkpointed in the store (HARNESS_STORE) by the task that built them; each executor
memory-maps its own local copy, fetched from the store on a miss (harness.store), so any executor on
any host can serve any worker."""

from __future__ import annotations

import atexit
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pyspark.sql import functions as F

from harness import store
from harness.errors import DataError

from . import exchange
from .csr import build_csr, vertex_ranks
from .exchange import BlobKind
from .extension_kernels import Changes, IndexPartition, Lists
from .keys import partition_of

LIST_FILES = ("keys", "offsets", "forward", "reverse")  # a partition's files (.npy) under p{p}/
_created: list[Path] = []


def new_root(kind: str) -> Path:
    """A fresh directory in the store for one index's checkpoint, removed when the driver exits."""
    root = store.new_scratch(kind)
    register_for_cleanup(root)
    return root


def register_for_cleanup(path: Path) -> None:
    """Remove this store directory when the process exits."""
    _created.append(path)


@atexit.register
def _remove_created() -> None:
    for path in _created:
        shutil.rmtree(path, ignore_errors=True)


@dataclass
class PartitionedIndex:
    root: Path
    workers: int
    undirected: bool
    vertices: int
    ids: np.ndarray  # rank -> original vertex id
    keys: np.ndarray  # per worker: keys held
    forward: np.ndarray  # per worker: forward-list entries
    reverse: np.ndarray  # per worker: reverse-list entries
    loop_vertices: np.ndarray  # ranks with a self-loop
    ranking: tuple[np.ndarray, np.ndarray]  # (sorted vertex ids, rank of each): see to_ranks

    @property
    def loops(self) -> int:
        return len(self.loop_vertices)

    def describe(self) -> dict:
        entries = self.forward + self.reverse
        return {
            "workers": self.workers,
            "vertices": self.vertices,
            "keys_per_worker": self.keys.tolist(),
            "entries_per_worker": entries.tolist(),
            "forward_entries": int(self.forward.sum()),
            "reverse_entries": int(self.reverse.sum()),
            "entries_max_over_mean": round(float(entries.max() / entries.mean()), 4) if entries.sum() else None,
        }

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def build(spark, edges, undirected: bool, workers: int, extra_vertices=None) -> PartitionedIndex:
    """`extra_vertices` (a DataFrame of column v) get ranks too, though no edge touches them yet."""
    root = new_root("index")
    # 1. Dense ranks, broadcast to the tasks that route the edges.
    ids, rank = rank_vertices(edges, undirected, extra_vertices)
    rank = rank.astype(np.int32)
    ranking = spark.sparkContext.broadcast((ids, rank))
    # 2. One shuffle: each (key, value) entry goes to the owner of its key, which builds its CSR.
    tokens = exchange.routing_tokens(spark, workers)
    try:
        rows = (
            edges.mapInArrow(_route_entries(ranking, workers, undirected, tokens), exchange.SCHEMA)
            .repartition(workers, "token")
            .mapInArrow(_build_partition(str(root), len(ids)), exchange.SCHEMA)
            .collect()
        )
    finally:
        ranking.destroy()
    stats = np.zeros((workers, 3), dtype=np.int64)  # keys, forward entries, reverse entries
    loops = []
    for row in rows:
        _, p, meta, arrays = exchange.unpack(row.payload)
        stats[p] = meta
        loops.append(arrays[0])
    loop_vertices = (np.sort(np.concatenate(loops)) if loops else np.zeros(0, np.int32)).astype(np.int32)
    store.save_to_store(str(root / "loops.npy"), loop_vertices)  # the driver writes to the store, not an executor's disk
    return PartitionedIndex(
        root,
        workers,
        undirected,
        len(ids),
        ids[np.argsort(rank)],
        stats[:, 0],
        stats[:, 1],
        stats[:, 2],
        loop_vertices,
        (ids, rank),
    )


def to_ranks(ranking: tuple[np.ndarray, np.ndarray], ids: np.ndarray) -> np.ndarray:
    """Dense ranks (int32, as held) of original vertex ids, given (sorted vertex ids, rank of each)."""
    sorted_ids, rank_of = ranking
    return rank_of[np.searchsorted(sorted_ids, ids)]


def rank_vertices(edges, undirected: bool, extra_vertices=None) -> tuple[np.ndarray, np.ndarray]:
    """(sorted vertex ids, dense rank of each): by (degree, id) if undirected, else by id. Only the
    vertex table (one row per vertex) comes to the driver."""
    ends = edges.select(F.col("src").alias("v")).union(edges.select(F.col("dst").alias("v")))
    if extra_vertices is not None:
        ends = ends.select("v", F.lit(1).alias("n")).union(extra_vertices.select("v", F.lit(0).alias("n")))
        degrees = ends.groupBy("v").agg(F.sum("n").alias("count")).toArrow()
    else:
        degrees = ends.groupBy("v").count().toArrow()
    ids = degrees.column("v").to_numpy().astype(np.int64)
    order = np.argsort(ids)
    ids = ids[order]
    if len(ids) >= 2**31 - 1:
        raise DataError(f"{len(ids)} vertices: ranks must fit in 31 bits")
    return ids, vertex_ranks(ids, degrees.column("count").to_numpy()[order] if undirected else None)


def _route_entries(ranking, workers: int, undirected: bool, tokens: np.ndarray):
    def route(iterator):
        for batch in iterator:
            s = to_ranks(ranking.value, batch.column(0).to_numpy())
            d = to_ranks(ranking.value, batch.column(1).to_numpy())
            if undirected:  # rows are the simple graph: forward from the lower rank, reverse from the higher
                s, d = np.minimum(s, d), np.maximum(s, d)
            keys = np.concatenate([s, d]).astype(np.int32)
            values = np.concatenate([d, s]).astype(np.int32)
            kinds = np.repeat(np.array([0, 1], dtype=np.int8), len(s))
            out_tokens, payloads = exchange.route(
                BlobKind.EDGES, partition_of(keys, workers), [keys, values, kinds], tokens, workers
            )
            if payloads:
                yield exchange.blobs_batch(out_tokens, payloads)

    return route


def _build_partition(root: str, vertices: int):
    def build_one(iterator):
        p = exchange.current_partition()
        parts = [arrays for _, _, arrays in exchange.received(iterator, p)]
        keys, values, kinds = (
            np.concatenate([a[i] for a in parts]) if parts else np.zeros(0, dt)
            for i, dt in enumerate((np.int32, np.int32, np.int8))
        )
        local = np.unique(keys)
        slot = np.searchsorted(local, keys)
        offsets, lists = [], []
        for kind in (0, 1):
            sel = kinds == kind
            off, vals = build_csr(slot[sel], values[sel], len(local), vertices)
            offsets.append(off)
            lists.append(vals.astype(np.int32))
        directory = os.path.join(root, f"p{p}")
        store.save_array(os.path.join(directory, "keys.npy"), local.astype(np.int32))
        store.save_array(os.path.join(directory, "offsets.npy"), np.stack(offsets))
        store.save_array(os.path.join(directory, "forward.npy"), lists[0])
        store.save_array(os.path.join(directory, "reverse.npy"), lists[1])
        loops = np.unique(keys[(keys == values) & (kinds == 0)]).astype(np.int32)
        meta = (len(local), len(lists[0]), len(lists[1]))
        yield exchange.blobs_batch([-1], [exchange.pack(0, p, [loops], meta)])

    return build_one


def readonly(a: np.ndarray) -> np.ndarray:
    """Every array the kernels read is read-only, so numba compiles one version of each kernel for
    static and versioned indices alike (and the first count warms up what later batches use)."""
    a.setflags(write=False)
    return a


_loaded: dict[tuple[str, int], tuple[IndexPartition, np.ndarray]] = {}
NO_CHANGES = Changes(
    *(
        readonly(a)
        for a in (
            np.zeros(0, np.int32),
            np.zeros((4, 1), np.int64),
            np.zeros(0, np.int32),
            np.zeros(0, np.int32),
            np.zeros(0, np.int8),
            np.zeros(0, np.int8),
        )
    )
)


def load_partition(root: str, p: int) -> tuple[IndexPartition, np.ndarray]:
    """(ix, loop vertices) of worker p, memory-mapped once per Python worker process from this host's
    copy of the checkpoint: ix holds its lists and no changes (see extension_kernels)."""
    key = (root, p)
    if key not in _loaded:
        directory = os.path.join(root, f"p{p}")
        lists = Lists(*(mapped(os.path.join(directory, f"{name}.npy")) for name in LIST_FILES))
        _loaded[key] = (IndexPartition(lists, NO_CHANGES), mapped(os.path.join(root, "loops.npy")))
    return _loaded[key]


def mapped(stored: str) -> np.ndarray:
    """This host's copy of a store file, memory-mapped."""
    path = store.local_copy(stored)
    try:
        return np.asarray(np.load(path, mmap_mode="r"))  # a plain read-only view, which numba accepts
    except ValueError:  # numpy cannot map an empty array
        return readonly(np.load(path))
