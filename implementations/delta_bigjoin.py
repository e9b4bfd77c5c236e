"""`delta-bigjoin` (§3.3, §4.3): BiGJoin kept current under batches of edge insertions and deletions.

What differs from BiGJoin, and where it lives:
1. The index is multi-version (`versioned_index`): it is updated in place by one Spark job per batch,
   which also derives the relation's net changes under set semantics, and it gives the batch an old
   and a new view (`DeltaJob.load_index`: the base plus the changes up to and before the batch).
2. A batch runs one delta query dQ_i per query edge (atom) i and per sign: Generic Join over an
   attribute order that starts with atom i's two attributes, seeded at level 1 from the batch's net
   changes of that sign (`DeltaJob.start`). Atoms before i read the new view, atoms after i the old
   one: `ExtensionPlan.from_spec(seed_atom=i)` sets those relations' `rel_view` to OLD, which the
   shared kernels pass to `list_ranges` (the only place that reads a view). So a match whose edges
   change in the same batch is counted exactly once.
3. All delta queries of a batch, every level of each, run in one Spark job with the index update
   (`apply_updates`): a `GroupJob` with the update as its prelude, each level starting at its
   `offset` and fed by the level before (`DeltaJob.window` with `feed`, `last_stage`).
4. The change of the count is the sum of the delta queries' counts, each with its sign.

Without an update stream (ctx.stream), `count()` starts from the empty graph and inserts the dataset's
edges in `self_check_batches` batches, so the count it returns is built entirely from delta queries."""

from __future__ import annotations

import glob
import os
import shutil
import uuid
from collections import Counter
from dataclasses import dataclass

import numpy as np
from pyspark.sql import functions as F

from harness import store, updates
from harness.errors import DataError
from harness.query import default_attribute_order, in_query_order, make_join_spec

from . import versioned_index
from .base import BatchOutcome, Outcome, Param
from .bigjoin import LEVEL_PARAMS, BiGJoin, Counters
from .extension_kernels import IndexPartition, filter_candidates
from .plan import ExtensionPlan
from .prefix_extension import (
    Candidates,
    ExtensionJob,
    GroupJob,
    Prefixes,
    Stage,
    _concat,
    read_queue,
)

DEFAULT_COMPACT_RATIO = 0.05  # compact when the overlays hold this share of the base's entries
DEFAULT_SELF_CHECK_BATCHES = 2


@dataclass
class DeltaJob(ExtensionJob):
    view: tuple[int, int] = (0, 0)  # (base, overlay) versions of the multi-version index
    seeds: str | None = None  # directory of the batch's net changes: start at level 1 from them
    sign: int = 1  # which changes seed this extension: insertions (+1) or deletions (-1)
    undirected: bool = False
    feed: int | None = None  # pipelined: start from everything group `feed` queued for this level here

    def load_index(self, p: int) -> tuple[IndexPartition, np.ndarray]:
        return versioned_index.load_view(self.index_root, p, *self.view)

    @property
    def seeded(self) -> bool:
        return self.seeds is not None and self.level == 1

    @property
    def exchanges(self) -> int:
        if not self.seeded:
            return super().exchanges
        plan = self.plan  # seeds start at the owner of their first attribute, which keys every relation binding the second
        if plan.m == 2:
            return 0
        return len({int(plan.rel_pos[2, r]) for r in range(plan.rel_count[2])} - {0}) + 1

    def start(self, p: int, final: bool, number: int = 0):
        if not self.seeded:
            return super().start(p, final, number)
        assert self.seeds is not None  # seeded
        stage = Stage(self, number, p)
        key, value, diff, kind = np.load(store.local_copy(os.path.join(self.seeds, f"p{p}.npy")))
        # Undirected, the relation is symmetric and each change binds the atom both ways round (as its
        # forward and its reverse entry); directed, the atom reads the forward entries.
        chosen = (diff == self.sign) & ((kind == 0) | self.undirected)
        x, y = key[chosen], value[chosen]
        plan, x = self.plan, x.astype(np.int32).reshape(-1, 1)
        keep = filter_candidates(
            1, x, np.arange(len(x)), y.astype(np.int32), plan.above, plan.below, plan.differ, False, stage.loops
        )
        x, y = x[keep, 0], y[keep].astype(np.int32)
        stage.add("proposals", len(y))
        seeds = Candidates(
            x.reshape(-1, 1), np.full(len(x), (1 << int(plan.rel_count[1])) - 1, np.int32), np.ones(len(x), np.int32), y
        )
        return stage.run(seeds, Prefixes.empty(2), final)

    def window(self, p: int) -> tuple:
        if self.feed is None:
            return super().window(p)
        # Pipelined: every prefix group `feed` queued here for this level earlier in the same Spark job.
        # A stage re-executed after a lost executor leaves a second file (named by its attempt) with the
        # same content: read one per stage.
        pattern = os.path.join(self.run_dir, f"L{self.level}", f"p{p}", f"j{self.job_id:06d}-g{self.feed}-s*-a*.bin")
        per_stage: dict[str, str] = {}
        for path in sorted(glob.glob(pattern)):
            per_stage.setdefault(os.path.basename(path).rsplit("-a", 1)[0], path)
        items = _concat([read_queue(path) for path in per_stage.values()], Prefixes.empty(self.level))
        for path in per_stage.values():
            store.drop_local(path)  # used up by this job
        work = items.work().astype(np.int64)
        return items, np.zeros_like(work), work


