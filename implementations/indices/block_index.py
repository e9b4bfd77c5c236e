"""BiGJoin-S's index (§3.4.1, in blocks), derived from the key-partitioned index by one Spark job.

A key whose list (forward and reverse entries together) is longer than the block size S has it cut
into blocks of consecutive values, about S entries each; block j goes to worker (owner(k) + j) mod W
(`blocks`). Every other key stays whole at its owner, so each worker's partition has the layout of
the key-partitioned index's (`distributed_index`), and the shared kernels read it unchanged. The
split keys' block bounds and sizes form one small table that every worker maps.

S defaults to sqrt(Σ d² / (8W)) over the keys' list sizes d (at least MIN_BLOCK): the work a key's
list draws grows about as d², so no whole list draws more than about 1/(8W) of the total."""

from __future__ import annotations

import math
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.core import store
from implementations.gj import exchange
from implementations.gj.arrays import mapped, readonly
from implementations.gj.blocks import Blocks
from implementations.gj.exchange import BlobKind
from implementations.gj.keys import partition_of
from implementations.indices import distributed_index
from implementations.indices.distributed_index import PartitionedIndex, max_over_mean

MIN_BLOCK = 32
ROUTE_ROWS = 1 << 21  # entries routed at once: the copies routing makes are of these, not of a whole partition
SPLIT_FILES = ("split_keys", "split_lower", "split_counts", "split_sizes", "split_everywhere")  # per worker, of its keys
BLOCK_FILES = ("slots", "first", "lower", "sizes_before", "everywhere")  # the merged table (Blocks), at the root


@dataclass
class BlockIndex:
    root: Path
    workers: int
    vertices: int
    ids: np.ndarray  # rank -> original vertex id
    loop_vertices: np.ndarray  # ranks with a self-loop
    block_size: int
    split_keys: int
    blocks: int  # blocks of the split keys
    keys: np.ndarray  # per worker: keys it holds a list or a block of
    entries: np.ndarray  # per worker: list entries (forward and reverse)

    def bytes_per_worker(self) -> np.ndarray:
        """Each partition's files (as the key-partitioned index's), plus the blocks table every worker holds."""
        table = 4 * (self.split_keys + self.blocks) + 16 * (self.blocks + self.split_keys)
        return 20 * self.keys + 4 * self.entries + table

    def partition_bytes(self) -> int:
        return int(self.bytes_per_worker().max(initial=0))

    def describe(self) -> dict:
        return {
            "workers": self.workers,
            "vertices": self.vertices,
            "block_size": self.block_size,
            "split_keys": self.split_keys,
            "blocks_of_split_keys": self.blocks,
            "keys_per_worker": self.keys.tolist(),
            "entries_per_worker": self.entries.tolist(),
            "bytes_per_worker": self.bytes_per_worker().tolist(),
            "entries_max_over_mean": max_over_mean(self.entries),
        }


def default_block_size(source: PartitionedIndex) -> int:
    """sqrt(Σ d² / (8W)), from the list sizes in the partitions' offsets (a few bytes per key)."""
    squares = 0.0
    for p in range(source.workers):
        offsets = mapped(os.path.join(source.root, f"p{p}", "offsets.npy"))
        d = np.diff(offsets, axis=1).sum(axis=0).astype(np.float64)
        squares += float((d * d).sum())
    return max(MIN_BLOCK, math.ceil(math.sqrt(squares / (8 * source.workers))))


def build(spark, source: PartitionedIndex, block_size: int) -> BlockIndex:
    """Cut the long lists into blocks and send each block to its holder (one shuffle)."""
    root, w = _new_root(source), source.workers
    tokens = exchange.routing_tokens(spark, w)
    rows = (
        spark.range(0, w, 1, w)
        .mapInArrow(_scatter(str(source.root), str(root), w, block_size, tokens), exchange.SCHEMA)
        .repartition(w, "token")
        .mapInArrow(distributed_index.partition_builder(str(root), source.vertices), exchange.SCHEMA)
        .collect()
    )
    return _finished(source, root, block_size, [row.payload for row in rows])


