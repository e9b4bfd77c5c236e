"""Delta-BiGJoin's multi-version index (§3.3, §4.3): BiGJoin's key-partitioned forward/reverse lists,
updated in place batch by batch, with an old and a new view of the batch being applied.

Under the index root, worker p keeps (b: the last compaction, k: the last batch applied; 0 = initial):
  base b      p{p}/ (b = 0, the BiGJoin layout) or base-{b}/p{p}/: keys, offsets, forward, reverse
  overlay-{k}/p{p}/  the changes to every list since compaction b, as sorted values with a sign
                     (+1 added, -1 removed): offsets rows 0, 1 up to batch k, rows 2, 3 before it
  edges-{b}/p{p}.npy, changed-{k}/p{p}.npz  the directed pairs with an endpoint owned by p, as sorted
                     rank codes (src << 32 | dst): a compacted base plus the pairs changed since, with
                     presence (a pair is kept by the owners of both its endpoints)
  seeds-{k}/p{p}.npy batch k's net changes of the relation keyed at p (rows: key, value, diff, kind)
A relation entry's key is owned by an endpoint of its pair, so each owner derives the changes of its own
lists from its copy of the edge set, with no exchange. A batch is applied in the first stage of the
Spark job that runs its delta queries: the driver hands every update to the owners of both endpoints
(with that worker's first task); each applies them in order with set semantics, derives its lists' net
changes, writes overlay k (first folding overlay k - 1 into a new base if asked to compact) and the
seeds, and starts the delta queries in the same task. The work of a batch is proportional to its
changes and the overlay, not to the graph; compaction, every so often, is proportional to the partition.
The counters of a pair are kept by its home: the owner of src (directed) or of the lower rank
(undirected, where the relation is the simple graph of the directed set)."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import numpy as np
from numba import njit

from harness.core import store
from implementations.gj import exchange
from implementations.gj.arrays import mapped, readonly
from implementations.gj.csr import lower_bound
from implementations.gj.exchange import BlobKind
from implementations.gj.extension_kernels import Changes, IndexPartition, Lists
from implementations.gj.keys import edge_code, find_sorted, partition_of
from implementations.indices import distributed_index
from implementations.indices.distributed_index import LIST_FILES, NO_CHANGES, max_over_mean

LOW32 = np.int64(0xFFFFFFFF)
# Per-worker counters of one batch (of the pairs homed there).
UPDATE_FIELDS = (
    "updates",
    "pairs_touched",
    "inserts_ignored",
    "deletes_ignored",
    "edges_inserted",
    "edges_deleted",
    "relation_inserted",
    "relation_deleted",
    "update_us",  # the worker's whole index update, compaction included
    "compaction_us",  # of which folding the overlay and the changed pairs into new bases
)
INDEX_FIELDS = ("keys", "base_entries", "overlay_keys", "overlay_entries", "compacted", "bytes")


def base_dir(root: str, b: int) -> str:
    return root if b == 0 else os.path.join(root, f"base-{b}")


def _save(directory: str, **arrays) -> None:
    """Checkpointed in the store, and kept as this host's local copy (harness.core.store)."""
    for name, a in arrays.items():
        store.save_array(os.path.join(directory, f"{name}.npy"), a)


OVERLAY_FILES = LIST_FILES + ("fsign", "rsign")  # an overlay's lists: a base's plus the changes' signs


def _load_lists(directory: str, names=LIST_FILES) -> tuple:
    return tuple(mapped(os.path.join(directory, f"{n}.npy")) for n in names)


def _overlay(root: str, k: int, p: int) -> Changes:
    """Overlay k of worker p: the changes to its lists since their base (offsets (4, keys + 1))."""
    if k == 0:
        return NO_CHANGES
    return Changes.of(*_load_lists(os.path.join(root, f"overlay-{k}", f"p{p}"), OVERLAY_FILES))


_views: dict[tuple[str, int], tuple] = {}
NO_LOOPS = readonly(np.zeros(0, np.int32))


def load_view(root: str, p: int, b: int, k: int) -> tuple[IndexPartition, np.ndarray]:
    """(ix, loop vertices) of worker p over base b and overlay k; self-loop queries are not
    maintained, so the loop vertices are empty. One view per worker is cached per process."""
    cached = _views.get((root, p))
    if cached is None or cached[0] != (b, k):
        ix = IndexPartition(Lists.of(*_load_lists(os.path.join(base_dir(root, b), f"p{p}"))), _overlay(root, k, p))
        _views[(root, p)] = cached = ((b, k), (ix, NO_LOOPS))
    return cached[1]


