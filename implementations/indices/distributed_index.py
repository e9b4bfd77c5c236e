"""The two physical indices of the edge relation, forward and reverse, hash-partitioned by key over
the W workers and built once per (graph, W): by one Spark job (`build`), or, when the edges are on the
driver anyway, by counting sorts there that write the same W partitions to the store (`build_on_driver`).

Vertices are relabelled to dense ranks first: by (degree, id) for undirected graphs, so that forward
lists (neighbours ranked above the key) stay short; by id for directed ones. Worker p holds, for each
key k with partition_of(k) = p, the sorted forward list and the sorted reverse list of k. Partitions
are files, checkpointed in the store (HARNESS_STORE) by the task that built them; each executor
memory-maps its own local copy, fetched from the store on a miss (harness.core.store), so any executor on
any host can serve any worker."""

from __future__ import annotations

import atexit
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
from numba import njit
from pyspark.sql import functions as F

from harness.core import store
from harness.core.errors import DataError
from implementations.gj import exchange
from implementations.gj.arrays import mapped, readonly
from implementations.gj.csr import build_narrow_csr, dense_vertices, vertex_ranks
from implementations.gj.exchange import BlobKind
from implementations.gj.extension_kernels import Changes, IndexPartition, Lists
from implementations.gj.keys import owner, partition_of

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


def max_over_mean(per_worker: np.ndarray) -> float | None:
    """How far the busiest worker is from the mean (1.0: balanced); None when there is nothing."""
    return round(float(per_worker.max() / per_worker.mean()), 4) if per_worker.sum() else None


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

    def bytes_per_worker(self) -> np.ndarray:
        """Each partition's files: keys (int32), two offsets per key (int64), its list entries (int32)."""
        return 4 * self.keys + 16 * self.keys + 4 * (self.forward + self.reverse)

    def partition_bytes(self) -> int:
        """The largest partition's files."""
        return int(self.bytes_per_worker().max(initial=0))

    def describe(self) -> dict:
        entries = self.forward + self.reverse
        return {
            "workers": self.workers,
            "vertices": self.vertices,
            "keys_per_worker": self.keys.tolist(),
            "entries_per_worker": entries.tolist(),
            "bytes_per_worker": self.bytes_per_worker().tolist(),
            "forward_entries": int(self.forward.sum()),
            "reverse_entries": int(self.reverse.sum()),
            "entries_max_over_mean": max_over_mean(entries),
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
            .mapInArrow(partition_builder(str(root), len(ids)), exchange.SCHEMA)
            .collect()
        )
    finally:
        ranking.destroy()
    sizes, loop_vertices = reported_partitions([row.payload for row in rows], workers)
    return _finished(root, workers, undirected, (ids, rank), per_worker(sizes), loop_vertices)


class PartitionSizes(NamedTuple):
    """What `partition_builder` reports of the partition it wrote: its blob's meta (the partition's
    self-loops are its array)."""

    keys: int
    forward: int  # forward-list entries
    reverse: int  # reverse-list entries


def reported_partitions(payloads: list, workers: int) -> tuple[list[PartitionSizes], np.ndarray]:
    """Each worker's PartitionSizes and the loop vertices, from the blobs of `partition_builder`."""
    sizes = [PartitionSizes(keys=0, forward=0, reverse=0)] * workers
    loops = []
    for payload in payloads:
        _, p, meta, arrays = exchange.unpack(payload)
        sizes[p] = PartitionSizes(*meta)
        loops.append(arrays[0])
    return sizes, (np.sort(np.concatenate(loops)) if loops else np.zeros(0, np.int32)).astype(np.int32)


def per_worker(sizes: list[PartitionSizes]) -> tuple[np.ndarray, ...]:
    """(keys, forward entries, reverse entries) of every worker, from what their builds reported."""
    return tuple(np.array([getattr(s, field) for s in sizes], np.int64) for field in PartitionSizes._fields)


def _finished(root: Path, workers: int, undirected: bool, ranking, sizes, loop_vertices: np.ndarray) -> PartitionedIndex:
    """The index record, once its partitions are in the store: `sizes` are the keys, forward and
    reverse entries of each worker; the loop vertices go to the store from the driver."""
    ids, rank = ranking
    store.save_to_store(str(root / "loops.npy"), loop_vertices)  # the driver writes to the store, not an executor's disk
    keys, forward, reverse = sizes
    return PartitionedIndex(
        root, workers, undirected, len(ids), ids[np.argsort(rank)], keys, forward, reverse, loop_vertices, ranking
    )


