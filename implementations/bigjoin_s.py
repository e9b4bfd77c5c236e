"""`bigjoin-s` (§3.4): BiGJoin made skew-resilient, on BiGJoin's dataflow and kernels. It differs from
BiGJoin in who holds a long list, and so in where the work on it goes:

1. Index (`block_index`): a list longer than the block size is cut into blocks of consecutive
   values, held by different workers (block j of key k by worker (owner(k) + j) mod W); no worker
   holds a whole hub list. Every worker maps the split keys' block bounds and sizes.
2. Count: a split list is counted by any worker, from the block sizes (exact but for the two blocks
   at the ends of the prefix's value range), so it costs no exchange.
3. Balance: a prefix whose smallest list is split is proposed as one piece per block, each queued at
   the block's holder (`fan_out`); a hub's proposals are spread over all workers.
4. Intersect: candidates bound for a split list are cut by block and each part goes to the block's
   holder (`split_candidates`); each pending relation may then need its own exchange (`level_hops`).

Everything else (the count/propose/intersect kernels, the memory budget and its windows, the
per-worker queues, the counters) is BiGJoin's (`dataflow`). The paper's own design, where prefixes
stay and their lookups travel in request/answer round trips, is `bigjoin-s-paper`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from harness.core.errors import DataError
from implementations.base import Param
from implementations.bigjoin import BiGJoin
from implementations.extension.dataflow import DataflowJob, checks, hops
from implementations.gj.blocks import Blocks
from implementations.indices import block_index
from implementations.indices.distributed_index import PartitionedIndex


@dataclass(kw_only=True)
class BlockFlow(DataflowJob):
    """BiGJoin's dataflow on the index in blocks."""

    def level_hops(self, level: int) -> int:
        """As BiGJoin's, but the seeds take an exchange (their pieces go to the blocks of a split list)
        and Intersect one per pending relation or anti-relation: candidates cut for one split list's
        blocks may span several blocks of the next."""
        if self.workers == 1:
            return hops(self.plan, level, self.workers)
        if level == 0:  # the seeds' pieces go to the blocks of a split list
            return 1
        others = self.workers - 1
        n = checks(self.plan, level)
        if level + 1 < self.plan.m:
            n += min(int(self.plan.rel_count[level + 1]), others) + 1
        return n

    def load_blocks(self, p: int) -> Blocks:
        return block_index.load_blocks(self.index_root)


class BiGJoinS(BiGJoin):
    name = "bigjoin-s"
    kernels = frozenset({"bigjoin", "bigjoin-s"})  # BiGJoin's kernels on blocks: both warm-ups
    description = "BiGJoin-S: skew-resilient BiGJoin (long lists in blocks over the workers, work sent to the blocks)"
    dataflow_class = BlockFlow
    vertex_labels = True  # BiGJoin's kernels: a piece's proposals are filtered by label as a whole list's are
    params = (
        *BiGJoin.params,
        Param("block_size", int, None, "bigjoin-s: entries per block of a split list (default: sqrt(sum of d^2 / 8W))"),
    )

    def configure(self) -> None:
        super().configure()
        size = self.param("block_size")
        if size is not None and size < 1:
            raise DataError(f"--block-size must be at least 1, got {size}")

    def prepare(self) -> None:
        super().prepare()  # the key-partitioned index, shared with bigjoin; the blocks are cut from it
        source = cast(PartitionedIndex, self.index)
        size = self.param("block_size") or block_index.default_block_size(source)
        key = ("block-index", self.ctx.workers, size)
        reused = key in self.ctx.arrangements
        if not reused:
            self.ctx.arrangements[key] = block_index.build(self.ctx.spark, source, size)
        self.index_reused = self.index_reused and reused
        self.index = self.ctx.arrangements[key]
        self.memory = self.choose_budget()  # against the block index's partitions