_degrees: dict[tuple[str, int], tuple[np.ndarray, np.ndarray]] = {}


def base_degrees(root: str, b: int, workers: int) -> tuple[np.ndarray, np.ndarray]:
    """(forward, reverse) list sizes of every key in base b, from every worker's partition in the
    store (keys and offsets only): what Delta-BiGJoin's seeds estimate their counts from. Once per
    process and base."""
    cached = _degrees.get((root, b))
    if cached is None:
        parts = [_load_lists(os.path.join(base_dir(root, b), f"p{q}"), ("keys", "offsets")) for q in range(workers)]
        n = max((int(keys[-1]) + 1 for keys, _ in parts if len(keys)), default=0)
        forward, reverse = np.zeros(n, np.int64), np.zeros(n, np.int64)
        for keys, offsets in parts:
            forward[keys], reverse[keys] = np.diff(offsets[0]), np.diff(offsets[1])
        _degrees.clear()  # one base at a time
        _degrees[(root, b)] = cached = (readonly(forward), readonly(reverse))
    return cached


@dataclass
class VersionedIndex:
    """The driver's handle: where the files are, which versions are current, and their sizes."""

    root: Path
    workers: int
    undirected: bool
    vertices: int
    ids: np.ndarray  # rank -> original vertex id
    ranking: tuple[np.ndarray, np.ndarray]  # (sorted vertex ids, rank of each), on the driver
    base: int = 0  # batch of the last compaction
    version: int = 0  # batches applied
    compactions: int = 0
    sizes: np.ndarray = field(default_factory=lambda: np.zeros((0, len(INDEX_FIELDS)), np.int64))  # per worker

    def rank(self, ids: np.ndarray) -> np.ndarray:
        return distributed_index.to_ranks(self.ranking, ids)

    @property
    def view(self) -> tuple[int, int]:
        return self.base, self.version

    def describe(self) -> dict:
        s = self.sizes
        entries = s[:, 1] + s[:, 3] if len(s) else np.zeros(0)
        return {
            "workers": self.workers,
            "vertices": self.vertices,
            "batches_applied": self.version,
            "compactions": self.compactions,
            "base_entries": int(s[:, 1].sum()) if len(s) else 0,
            "overlay_keys": int(s[:, 2].sum()) if len(s) else 0,
            "overlay_entries": int(s[:, 3].sum()) if len(s) else 0,
            "entries_per_worker": entries.tolist(),
            "entries_max_over_mean": max_over_mean(entries),
            "bytes_per_worker": self.bytes_per_worker().tolist(),
            "bytes_on_disk": int(s[:, 5].sum()) if len(s) else 0,
        }

    def bytes_per_worker(self) -> np.ndarray:
        """Each worker's lists in memory: keys with their offsets, base and overlay entries."""
        s = self.sizes
        return 20 * (s[:, 0] + s[:, 2]) + 4 * s[:, 1] + 5 * s[:, 3] if len(s) else np.zeros(0, np.int64)

    def partition_bytes(self) -> int:
        """The largest worker's lists in memory."""
        return int(self.bytes_per_worker().max(initial=0))

    def overlay_share(self) -> float:
        s = self.sizes
        return float(s[:, 3].sum() / max(1, s[:, 1].sum())) if len(s) else 0.0


def _worker_bytes(root: str, p: int, b: int, k: int) -> int:
    """Bytes of worker p's files: base b, overlay k and its copy of the edge set."""
    paths = [os.path.join(base_dir(root, b), f"p{p}", f"{n}.npy") for n in LIST_FILES]
    paths.append(os.path.join(root, f"edges-{b}", f"p{p}.npy"))
    if k > 0:  # version 0 has no overlay and no changed pairs
        paths += [os.path.join(root, f"overlay-{k}", f"p{p}", f"{n}.npy") for n in OVERLAY_FILES]
        paths.append(os.path.join(root, f"changed-{k}", f"p{p}.npz"))
    return sum(os.path.getsize(f) for f in paths)  # the store's copies: every host sees them