def build_on_driver(src: np.ndarray, dst: np.ndarray, undirected: bool, workers: int) -> PartitionedIndex:
    """The index `build` makes, from the edge arrays on the driver: the same ranks (by (degree, id)
    over the vertices that have an edge, undirected; by id, directed), the same W partitions, written
    to the store for the executors to map. Counting sorts, no comparison sort."""
    root = new_root("index")
    ids, rank, lo, hi = _ranked_edges(src, dst, undirected)
    keys, key_at, offsets, forward, reverse, split = _partition_lists(lo, hi, len(ids), workers)
    loop_vertices = np.unique(lo[lo == hi]).astype(np.int32)
    for p in range(workers):
        directory = os.path.join(root, f"p{p}")
        k0, k1 = key_at[p], key_at[p + 1]
        e0, e1 = split[p], split[p + 1]
        for name, array in (
            ("keys", keys[k0:k1]),
            ("offsets", offsets[:, k0 + p : k1 + p + 1]),
            ("forward", forward[e0[0] : e1[0]]),
            ("reverse", reverse[e0[1] : e1[1]]),
        ):
            store.save_to_store(os.path.join(directory, f"{name}.npy"), np.ascontiguousarray(array))
    entries = np.diff(split, axis=0)
    return _finished(root, workers, undirected, (ids, rank), (np.diff(key_at), entries[:, 0], entries[:, 1]), loop_vertices)


def build_locally(src: np.ndarray, dst: np.ndarray, undirected: bool, workers: int, tokens: np.ndarray) -> PartitionedIndex:
    """The index `build` makes, by `build`'s own two tasks (each entry routed to its key's owner, the
    owner's build of what it received) run in this process (`exchange.run_locally`), on the ranks
    `build_on_driver` gives: so the warm-up compiles what a Spark build calls, on the types it sees."""
    import pyarrow as pa

    root = new_root("index")
    ids, rank, _, _ = _ranked_edges(src, dst, undirected)
    ranking = _Broadcast((ids, rank))
    edges = pa.RecordBatch.from_pydict({"src": np.asarray(src, np.int64), "dst": np.asarray(dst, np.int64)})
    tasks = [_route_entries(ranking, workers, undirected, tokens), partition_builder(str(root), len(ids))]
    batches = exchange.run_locally(workers, tokens, tasks, inputs={0: [edges]})
    sizes, loop_vertices = reported_partitions([blob for batch in batches for blob in exchange.blobs_of(batch)], workers)
    return _finished(root, workers, undirected, (ids, rank), per_worker(sizes), loop_vertices)


class _Broadcast(NamedTuple):
    """What a task reads of a Spark broadcast (its value), for tasks run in this process."""

    value: tuple


def _ranked_edges(src: np.ndarray, dst: np.ndarray, undirected: bool):
    """(sorted ids of the vertices with an edge, rank of each, then every edge as (lo, hi) ranks:
    forward lo -> hi, reverse hi -> lo; undirected, lo is the lower rank)."""
    s, d, dense_ids = dense_vertices(src, dst)
    degree = np.bincount(s, minlength=len(dense_ids)) + np.bincount(d, minlength=len(dense_ids))
    present = np.flatnonzero(degree)
    if len(present) < len(dense_ids):  # dense_vertices may keep unused numbers: drop them, as Spark's build has none
        renumber = np.full(len(dense_ids), -1, dtype=np.int64)
        renumber[present] = np.arange(len(present))
        s, d, dense_ids, degree = renumber[s], renumber[d], dense_ids[present], degree[present]
    if len(dense_ids) >= 2**31 - 1:
        raise DataError(f"{len(dense_ids)} vertices: ranks must fit in 31 bits")
    rank = vertex_ranks(dense_ids, degree if undirected else None).astype(np.int32)
    lo, hi = rank[s], rank[d]
    if undirected:
        lo, hi = np.minimum(lo, hi), np.maximum(lo, hi)
    return dense_ids, rank, lo, hi


@njit(cache=True, nogil=True)
def _partition_lists(lo, hi, n, workers):
    """Every worker's keys and sorted forward (lo -> hi) and reverse (hi -> lo) lists, laid out back to
    back: keys[key_at[p]:key_at[p+1]] are worker p's, offsets[:, key_at[p] + p : key_at[p+1] + p + 1]
    its two offset rows (from its own first entry), split[p] where its forward and reverse entries start."""
    m = len(lo)
    fdeg = np.zeros(n, np.int64)
    rdeg = np.zeros(n, np.int64)
    for e in range(m):
        fdeg[lo[e]] += 1
        rdeg[hi[e]] += 1
    key_at = np.zeros(workers + 1, np.int64)
    split = np.zeros((workers + 1, 2), np.int64)
    part = np.empty(n, np.int64)
    for v in range(n):
        p = owner(v, workers)
        part[v] = p
        if fdeg[v] + rdeg[v] > 0:
            key_at[p + 1] += 1
            split[p + 1, 0] += fdeg[v]
            split[p + 1, 1] += rdeg[v]
    for p in range(workers):
        key_at[p + 1] += key_at[p]
        split[p + 1, 0] += split[p, 0]
        split[p + 1, 1] += split[p, 1]
    keys = np.empty(key_at[workers], np.int32)
    offsets = np.zeros((2, key_at[workers] + workers), np.int64)
    fstart = np.zeros(n, np.int64)  # where v's forward list starts in `forward`
    rstart = np.zeros(n, np.int64)
    slot = key_at[:-1].copy()
    ffill = split[:-1, 0].copy()
    rfill = split[:-1, 1].copy()
    for v in range(n):  # ascending, so each worker's keys come out sorted
        if fdeg[v] + rdeg[v] == 0:
            continue
        p = part[v]
        keys[slot[p]] = v
        fstart[v], rstart[v] = ffill[p], rfill[p]
        ffill[p] += fdeg[v]
        rfill[p] += rdeg[v]
        offsets[0, slot[p] + p + 1] = ffill[p] - split[p, 0]
        offsets[1, slot[p] + p + 1] = rfill[p] - split[p, 1]
        slot[p] += 1
    # Values in ascending order: walk the edges by hi for forward lists, by lo for reverse ones.
    forward = np.empty(m, np.int32)
    reverse = np.empty(m, np.int32)
    by_hi = _counting_order(hi, n)
    for t in range(m):
        e = by_hi[t]
        forward[fstart[lo[e]]] = hi[e]
        fstart[lo[e]] += 1
    by_lo = _counting_order(lo, n)
    for t in range(m):
        e = by_lo[t]
        reverse[rstart[hi[e]]] = lo[e]
        rstart[hi[e]] += 1
    return keys, key_at, offsets, forward, reverse, split


