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
from implementations.gj.extension_kernels import Lists
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
        lists = distributed_index.load_partition(source_root, p)[0].lists
        cut, table = _Cut.of(lists, block_size, max(1, block_size // workers))
        for name, array in zip(SPLIT_FILES, table):
            store.save_array(os.path.join(root, f"p{p}", f"{name}.npy"), array)
        for kind in (0, 1):
            for lo in range(0, len(_direction(lists, kind)), ROUTE_ROWS):
                holder, key, value, kinds = cut.routed(lists, kind, lo, lo + ROUTE_ROWS, workers)
                out_tokens, payloads = exchange.route(BlobKind.EDGES, holder, [key, value, kinds], tokens, workers)
                del holder, key, value, kinds
                if payloads:
                    yield from exchange.blob_batches(out_tokens, payloads)

    return scatter


@dataclass
class _Cut:
    """The long lists of one worker's keys cut into blocks: what routing a chunk of entries needs to
    find each entry's block, and whether every worker holds its direction of the list whole. Only the
    split keys' entries are read whole (to find their blocks' bounds); the rest are read by chunk."""

    slot: np.ndarray  # per key of the partition: its split key's number, or -1 (not split)
    bounds: np.ndarray  # int64: split key j's block bounds but the first, each as j * BOUND + bound
    first_bound: np.ndarray  # per split key, where its bounds start in `bounds`
    whole: np.ndarray  # (2, split keys) bool: that direction is held whole by every worker

    BOUND = 1 << 32  # above every int32 value: j * BOUND + value orders by split key, then value

    @classmethod
    def of(cls, lists: Lists, block_size: int, whole_at_most: int) -> tuple[_Cut, tuple[np.ndarray, ...]]:
        """Cut every list longer than block_size into blocks, and mark the directions of at most
        whole_at_most entries as held whole everywhere; also the split keys' table (SPLIT_FILES)."""
        offsets = lists.offsets
        degrees = np.diff(offsets, axis=1).astype(np.int64)
        split = np.flatnonzero(degrees.sum(axis=0) > block_size)
        lowers, sizes, whole = [], [], []
        for s in split:  # a few keys: the long lists
            parts = [_direction(lists, d)[offsets[d, s] : offsets[d, s + 1]] for d in (0, 1)]
            lower = np.concatenate([[0], np.sort(np.concatenate(parts))[block_size::block_size]]).astype(np.int32)
            lowers.append(lower)
            sizes.append(np.stack([np.bincount(_block_of(lower, part), minlength=len(lower)) for part in parts]))
            whole.append([len(part) <= whole_at_most for part in parts])
        counts = np.asarray([len(lower) for lower in lowers], np.int64)
        slot = np.full(len(lists.keys), -1, np.int32)
        slot[split] = np.arange(len(split), dtype=np.int32)
        bounds = [j * cls.BOUND + lower[1:].astype(np.int64) for j, lower in enumerate(lowers)]
        cut = cls(
            slot,
            np.concatenate(bounds) if bounds else np.zeros(0, np.int64),
            np.cumsum(counts - 1) - (counts - 1),
            np.asarray(whole, bool).T.reshape(2, len(split)),
        )
        table = (
            np.asarray(lists.keys[split], np.int32),
            np.concatenate(lowers) if lowers else np.zeros(0, np.int32),
            counts,
            np.concatenate(sizes, axis=1).astype(np.int64) if sizes else np.zeros((2, 0), np.int64),
            cut.whole.astype(np.int8),
        )
        return cut, table

    def routed(self, lists: Lists, kind: int, lo: int, hi: int, workers: int) -> tuple[np.ndarray, ...]:
        """(holder, key, value, kind) of every copy to send of entries lo:hi of direction `kind`: each
        entry to its block's holder (an unsplit list's one block is its owner's), and an entry of a
        direction held whole everywhere to every worker."""
        value = np.asarray(_direction(lists, kind)[lo:hi], np.int32)
        at = np.searchsorted(lists.offsets[kind], np.arange(lo, lo + len(value)), side="right") - 1
        key, slot = np.asarray(lists.keys[at], np.int32), self.slot[at]
        del at
        block, whole = np.zeros(len(value), np.int64), np.zeros(len(value), bool)
        cut = np.flatnonzero(slot >= 0)
        if len(cut):
            j = slot[cut].astype(np.int64)
            block[cut] = np.searchsorted(self.bounds, j * self.BOUND + value[cut], side="right") - self.first_bound[j]
            whole[cut] = self.whole[kind, j]
        one = ~whole
        holder = np.concatenate(
            [((partition_of(key, workers) + block) % workers)[one], np.repeat(np.arange(workers), int(whole.sum()))]
        )
        kinds = np.full(len(value), kind, np.int8)
        copies = (np.concatenate([a[one], np.tile(a[whole], workers)]) for a in (key, value, kinds))
        return (holder, *copies)


def _direction(lists: Lists, kind: int) -> np.ndarray:
    """A partition's forward (kind 0) or reverse (1) lists, memory-mapped: read a chunk at a time."""
    return lists.reverse if kind else lists.forward


def _block_of(lower: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The block of each value of one split list whose blocks start at `lower`."""
    return np.searchsorted(lower[1:], values, side="right")


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
