"""BiGJoin-S's skew-resilient indices (§3.4.1), derived from the key-partitioned index by one Spark
job. No worker holds a whole adjacency list:

- count index C(k): the forward and reverse list sizes of key k, at the owner of hash(k);
- extension-resolver index (k, kind, i) -> the i-th value of k's list, at the owner of hash(k, i);
- membership index: every edge row (src, dst), at the owner of hash(src, dst).

Each worker's partition is sorted 64-bit codes with a value column, probed by binary search."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, NamedTuple

import numpy as np

from harness.core import store
from implementations.gj import exchange
from implementations.gj.arrays import mapped
from implementations.gj.exchange import BlobKind
from implementations.gj.keys import edge_code, find_sorted
from implementations.indices import distributed_index
from implementations.indices.distributed_index import PartitionedIndex, max_over_mean

_MIX1, _MIX2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def pair_owner(a: np.ndarray, b: np.ndarray, workers: int) -> np.ndarray:
    """The worker owning the pair (a, b): a splitmix64 hash of both, scaled to [0, workers)."""
    with np.errstate(over="ignore"):
        z = (a.astype(np.uint64) << np.uint64(32)) | b.astype(np.uint64)
        z = (z ^ (z >> np.uint64(30))) * _MIX1
        z = (z ^ (z >> np.uint64(27))) * _MIX2
        z ^= z >> np.uint64(31)
    return (((z >> np.uint64(32)) * np.uint64(workers)) >> np.uint64(32)).astype(np.int64)


def resolver_code(key: np.ndarray, kind: np.ndarray, position: np.ndarray) -> np.ndarray:
    """(key, kind 0 forward / 1 reverse, position) as one sortable int64."""
    return (key.astype(np.int64) << 32) | (kind.astype(np.int64) << 31) | position.astype(np.int64)


def resolver_owner(codes: np.ndarray, workers: int) -> np.ndarray:
    """The owner of each resolver code: hash(key, position), the kind bit left out."""
    return pair_owner(codes >> 32, codes & 0x7FFFFFFF, workers)


def edge_owner(codes: np.ndarray, workers: int) -> np.ndarray:
    return pair_owner(codes >> 32, codes & 0xFFFFFFFF, workers)


@dataclass
class BalancedIndex:
    root: Path
    workers: int
    vertices: int
    ids: np.ndarray  # rank -> original vertex id
    count_keys: np.ndarray  # per worker
    resolver_entries: np.ndarray  # per worker
    membership_entries: np.ndarray  # per worker

    def sizes(self) -> np.ndarray:
        """Index entries per worker: a count row is one entry, as is a resolver or membership row."""
        return self.count_keys + self.resolver_entries + self.membership_entries

    def describe(self) -> dict:
        sizes = self.sizes()
        return {
            "workers": self.workers,
            "vertices": self.vertices,
            "count_keys_per_worker": self.count_keys.tolist(),
            "resolver_entries_per_worker": self.resolver_entries.tolist(),
            "membership_entries_per_worker": self.membership_entries.tolist(),
            "entries_per_worker": sizes.tolist(),
            # count rows: key and two sizes (int32); resolver rows: int64 code, int32 value; edges: int64
            "bytes_per_worker": (12 * self.count_keys + 12 * self.resolver_entries + 8 * self.membership_entries).tolist(),
            "entries_max_over_mean": max_over_mean(sizes),
            "resolver_max_over_mean": max_over_mean(self.resolver_entries),
            "membership_max_over_mean": max_over_mean(self.membership_entries),
        }


def build(spark, source: PartitionedIndex) -> BalancedIndex:
    """Scatter each worker's key-partitioned lists: counts stay with the key's owner, list entries go
    to the owner of (key, position), edge rows to the owner of (src, dst)."""
    root = _new_root(source)
    w = source.workers
    tokens = exchange.routing_tokens(spark, w)
    rows = (
        spark.range(0, w, 1, w)
        .mapInArrow(_scatter(str(source.root), str(root), w, tokens), exchange.SCHEMA)
        .repartition(w, "token")
        .mapInArrow(_gather(str(root)), exchange.SCHEMA)
        .collect()
    )
    return _finished(source, root, [row.payload for row in rows])


def build_locally(source: PartitionedIndex, tokens: np.ndarray) -> BalancedIndex:
    """`build`'s tasks run in this process (`exchange.run_locally`): for the warm-up and tests."""
    root, w = _new_root(source), source.workers
    batches = exchange.run_locally(w, tokens, [_scatter(str(source.root), str(root), w, tokens), _gather(str(root))])
    return _finished(source, root, [blob for batch in batches for blob in exchange.blobs_of(batch)])


def _new_root(source: PartitionedIndex):
    root = distributed_index.new_root("balanced")
    shutil.copy(source.root / "loops.npy", root / "loops.npy")
    return root


class BalancedSizes(NamedTuple):
    """What `_gather` reports of the partition it wrote: its blob's meta."""

    count_keys: int
    resolver_entries: int
    membership_entries: int