@njit(cache=True, nogil=True)
def _counting_order(values, n):
    """The positions of `values` (in [0, n)) in ascending, stable order."""
    start = np.zeros(n + 1, np.int64)
    for i in range(len(values)):
        start[values[i] + 1] += 1
    for v in range(n):
        start[v + 1] += start[v]
    order = np.empty(len(values), np.int64)
    for i in range(len(values)):
        order[start[values[i]]] = i
        start[values[i]] += 1
    return order


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
                yield from exchange.blob_batches(out_tokens, payloads)

    return route


def partition_builder(root: str, vertices: int):
    def build_one(iterator):
        p = exchange.current_partition()
        kinds = _entries_by_kind([arrays for _, _, arrays in exchange.received(iterator, p)])
        local = _keys_present(vertices, kinds[0].keys, kinds[1].keys)
        loops = np.unique(kinds[0].keys[kinds[0].keys == kinds[0].values]).astype(np.int32)
        slot = np.zeros(vertices, np.int32)
        slot[local] = np.arange(len(local), dtype=np.int32)
        directory = os.path.join(root, f"p{p}")
        store.save_array(os.path.join(directory, "keys.npy"), local)
        offsets, sizes = [], []
        for name in ("forward", "reverse"):
            entries = kinds.pop(0)  # built and gone before the next kind's build
            off, lists = build_narrow_csr(slot[entries.keys], entries.values, len(local), vertices)
            del entries
            store.save_array(os.path.join(directory, f"{name}.npy"), lists)
            offsets.append(off)
            sizes.append(len(lists))
        store.save_array(os.path.join(directory, "offsets.npy"), np.stack(offsets))
        reported = PartitionSizes(keys=len(local), forward=sizes[0], reverse=sizes[1])
        yield from exchange.blob_batches([-1], [exchange.pack(BlobKind.SIZES, p, [loops], reported)])

    return build_one


class _KindEntries(NamedTuple):
    keys: np.ndarray  # int32
    values: np.ndarray  # int32


def _entries_by_kind(parts: list) -> list[_KindEntries]:
    """The received (keys, values, kinds) parts as a forward and a reverse pair of int32 arrays, each
    filled in place, so a partition's entries are held at most twice (the parts, and these) and once
    when this returns: it empties `parts` (views of the received Arrow buffers)."""
    forward = [kinds == 0 for _, _, kinds in parts]
    out = []
    for masks in (forward, [~m for m in forward]):
        counts = [int(m.sum()) for m in masks]
        keys, values = np.empty(sum(counts), np.int32), np.empty(sum(counts), np.int32)
        at = 0
        for (k, v, _), m, n in zip(parts, masks, counts):
            keys[at : at + n], values[at : at + n] = k[m], v[m]
            at += n
        out.append(_KindEntries(keys, values))
    parts.clear()
    return out


def _keys_present(vertices: int, *keys: np.ndarray) -> np.ndarray:
    """The sorted distinct keys (int32), from a bitmap over the vertices: no sort of every entry."""
    present = np.zeros(vertices, bool)
    for k in keys:
        present[k] = True
    return np.flatnonzero(present).astype(np.int32)


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
            np.zeros(0, np.int32),  # slots
        )
    )
)


def load_partition(root: str, p: int) -> tuple[IndexPartition, np.ndarray]:
    """(ix, loop vertices) of worker p, memory-mapped once per Python worker process from this host's
    copy of the checkpoint: ix holds its lists and no changes (see extension_kernels)."""
    key = (root, p)
    if key not in _loaded:
        directory = os.path.join(root, f"p{p}")
        lists = Lists.of(*(mapped(os.path.join(directory, f"{name}.npy")) for name in LIST_FILES))
        _loaded[key] = (IndexPartition(lists, NO_CHANGES), mapped(os.path.join(root, "loops.npy")))
    return _loaded[key]