def _pair_owners(s: np.ndarray, d: np.ndarray, workers: int) -> tuple[np.ndarray, np.ndarray]:
    """(owner, row): every pair once per distinct owner of its two endpoints."""
    first, second = partition_of(s, workers), partition_of(d, workers)
    other = np.flatnonzero(first != second)
    return np.concatenate([first, second[other]]), np.concatenate([np.arange(len(s)), other])


def build(spark, directed_edges, relation, undirected: bool, workers: int, extra_vertices) -> VersionedIndex:
    """Base 0 is BiGJoin's index of `relation` (ranks also cover `extra_vertices`, which only the
    updates mention); a second job gives each worker the directed pairs with an endpoint it owns."""
    index = distributed_index.build(spark, relation, undirected, workers, extra_vertices)
    tokens = exchange.routing_tokens(spark, workers)
    ranking = spark.sparkContext.broadcast(index.ranking)
    try:
        rows = (
            directed_edges.mapInArrow(_route_pairs(ranking, workers, tokens), exchange.SCHEMA)
            .repartition(workers, "token")
            .mapInArrow(_home_pairs(str(index.root)), exchange.SCHEMA)
            .collect()
        )
    finally:
        ranking.destroy()
    return _finished(index, undirected, len(rows))


def build_locally(src: np.ndarray, dst: np.ndarray, undirected: bool, workers: int, tokens: np.ndarray) -> VersionedIndex:
    """`build` of the directed edges (src, dst) in this process: the base from the driver's index
    build, the pairs homed by `build`'s tasks (`exchange.run_locally`). For the warm-up and tests;
    every vertex an update names must have an edge here (no extra vertices)."""
    import pyarrow as pa

    s, d = src, dst
    if undirected:  # the relation is the simple graph of the directed edges
        keep = src != dst
        s, d = np.unique(np.stack([np.minimum(src, dst)[keep], np.maximum(src, dst)[keep]]), axis=1)
    index = distributed_index.build_on_driver(s, d, undirected, workers)
    edges = pa.RecordBatch.from_arrays([pa.array(src, pa.int64()), pa.array(dst, pa.int64())], names=["src", "dst"])
    holder = SimpleNamespace(value=index.ranking)  # what a broadcast gives a task
    batches = exchange.run_locally(
        workers, tokens, [_route_pairs(holder, workers, tokens), _home_pairs(str(index.root))], {0: [edges]}
    )
    return _finished(index, undirected, len(batches))


def _finished(index: distributed_index.PartitionedIndex, undirected: bool, reported: int) -> VersionedIndex:
    """The driver's handle on base 0, once `reported` workers have homed their pairs."""
    workers, root = index.workers, str(index.root)
    if reported != workers:
        raise RuntimeError(f"homing the edge set reported {reported} of {workers} workers")
    sizes = np.zeros((workers, len(INDEX_FIELDS)), np.int64)
    sizes[:, 0], sizes[:, 1] = index.keys, index.forward + index.reverse
    sizes[:, 5] = [_worker_bytes(root, p, 0, 0) for p in range(workers)]
    return VersionedIndex(index.root, workers, undirected, index.vertices, index.ids, index.ranking, sizes=sizes)


def _route_pairs(ranking, workers: int, tokens: np.ndarray):
    """(src, dst) rows in original ids -> rank pairs at the owners of their endpoints."""

    def route(iterator):
        for batch in iterator:
            s = distributed_index.to_ranks(ranking.value, batch.column(0).to_numpy())
            d = distributed_index.to_ranks(ranking.value, batch.column(1).to_numpy())
            owners, rows = _pair_owners(s, d, workers)
            out_tokens, payloads = exchange.route(
                BlobKind.HOMED, owners, [s[rows].astype(np.int32), d[rows].astype(np.int32)], tokens, workers
            )
            if payloads:
                yield from exchange.blob_batches(out_tokens, payloads)

    return route


def _home_pairs(root: str):
    def home(iterator):
        p = exchange.current_partition()
        parts = [arrays for _, _, arrays in exchange.received(iterator, p)]
        codes = np.unique(np.concatenate([edge_code(a[0], a[1]) for a in parts])) if parts else np.zeros(0, np.int64)
        _save(os.path.join(root, "edges-0"), **{f"p{p}": codes})
        yield from exchange.blob_batches([-1], [exchange.pack(BlobKind.HOMED, p, [np.array([len(codes)], np.int64)])])

    return home