def _finished(source: PartitionedIndex, root, reports: list) -> BalancedIndex:
    """The driver's handle, from each worker's BalancedSizes."""
    sizes = [BalancedSizes(count_keys=0, resolver_entries=0, membership_entries=0)] * source.workers
    for payload in reports:
        _, p, meta, _ = exchange.unpack(payload)
        sizes[p] = BalancedSizes(*meta)
    return BalancedIndex(
        root,
        source.workers,
        source.vertices,
        source.ids,
        count_keys=np.array([s.count_keys for s in sizes], np.int64),
        resolver_entries=np.array([s.resolver_entries for s in sizes], np.int64),
        membership_entries=np.array([s.membership_entries for s in sizes], np.int64),
    )


def _scatter(source_root: str, root: str, workers: int, tokens: np.ndarray):
    def scatter(iterator):
        for _ in iterator:
            pass
        p = exchange.current_partition()
        keys, offsets, forward, reverse, _ = distributed_index.load_partition(source_root, p)[0].lists
        degrees = np.diff(offsets, axis=1).astype(np.int32)  # (2, keys): forward, reverse sizes
        directory = os.path.join(root, f"p{p}")
        store.save_array(os.path.join(directory, "count_keys.npy"), np.asarray(keys, dtype=np.int32))
        store.save_array(os.path.join(directory, "degrees.npy"), degrees)
        out_tokens, payloads = [], []
        for kind, values in ((0, forward), (1, reverse)):
            deg = degrees[kind].astype(np.int64)
            key = np.repeat(np.asarray(keys), deg)
            position = np.arange(len(values), dtype=np.int64) - np.repeat(offsets[kind, :-1], deg)
            code = resolver_code(key, np.full(len(key), kind), position)
            routed = exchange.route(
                BlobKind.RESOLVER, pair_owner(key, position, workers), [code, np.asarray(values)], tokens, workers
            )
            out_tokens += routed[0]
            payloads += routed[1]
        # Membership: every edge row once, as the forward entry (src, dst) of its source key.
        src = np.repeat(np.asarray(keys), degrees[0].astype(np.int64))
        dst = np.asarray(forward)
        code = edge_code(src, dst)
        routed = exchange.route(BlobKind.MEMBERSHIP, pair_owner(src, dst, workers), [code], tokens, workers)
        out_tokens += routed[0]
        payloads += routed[1]
        if payloads:
            yield from exchange.blob_batches(out_tokens, payloads)

    return scatter


def _gather(root: str):
    def gather(iterator):
        p = exchange.current_partition()
        codes, values, edges = [], [], []
        for kind, _, arrays in exchange.received(iterator, p):
            if kind == BlobKind.RESOLVER:
                codes.append(arrays[0])
                values.append(arrays[1])
            else:
                edges.append(arrays[0])
        code = np.concatenate(codes) if codes else np.zeros(0, np.int64)
        value = np.concatenate(values) if values else np.zeros(0, np.int32)
        order = np.argsort(code, kind="stable")
        edge = np.sort(np.concatenate(edges)) if edges else np.zeros(0, np.int64)
        directory = os.path.join(root, f"p{p}")
        store.save_array(os.path.join(directory, "resolver_codes.npy"), code[order])
        store.save_array(os.path.join(directory, "resolver_values.npy"), value[order])
        store.save_array(os.path.join(directory, "edges.npy"), edge)
        keys = len(mapped(os.path.join(directory, "count_keys.npy")))  # written by _scatter, maybe elsewhere
        sizes = BalancedSizes(count_keys=keys, resolver_entries=len(code), membership_entries=len(edge))
        yield from exchange.blob_batches([-1], [exchange.pack(BlobKind.SIZES, p, [np.zeros(0, np.int8)], sizes)])

    return gather


class Partition:
    """One worker's three indices, memory-mapped once per Python worker process."""

    _loaded: ClassVar[dict[tuple[str, int], Partition]] = {}

    def __init__(self, root: str, p: int):
        d = os.path.join(root, f"p{p}")
        m = mapped
        self.count_keys, self.degrees = m(os.path.join(d, "count_keys.npy")), m(os.path.join(d, "degrees.npy"))
        self.resolver_codes, self.resolver_values = (
            m(os.path.join(d, "resolver_codes.npy")),
            m(os.path.join(d, "resolver_values.npy")),
        )
        self.edges = m(os.path.join(d, "edges.npy"))
        self.loops = m(os.path.join(root, "loops.npy"))

    @classmethod
    def load(cls, root: str, p: int) -> Partition:
        if (root, p) not in cls._loaded:
            cls._loaded[(root, p)] = cls(root, p)
        return cls._loaded[(root, p)]

    def counts(self, keys: np.ndarray) -> np.ndarray:
        """(n, 2) forward and reverse list sizes of each key (0, 0 for a key with no lists)."""
        at, hit = find_sorted(self.count_keys, keys)
        out = np.zeros((len(keys), 2), dtype=np.int32)
        out[hit] = self.degrees[:, at[hit]].T
        return out

    def resolve(self, codes: np.ndarray) -> np.ndarray:
        at, found = find_sorted(self.resolver_codes, codes)
        if not found.all():
            raise ValueError("an extension-resolver lookup names a position outside its list")
        return np.asarray(self.resolver_values[at], dtype=np.int32)

    def contains(self, codes: np.ndarray) -> np.ndarray:
        return find_sorted(self.edges, codes)[1].astype(np.int8)