def build_locally(source: PartitionedIndex, tokens: np.ndarray, block_size: int) -> BlockIndex:
    """`build`'s tasks run in this process (`exchange.run_locally`): for the warm-up and tests."""
    root, w = _new_root(source), source.workers
    tasks = [
        _scatter(str(source.root), str(root), w, block_size, tokens),
        distributed_index.partition_builder(str(root), source.vertices),
    ]
    batches = exchange.run_locally(w, tokens, tasks)
    return _finished(source, root, block_size, [blob for batch in batches for blob in exchange.blobs_of(batch)])


def _new_root(source: PartitionedIndex) -> Path:
    root = distributed_index.new_root("blocks")
    shutil.copy(source.root / "loops.npy", root / "loops.npy")
    return root


def _scatter(source_root: str, root: str, workers: int, block_size: int, tokens: np.ndarray):
    def scatter(iterator):
        for _ in iterator:
            pass
        p = exchange.current_partition()
        keys, offsets, forward, reverse, _ = distributed_index.load_partition(source_root, p)[0].lists
        entries = _Entries.of(np.asarray(keys), np.asarray(offsets), np.asarray(forward), np.asarray(reverse))
        table = entries.cut(block_size, max(1, block_size // workers))
        for name, array in zip(SPLIT_FILES, table):
            store.save_array(os.path.join(root, f"p{p}", f"{name}.npy"), array)
        for lo in range(0, len(entries.value), ROUTE_ROWS):
            holder, key, value, kind = entries.routed(workers, slice(lo, lo + ROUTE_ROWS))
            out_tokens, payloads = exchange.route(BlobKind.EDGES, holder, [key, value, kind], tokens, workers)
            del holder, key, value, kind
            if payloads:
                yield from exchange.blob_batches(out_tokens, payloads)

    return scatter


@dataclass
class _Entries:
    """Every list entry of one worker's keys, forward then reverse, with the block it falls in and
    whether every worker holds its direction of the list whole."""

    key: np.ndarray
    value: np.ndarray
    kind: np.ndarray  # 0 forward, 1 reverse
    block: np.ndarray  # int32
    whole: np.ndarray  # bool per entry
    keys: np.ndarray  # the partition's keys
    offsets: np.ndarray  # (2, keys + 1), as the partition's

    @classmethod
    def of(cls, keys, offsets, forward, reverse) -> _Entries:
        degrees = np.diff(offsets, axis=1).astype(np.int64)
        key = np.concatenate([np.repeat(keys, degrees[0]), np.repeat(keys, degrees[1])]).astype(np.int32, copy=False)
        value = np.concatenate([forward, reverse]).astype(np.int32, copy=False)
        kind = np.repeat(np.array([0, 1], np.int8), [len(forward), len(reverse)])
        n = len(value)
        return cls(key, value, kind, np.zeros(n, np.int32), np.zeros(n, bool), keys, offsets)

    def cut(self, block_size: int, whole_at_most: int) -> tuple[np.ndarray, ...]:
        """Cut every list longer than block_size into blocks (marking each entry's block, and the
        directions of at most whole_at_most entries as held whole everywhere); return the split
        keys' table (SPLIT_FILES)."""
        offsets, n_forward = self.offsets, int(self.offsets[0, -1])
        degrees = np.diff(offsets, axis=1).astype(np.int64)
        split = np.flatnonzero(degrees.sum(axis=0) > block_size)
        lowers, counts, sizes, whole = [], [], [], []
        for s in split:  # a few keys: the long lists
            parts = (np.arange(offsets[0, s], offsets[0, s + 1]), n_forward + np.arange(offsets[1, s], offsets[1, s + 1]))
            mine = np.concatenate(parts)
            lower = np.concatenate([[0], np.sort(self.value[mine])[block_size::block_size]]).astype(np.int32)
            self.block[mine] = np.searchsorted(lower[1:], self.value[mine], side="right")
            lowers.append(lower)
            counts.append(len(lower))
            sizes.append(np.stack([np.bincount(self.block[part], minlength=len(lower)) for part in parts]))
            whole.append([len(part) <= whole_at_most for part in parts])
            for part, held in zip(parts, whole[-1]):
                self.whole[part] = held
        return (
            np.asarray(self.keys[split], np.int32),
            np.concatenate(lowers) if lowers else np.zeros(0, np.int32),
            np.asarray(counts, np.int64),
            np.concatenate(sizes, axis=1).astype(np.int64) if sizes else np.zeros((2, 0), np.int64),
            np.asarray(whole, np.int8).T.reshape(2, len(split)),
        )

    def routed(self, workers: int, rows: slice) -> tuple[np.ndarray, ...]:
        """(holder, key, value, kind) of every copy to send of the entries `rows`: each entry to its
        block's holder, and an entry of a direction held whole everywhere to every worker."""
        key, value, kind, block, whole = (a[rows] for a in (self.key, self.value, self.kind, self.block, self.whole))
        one = ~whole
        holder = np.concatenate(
            [
                ((partition_of(key, workers) + block) % workers)[one],
                np.repeat(np.arange(workers), int(whole.sum())),
            ]
        )
        copies = (np.concatenate([a[one], np.tile(a[whole], workers)]) for a in (key, value, kind))
        return (holder, *copies)


def _finished(source: PartitionedIndex, root: Path, block_size: int, reports: list) -> BlockIndex:
    """Merge the workers' tables of split keys into one (BLOCK_FILES) and the driver's record."""
    sizes, _ = distributed_index.reported_partitions(reports, source.workers)
    keys, forward, reverse = distributed_index.per_worker(sizes)
    parts = [[mapped(os.path.join(root, f"p{p}", f"{name}.npy")) for name in SPLIT_FILES] for p in range(source.workers)]
    table = _merged_table(list(zip(*parts)))
    for name, array in zip(BLOCK_FILES, table):
        store.save_to_store(str(root / f"{name}.npy"), np.ascontiguousarray(array))
    split_keys, blocks = len(table.first) - 1, len(table.lower)
    return BlockIndex(
        root,
        source.workers,
        source.vertices,
        source.ids,
        source.loop_vertices,
        block_size,
        split_keys,
        blocks,
        keys=keys,
        entries=forward + reverse,
    )


def _merged_table(parts: list) -> Blocks:
    """The workers' tables of split keys (SPLIT_FILES each) as one Blocks table, by key."""
    keys_parts, lower_parts, count_parts, size_parts, whole_parts = (list(x) for x in parts)
    keys = np.concatenate(keys_parts).astype(np.int32)
    lower = np.concatenate(lower_parts).astype(np.int32)
    counts = np.concatenate(count_parts).astype(np.int64)
    sizes = np.concatenate(size_parts, axis=1).astype(np.int64)
    whole = np.concatenate(whole_parts, axis=1).astype(np.int8)
    starts = np.cumsum(counts) - counts
    order = np.argsort(keys, kind="stable")
    first = np.zeros(len(keys) + 1, np.int64)
    first[1:] = np.cumsum(counts[order])
    pick = np.concatenate([np.arange(starts[i], starts[i] + counts[i]) for i in order]) if len(keys) else np.zeros(0, np.int64)
    sizes_before = np.zeros((2, len(pick) + len(keys)), np.int64)
    for h, i in enumerate(order):  # per key: 0, then its blocks' sizes summed
        base = first[h] + h
        sizes_before[:, base + 1 : base + counts[i] + 1] = np.cumsum(sizes[:, starts[i] : starts[i] + counts[i]], axis=1)
    slots = np.full(int(keys.max()) + 1 if len(keys) else 0, -1, np.int32)
    slots[keys[order]] = np.arange(len(keys), dtype=np.int32)
    return Blocks(slots, first, lower[pick], sizes_before, np.ascontiguousarray(whole[:, order]))


_tables: dict[str, Blocks] = {}


def load_blocks(root: str) -> Blocks:
    """The split keys' table (memory-mapped once per Python worker process); each worker's lists and
    blocks are a partition of the key-partitioned index's layout (`distributed_index.load_partition`)."""
    if root not in _tables:
        _tables[root] = Blocks(*(readonly(np.asarray(mapped(os.path.join(root, f"{name}.npy")))) for name in BLOCK_FILES))
    return _tables[root]