# ------------------------------------------------------------------ applying one batch


@dataclass
class BatchUpdate:
    """One batch's index update, run at the start of the Spark job that runs the batch's delta
    queries: `prelude` (on a start task's input and worker) applies the batch at that worker and
    returns its reports. The index's view moves to the batch at once; `finish` reads the reports and
    drops stale files."""

    index: VersionedIndex
    version: int
    old_base: int
    compact: bool
    prelude: Callable[[Iterator, int], list[exchange.Blob]]

    def finish(self, reports: list[tuple[int, int, np.ndarray]]) -> np.ndarray:
        """Per-worker UPDATE_FIELDS counters, from the (kind, worker, counters) reports."""
        index, root, workers = self.index, str(self.index.root), self.index.workers
        counters = np.zeros((workers, len(UPDATE_FIELDS)), np.int64)
        sizes = np.zeros((workers, len(INDEX_FIELDS)), np.int64)
        for kind, p, values in reports:
            (counters if kind == BlobKind.UPDATE_STATS else sizes)[p] = values
        if len(reports) != 2 * workers:
            raise RuntimeError(f"batch {self.version}: {len(reports)} reports from {workers} workers")
        if self.compact:
            old = base_dir(root, self.old_base)
            for p in range(workers):
                shutil.rmtree(os.path.join(old, f"p{p}"), ignore_errors=True)
            if self.old_base:
                shutil.rmtree(old, ignore_errors=True)
            shutil.rmtree(os.path.join(root, f"edges-{self.old_base}"), ignore_errors=True)
            index.compactions += 1
        for stale in (f"overlay-{self.version - 1}", f"changed-{self.version - 1}", f"seeds-{self.version - 1}"):
            shutil.rmtree(os.path.join(root, stale), ignore_errors=True)
        index.sizes = sizes
        return counters


def begin_batch(index: VersionedIndex, updates, compact: bool) -> BatchUpdate:
    """Plan batch index.version + 1 of updates (a pyarrow Table src, dst, diff, seq held by the
    driver): the driver hands every update to the owners of both its endpoints."""
    root, workers, k, b = str(index.root), index.workers, index.version + 1, index.base
    s, d = index.rank(updates.column("src").to_numpy()), index.rank(updates.column("dst").to_numpy())
    owners, rows = _pair_owners(s, d, workers)
    columns = [
        s.astype(np.int32),
        d.astype(np.int32),
        updates.column("diff").to_numpy().astype(np.int8),
        updates.column("seq").to_numpy().astype(np.int64),
    ]
    homed = exchange.split(BlobKind.OPS, owners, [c[rows] for c in columns], workers)
    index.version, index.base = k, (k if compact else b)
    return BatchUpdate(index, k, b, compact, _apply_batch(root, workers, index.undirected, k, b, compact, homed))


def seeds_dir(root, k: int) -> str:
    return os.path.join(str(root), f"seeds-{k}")