class DeltaBiGJoin(BiGJoin):
    name = "delta-bigjoin"
    description = "Delta-BiGJoin: BiGJoin's counts maintained under edge update batches by delta queries"
    job_class = DeltaJob
    maintains_updates = True
    params = LEVEL_PARAMS + (
        Param("changes", int, 0, "with --updates: record up to N changed matches per batch"),
        Param(
            "compact_ratio",
            float,
            DEFAULT_COMPACT_RATIO,
            "compact the versioned index when its overlays hold this share of the base's entries",
        ),
        Param(
            "self_check_batches",
            int,
            DEFAULT_SELF_CHECK_BATCHES,
            "without an update stream: insert every edge into the empty graph in this many batches",
        ),
    )

    @classmethod
    def wants_driver_edges(cls, edges: int, params: dict) -> bool:
        return False  # its index is built from the update stream's initial graph, by Spark

    def prepare(self) -> None:
        ctx = self.ctx
        query = ctx.spec.query
        loops = [f"{x}-{y}" for x, y in query.edges if x == y]
        if loops:
            raise DataError(f"delta-bigjoin does not maintain self-loop query edges ({', '.join(loops)})")
        self.configure()
        self.self_check = ctx.stream is None
        stream = ctx.stream
        if self.self_check:
            batches = self.param("self_check_batches")
            empty = ctx.edges.limit(0)
            stream = updates.UpdateStream.of("insert-all", empty, updates.insert_all(ctx.edges, batches))
        assert stream is not None  # the run's stream, or the self-check's
        self.stream = stream
        undirected = ctx.spec.semantics == "undirected"
        relation = stream.initial
        if undirected:  # the simple graph of the directed edge set
            relation = (
                relation.filter(F.col("src") != F.col("dst"))
                .select(F.least("src", "dst").alias("src"), F.greatest("src", "dst").alias("dst"))
                .distinct()
            )
        mentioned = stream.updates.select(F.col("src").alias("v")).union(stream.updates.select(F.col("dst").alias("v")))
        self.index = versioned_index.build(ctx.spark, stream.initial, relation, undirected, ctx.workers, mentioned)
        self.index_reused = False
        self.plan_deltas()

    def plan_deltas(self) -> None:
        """One delta query per query edge, each with the attribute order that starts at that edge."""
        query, semantics = self.ctx.spec.query, self.ctx.spec.semantics
        self.compact_ratio = self.param("compact_ratio")
        self.change_limit = self.param("changes")
        self.delta_plans, self.delta_orders = [], []
        for i, (x, y) in enumerate(query.edges):
            order = default_attribute_order(query, start=(x, y))
            self.delta_plans.append(ExtensionPlan.from_spec(make_join_spec(query, semantics, order), seed_atom=i))
            self.delta_orders.append(order)

    @classmethod
    def in_process(cls, spec, workers: int, index, budget=None, params: dict | None = None):
        """`BiGJoin.in_process` on a `versioned_index.build_locally` index: call `apply_updates`."""
        impl = super().in_process(spec, workers, index, budget, params)
        impl.plan_deltas()
        return impl

    def job_args(self) -> dict:
        return {"view": self.index.view, "undirected": self.index.undirected}

    def count(self) -> Outcome:
        if not self.self_check:
            return super().count()
        total, produced, compiled, per_batch = 0, 0, 0, []
        for batch in self.stream.batches:
            out = self.apply_updates(self.stream.batch(batch))
            total += out.delta
            produced += out.output_changes
            compiled += out.counters["kernels_compiled"]
            per_batch.append(out.delta)
        counters = {
            "self_check": {
                "stream": "insert every edge into the empty graph",
                "batches": len(per_batch),
                "delta_per_batch": per_batch,
                "output_changes": produced,
            },
            "index": self.index.describe(),
            "kernels_compiled": compiled,
        }
        return Outcome(total, counters)

    def apply_updates(self, batch) -> BatchOutcome:
        """One Spark job per batch: the index update, then every delta query (both signs, whichever the
        batch turns out to need) with its levels pipelined: each level starts in the stage after the
        previous level's prefixes have all reached their proposers, and proposes all of them."""
        ctx, index, m = self.ctx, self.index, self.plan.m
        compact = index.version > 0 and index.overlay_share() > self.compact_ratio
        update = versioned_index.begin_batch(index, batch, compact)
        self._sample = None  # matches() must look at the current graph
        seeds = versioned_index.seeds_dir(index.root, index.version)
        queries = [(atom, sign) for atom in range(len(self.delta_plans)) for sign in (1, -1)]
        run_dir = str(index.root / f"run-{uuid.uuid4().hex[:8]}")
        tokens = self.routing_tokens()
        limit = self.change_limit + 1 if self.change_limit else 0
        jobs: list[ExtensionJob] = []
        offsets: list[int] = []
        sign_of: dict[int, int] = {}
        for e, (atom, sign) in enumerate(queries):
            offset = 0
            for level in range(1, m):
                group = e + len(queries) * (level - 1)
                job = DeltaJob(
                    index_root=str(index.root),
                    workers=ctx.workers,
                    tokens=tokens,
                    plan=self.delta_plans[atom],
                    level=level,
                    budget=self.budget,
                    queues=[[] for _ in range(ctx.workers)],
                    consumed=[0] * ctx.workers,
                    run_dir=run_dir,
                    job_id=0,
                    match_limit=limit,
                    group=group,
                    view=index.view,
                    seeds=seeds if level == 1 else None,
                    sign=sign,
                    undirected=index.undirected,
                    feed=group - len(queries) if level > 1 else None,
                )
                job.last_stage = offset + job.exchanges
                jobs.append(job)
                offsets.append(offset)
                sign_of[group] = sign
                offset += job.exchanges
        grouped = GroupJob(jobs, update.prelude, offsets)
        try:
            result = self.execute(grouped)
        finally:
            shutil.rmtree(run_dir, ignore_errors=True)
        applied = dict(zip(versioned_index.UPDATE_FIELDS, (int(v) for v in update.finish(result.reports).sum(axis=0))))
        counters = Counters(m)
        counters.add(grouped, result, 0)
        delta = sum(sign * result.of_group(g).total("counted") for g, sign in sign_of.items())
        report = counters.report(index, self.budget_fields(), False)
        changes, truncated = None, False
        if self.change_limit:
            last = len(queries) * (m - 2)  # the groups of the last level count (and sample) the matches
            found = [result.matches.get(last + e, np.zeros((0, m), np.int32)) for e in range(len(queries))]
            changes, truncated = self._net_changes(queries, found)
        report.update(delta_queries=len(queries))
        return BatchOutcome(delta, counters.count, report, changes, truncated, applied={**applied, "compacted": compact})

    def _net_changes(self, queries: list[tuple[int, int]], found: list[np.ndarray]) -> tuple[list, bool]:
        """Changed matches (in query attribute order, original ids) with their net sign: a match can
        leave through one delta query and come back through another in the same batch."""
        net: Counter = Counter()
        truncated = False
        for (atom, sign), rows in zip(queries, found):
            truncated |= len(rows) > self.change_limit
            for match in in_query_order(self.ctx.spec.query, self.delta_orders[atom], self.index.ids[rows]):
                net[match] += sign
        changes = sorted((match, diff) for match, diff in net.items() if diff)
        return changes[: self.change_limit], truncated or len(changes) > self.change_limit


__all__ = ["DeltaBiGJoin", "DeltaJob"]