class EdgeSet:
    """The directed pairs homed at one worker: a sorted base plus changed pairs with their presence."""

    def __init__(self, root: str, p: int, k: int, b: int):
        self.base = mapped(os.path.join(root, f"edges-{b}", f"p{p}.npy"))
        if k > 1:  # every batch leaves its changed pairs (none after a compaction)
            with np.load(store.local_copy(os.path.join(root, f"changed-{k - 1}", f"p{p}.npz"))) as z:
                self.codes, self.present = z["codes"], z["present"]
        else:
            self.codes, self.present = np.zeros(0, np.int64), np.zeros(0, np.bool_)

    def contains(self, codes: np.ndarray) -> np.ndarray:
        i, changed = find_sorted(self.codes, codes)
        out = find_sorted(self.base, codes)[1]
        out[changed] = self.present[i[changed]]
        return out

    def updated(self, codes: np.ndarray, present: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The changed pairs after setting `codes` (sorted, unique) to `present`."""
        return _overridden(self.codes, self.present, codes, present)

    def compacted(self, codes: np.ndarray, present: np.ndarray) -> np.ndarray:
        """The base with the changed pairs (sorted, unique) folded in: one linear merge."""
        merged, kept = _overridden(np.asarray(self.base), np.ones(len(self.base), np.bool_), codes, present)
        return merged[kept]


def _apply_batch(root: str, workers: int, undirected: bool, k: int, b: int, compact: bool, homed: dict[int, exchange.Blob]):
    """At worker p: apply the updates it was handed (set semantics, in order) to its copy of the edge
    set, then the net changes of the lists it owns to its overlay; returns its reports as blobs."""

    def apply(iterator, p: int) -> list[exchange.Blob]:
        for _ in iterator:
            pass
        started = time.perf_counter()
        keys, values, kinds, diffs, counters = _apply_updates(root, workers, undirected, k, b, compact, p, homed.get(p))
        reports, compaction_us = _apply_changes(root, k, b, compact, p, keys, values, kinds, diffs)
        counters[UPDATE_FIELDS.index("compaction_us")] += compaction_us
        counters[UPDATE_FIELDS.index("update_us")] = int((time.perf_counter() - started) * 1e6)
        return reports + [exchange.pack(BlobKind.UPDATE_STATS, p, [counters])]

    return apply


def _apply_updates(root: str, workers: int, undirected: bool, k: int, b: int, compact: bool, p: int, blob: exchange.Blob | None):
    """(keys, values, kinds, diffs, counters): the net changes of the relation entries keyed at p, and
    the UPDATE_FIELDS counters of the pairs homed at p."""
    arrays: list[np.ndarray] = (
        exchange.unpack(blob).arrays if blob is not None else [np.zeros(0, dt) for dt in (np.int32, np.int32, np.int8, np.int64)]
    )
    s, d, diff, seq = arrays
    codes = edge_code(s, d)
    order = np.lexsort((seq, codes))
    codes, insert = codes[order], diff[order] > 0
    first = np.r_[True, codes[1:] != codes[:-1]] if len(codes) else np.zeros(0, np.bool_)
    last = np.r_[first[1:], True] if len(codes) else first
    edges = EdgeSet(root, p, k, b)
    touched = codes[last]
    before, after = edges.contains(touched), insert[last]
    # Each update sees the state its predecessor on the same pair left (or the state before the batch).
    state = np.empty(len(codes), np.bool_)
    state[1:] = insert[:-1]
    state[first] = before
    ts, td = touched >> 32, touched & LOW32
    mine = partition_of(np.minimum(ts, td) if undirected else ts, workers) == p  # pairs homed here
    mine_rows = np.repeat(mine, np.diff(np.r_[np.flatnonzero(first), len(codes)])) if len(codes) else first
    counters = np.zeros(len(UPDATE_FIELDS), np.int64)
    counters[:6] = (
        mine_rows.sum(),
        mine.sum(),
        (insert & state & mine_rows).sum(),
        (~insert & ~state & mine_rows).sum(),
        (after & ~before & mine).sum(),
        (~after & before & mine).sum(),
    )
    changed_codes, changed_present = edges.updated(touched, after)
    if compact:  # fold every change into a new base
        started = time.perf_counter()
        base = edges.compacted(changed_codes, changed_present)
        _save(os.path.join(root, f"edges-{k}"), **{f"p{p}": base})
        changed_codes, changed_present = changed_codes[:0], changed_present[:0]
        counters[UPDATE_FIELDS.index("compaction_us")] = int((time.perf_counter() - started) * 1e6)
    store.save_array(os.path.join(root, f"changed-{k}", f"p{p}.npz"), None, codes=changed_codes, present=changed_present)
    # The relation's net changes: the directed pairs themselves, or the simple graph's edges.
    if undirected:
        lo, hi = np.minimum(ts, td), np.maximum(ts, td)
        pairs = np.unique(edge_code(lo, hi)[ts != td])
        a, c = pairs >> 32, pairs & LOW32
        fwd, rev = edge_code(a, c), edge_code(c, a)
        was = _lookup_state(touched, before, fwd, edges) | _lookup_state(touched, before, rev, edges)
        now = _lookup_state(touched, after, fwd, edges) | _lookup_state(touched, after, rev, edges)
    else:
        a, c, was, now = ts, td, before, after
    delta = now.astype(np.int8) - was.astype(np.int8)
    moved = delta != 0
    a, c, delta = a[moved].astype(np.int32), c[moved].astype(np.int32), delta[moved]
    owner_a, owner_c = partition_of(a, workers) == p, partition_of(c, workers) == p
    counters[6:8] = (delta[owner_a] > 0).sum(), (delta[owner_a] < 0).sum()
    # Forward entries (a -> c) at a's owner, reverse entries (c -> a) at c's owner.
    keys = np.concatenate([a[owner_a], c[owner_c]])
    values = np.concatenate([c[owner_a], a[owner_c]])
    kinds = np.concatenate([np.zeros(owner_a.sum(), np.int8), np.ones(owner_c.sum(), np.int8)])
    diffs = np.concatenate([delta[owner_a], delta[owner_c]])
    return keys, values, kinds, diffs, counters


def _lookup_state(touched: np.ndarray, state: np.ndarray, codes: np.ndarray, edges: EdgeSet) -> np.ndarray:
    """Presence of `codes`: their state in this batch if touched, else as before the batch."""
    i, found = find_sorted(touched, codes)
    out = edges.contains(codes)
    out[found] = state[i[found]]
    return out


def _apply_changes(
    root: str, k: int, b: int, compact: bool, p: int, keys, values, kinds, diffs
) -> tuple[list[exchange.Blob], int]:
    """Overlay k of worker p (after folding overlay k - 1 into base k if asked) and the seeds, from
    the net changes of its lists; returns its INDEX_STATS report and the compaction's microseconds."""
    base = Lists.of(*_load_lists(os.path.join(base_dir(root, b), f"p{p}")))
    previous = _overlay(root, k - 1, p)
    started = time.perf_counter()
    base_values = (base.forward, base.reverse)  # by row: 0 forward, 1 reverse
    previous_values, previous_signs = (previous.forward, previous.reverse), (previous.forward_sign, previous.reverse_sign)
    if compact:
        all_keys = np.union1d(base.keys, previous.keys).astype(np.int32)
        lists = [
            _merged(
                all_keys,
                base.keys,
                base.offsets[row],
                base_values[row],
                previous.keys,
                previous.offsets[row],
                previous_values[row],
                previous_signs[row],
            )
            for row in (0, 1)
        ]
        offsets = np.stack([_offsets(counts) for counts, _ in lists])
        base = Lists.of(all_keys, offsets, lists[0][1], lists[1][1])
        _save(os.path.join(base_dir(root, k), f"p{p}"), keys=all_keys, offsets=offsets, forward=lists[0][1], reverse=lists[1][1])
        previous = NO_CHANGES
    compaction_us = int((time.perf_counter() - started) * 1e6) if compact else 0
    # The delta queries start here: every change with its key local (key, value, diff, 0 forward | 1 reverse).
    _save(os.path.join(root, f"seeds-{k}"), **{f"p{p}": np.stack([keys, values, diffs.astype(np.int32), kinds.astype(np.int32)])})
    okeys = np.union1d(previous.keys, keys).astype(np.int32)
    rows_new, rows_old, vals, signs = [], [], [], []
    for row in (0, 1):
        counts, before, before_sign = _gather_changes(
            okeys, previous.keys, previous.offsets[row], previous_values[row], previous_signs[row]
        )
        sel = kinds == row
        previous_codes = (np.repeat(np.arange(len(okeys), dtype=np.int64), counts) << 32) | before.astype(np.int64)
        batch_codes = (np.searchsorted(okeys, keys[sel]).astype(np.int64) << 32) | values[sel].astype(np.int64)
        order = np.argsort(batch_codes, kind="stable")  # the batch alone is sorted; the history is already
        net_codes, net = _summed(previous_codes, before_sign, batch_codes[order], diffs[sel][order])
        if (np.abs(net) > 1).any():
            raise RuntimeError(f"batch {k}: inconsistent changes at worker {p}")
        kept = net != 0
        after = (net_codes[kept] & LOW32).astype(np.int32)
        rows_new.append(_offsets(np.bincount((net_codes[kept] >> 32).astype(np.int64), minlength=len(okeys))))
        rows_old.append(_offsets(counts) + len(after))
        vals.append(np.concatenate([after, before]))
        signs.append(np.concatenate([net[kept], before_sign]))
    _save(
        os.path.join(root, f"overlay-{k}", f"p{p}"),
        keys=okeys,
        offsets=np.stack(rows_new + rows_old),
        forward=vals[0],
        reverse=vals[1],
        fsign=signs[0],
        rsign=signs[1],
    )
    sizes = np.array(
        [
            len(base.keys),
            len(base.forward) + len(base.reverse),
            len(okeys),
            int(rows_new[0][-1] + rows_new[1][-1]),
            int(compact),
            _worker_bytes(root, p, k if compact else b, k),
        ],
        np.int64,
    )
    return [exchange.pack(BlobKind.INDEX_STATS, p, [sizes])], compaction_us


@njit(cache=True)
def _overridden(codes, flags, new_codes, new_flags):
    """(codes, flags) of two sorted unique code sets merged, the new flag kept where both have a code."""
    n, m = len(codes), len(new_codes)
    out, out_flags = np.empty(n + m, np.int64), np.empty(n + m, np.bool_)
    i = w = 0
    for j in range(m):
        c = new_codes[j]
        while i < n and codes[i] < c:
            out[w], out_flags[w] = codes[i], flags[i]
            i, w = i + 1, w + 1
        if i < n and codes[i] == c:
            i += 1
        out[w], out_flags[w] = c, new_flags[j]
        w += 1
    for t in range(i, n):
        out[w], out_flags[w] = codes[t], flags[t]
        w += 1
    return out[:w], out_flags[:w]


@njit(cache=True)
def _summed(codes, signs, new_codes, new_signs):
    """(codes, net sign) of two sorted signed code lists merged, the signs of equal codes summed (the
    new list may repeat a code); codes whose signs cancel are kept with 0."""
    n, m = len(codes), len(new_codes)
    out, net = np.empty(n + m, np.int64), np.empty(n + m, np.int8)
    i = j = w = 0
    while i < n or j < m:
        c = codes[i] if j >= m or (i < n and codes[i] <= new_codes[j]) else new_codes[j]
        total = 0
        while i < n and codes[i] == c:
            total += signs[i]
            i += 1
        while j < m and new_codes[j] == c:
            total += new_signs[j]
            j += 1
        out[w], net[w] = c, total
        w += 1
    return out[:w], net[:w]


def _offsets(counts: np.ndarray) -> np.ndarray:
    out = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=out[1:])
    return out


@njit(cache=True)
def _gather_changes(keys, okeys, off, vals, sign):
    """(counts, values, signs) of each of `keys`' changes in one overlay row (none if absent)."""
    n = len(keys)
    at = np.full(n, -1, np.int64)
    counts = np.zeros(n, np.int64)
    for i in range(n):
        s = lower_bound(okeys, 0, len(okeys), keys[i])
        if s < len(okeys) and okeys[s] == keys[i]:
            at[i], counts[i] = s, off[s + 1] - off[s]
    out = np.empty(counts.sum(), np.int32)
    out_sign = np.empty(counts.sum(), np.int8)
    w = 0
    for i in range(n):
        if at[i] >= 0:
            for t in range(off[at[i]], off[at[i] + 1]):
                out[w], out_sign[w] = vals[t], sign[t]
                w += 1
    return counts, out, out_sign


@njit(cache=True)
def _merged(keys, bkeys, boff, bvals, okeys, ooff, ovals, osign):
    """(counts, values): each key's base list with its changes applied (a compaction)."""
    n = len(keys)
    counts = np.zeros(n, np.int64)
    total = 0
    for i in range(n):
        s = lower_bound(bkeys, 0, len(bkeys), keys[i])
        if s < len(bkeys) and bkeys[s] == keys[i]:
            total += boff[s + 1] - boff[s]
        s = lower_bound(okeys, 0, len(okeys), keys[i])
        if s < len(okeys) and okeys[s] == keys[i]:
            total += ooff[s + 1] - ooff[s]
    out = np.empty(total, np.int32)
    w = 0
    for i in range(n):
        a = be = 0
        s = lower_bound(bkeys, 0, len(bkeys), keys[i])
        if s < len(bkeys) and bkeys[s] == keys[i]:
            a, be = boff[s], boff[s + 1]
        c = ce = 0
        s = lower_bound(okeys, 0, len(okeys), keys[i])
        if s < len(okeys) and okeys[s] == keys[i]:
            c, ce = ooff[s], ooff[s + 1]
        start = w
        while a < be or c < ce:
            if c < ce and (a >= be or ovals[c] <= bvals[a]):
                if osign[c] < 0:
                    if a < be and bvals[a] == ovals[c]:
                        a += 1
                else:
                    out[w] = ovals[c]
                    w += 1
                c += 1
            else:
                out[w] = bvals[a]
                w += 1
                a += 1
        counts[i] = w - start
    return counts, out[:w]
