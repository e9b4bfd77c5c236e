"""`delta-bigjoin` (§3.3, §4.3): BiGJoin kept current under batches of edge insertions and deletions.

What differs from BiGJoin, and where it lives:
1. The index is multi-version (`versioned_index`): it is updated in place at the start of each
   batch's first Spark job, which also derives the relation's net changes under set semantics, and it
   gives the batch an old and a new view (`DeltaFlow.load_index`: the base plus the changes up to and
   before the batch).
2. A batch runs one delta query dQ_i per query edge (atom) i and per sign: Generic Join over an
   attribute order that starts with atom i's two attributes, seeded at level 1 from the batch's net
   changes of that sign (`DeltaFlow.seed_changes`). Atoms before i read the new view, atoms after i the
   old one: `ExtensionPlan.from_spec(seed_atom=i)` sets those relations' `rel_view` to OLD, which the
   shared kernels pass to `list_ranges` (the only place that reads a view). So a match whose edges
   change in the same batch is counted exactly once.
3. Each delta query runs on BiGJoin's pipelined dataflow (`dataflow`), all of a batch's queries
   multiplexed into one Spark job (`DataflowGroup`, the index update its prelude), each within an
   equal share of the memory budget. What a share's windows leave queued runs in further jobs, each
   query from the level BiGJoin's rule picks, so no job holds more than the budget however large the
   batch (the paper's bound assumes batches of B').
4. The change of the count is the sum of the delta queries' counts, each with its sign.

Without an update stream (ctx.stream), `count()` starts from the empty graph and inserts the dataset's
edges in `self_check_batches` batches, so the count it returns is built entirely from delta queries."""

from __future__ import annotations

import os
import shutil
import uuid
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import NamedTuple

import numpy as np
from pyspark.sql import functions as F

from harness.core import store
from harness.core.errors import DataError
from harness.core.query import default_attribute_order, in_query_order
from harness.data import updates
from implementations.base import BatchOutcome, Outcome, Param
from implementations.bigjoin import Batches, BiGJoin, Counters, next_level
from implementations.delta_sharing import SharedRun, share_tree
from implementations.extension.dataflow import TAG_STRIDE, DataflowGroup, DataflowJob, WorkerStage, full_mask
from implementations.extension.dataflow_kernels import extend_rows
from implementations.extension.stage import F as FIELD
from implementations.gj.budget import Budget
from implementations.gj.constants import FORWARD, INT32_MAX, REVERSE
from implementations.gj.extension_kernels import filter_candidates
from implementations.gj.keys import partition_of
from implementations.gj.plan import ExtensionPlan
from implementations.indices import versioned_index

F_GROUP, F_COUNTED, F_PROPOSALS = FIELD["group"], FIELD["counted"], FIELD["proposals"]

DEFAULT_COMPACT_RATIO = 0.05  # compact when the overlays hold this share of the base's entries
DEFAULT_SELF_CHECK_BATCHES = 2


@dataclass(kw_only=True)
class DeltaFlow(DataflowJob):
    """One delta query's share of a Spark job: BiGJoin's dataflow on a view of the versioned index,
    its first job seeded at level 1 from the batch's net changes of one sign."""

    view: tuple[int, int] = (0, 0)  # (base, overlay) versions of the multi-version index
    seeds: str | None = None  # directory of the batch's net changes: start at level 1 from them
    sign: int = 1  # which changes seed this extension: insertions (+1) or deletions (-1)
    undirected: bool = False
    # A shared run (`delta_sharing`): its last level, and the (tag, level mask) of each run that
    # continues from it in the same job; a continuation is `attached` at its parent's last level,
    # whose new prefixes it counts with its own plan.
    last: int | None = None
    children: tuple[tuple[int, int], ...] = ()
    attached: bool = False
    # Seeds at their proposer (beyond the paper): each change is seeded at the owner of the endpoint
    # whose list the base degrees say is the smallest at level 2, so no seed crosses the exchange
    # before Propose. Off: the paper's Count of every level-2 relation, then the move to the proposer.
    seed_by_degree: bool = False
    degree_base: int = 0  # the base whose degrees guide the seeds: complete before the batch (not one it compacts into)

    def load_index(self, p: int):
        return versioned_index.load_view(self.index_root, p, *self.view)

    @property
    def levels(self) -> range:
        return range(self.first, self.plan.m if self.last is None else self.last + 1)

    @property
    def seeded(self) -> bool:
        return self.seeds is not None and self.first == 1

    def level_hops(self, level: int) -> int:
        if not ((self.seeded or self.attached) and level == 1):
            return super().level_hops(level)
        if self.by_degree:  # a seed's level-2 prefix is born at its proposer
            return 0
        # A seed starts at the owner of its first attribute, which keys every relation binding the
        # second: it needs no Intersect hop, only level 2's Count and the move to its proposer.
        others = self.workers - 1
        return min(int(self.plan.rel_count[2]), others) + min(1, others) if self.plan.m > 2 else 0

    def start_level(self, worker: WorkerStage, level: int) -> None:
        if self.seeded and level == 1:
            self.seed_changes(worker)
        elif not (self.attached and level == self.first):  # an attached level's prefixes come from the parent
            super().start_level(worker, level)

    def finish(self, worker: WorkerStage, level: int, rows: np.ndarray, values: np.ndarray, take: np.ndarray) -> None:
        """At a shared run's last level, each new prefix goes to every run that continues from it."""
        if level != self.levels[-1] or not self.children:
            super().finish(worker, level, rows, values, take)
            return
        worker.add(level, "produced", int(rows[take, level + 1].sum()))
        for tag, mask in self.children:
            with worker.clock(level, "kernel_us"):
                new = extend_rows(rows, values, level, take, mask)
            worker.siblings[tag].prefixes(level, new)

    @property
    def by_degree(self) -> bool:
        """Seeds at their proposers, where it applies: a level 2 to propose for, and no relation or
        anti-relation besides the seed atom binding the second attribute (the paper's path intersects
        or subtracts it)."""
        return self.seed_by_degree and self.plan.m > 2 and self.plan.rel_count[1] == 0 and self.plan.anti_count[1] == 0

    def seed_changes(self, worker: WorkerStage) -> None:
        """The batch's net changes of this sign keyed here, as level-1 candidates (x; y)."""
        assert self.seeds is not None
        plan = self.plan
        with worker.clock(1, "io_us"):
            key, value, diff, kind = np.load(store.local_copy(os.path.join(self.seeds, f"p{worker.p}.npy")))
        if self.by_degree:
            self.seed_at_proposers(worker, key, value, diff, kind)
            return
        # Undirected, the relation is symmetric and each change binds the atom both ways round (as its
        # forward and its reverse entry); directed, the atom reads the forward entries.
        chosen = (diff == self.sign) & ((kind == 0) | self.undirected)
        x, y = key[chosen].astype(np.int32).reshape(-1, 1), value[chosen].astype(np.int32)
        keep = filter_candidates(1, x, np.arange(len(x)), y, plan.above, plan.below, plan.differ, False, worker.loops)
        keep &= plan.carries_label(0, x[:, 0]) & plan.carries_label(1, y)
        x, y = x[keep, 0], np.ascontiguousarray(y[keep])
        worker.add(1, "proposals", len(y))
        rows = np.empty((len(x), 3), np.int32)
        pending = (1 << int(plan.rel_count[1] + plan.anti_count[1])) - 1  # candidates: relations and anti-relations
        rows[:, 0], rows[:, 1], rows[:, 2] = x, pending, 1
        if plan.rel_count[1] or plan.anti_count[1]:  # a relation or anti-relation besides the seed atom: all keyed here
            worker.candidates(1, rows, y)
        else:
            worker.route_candidates(1, rows, y, 0)

    def seed_at_proposers(self, worker: WorkerStage, key, value, diff, kind) -> None:
        """Every change of this sign has a copy at the owner of each endpoint (its forward entry at one,
        its reverse entry at the other). Each seed (x, y) is taken by the copy at the owner of the
        endpoint that keys its smallest level-2 list by the base degrees, counted there against the
        level-2 relations keyed here, and queued there; a run shared by several delta queries does
        this for each query that continues from it."""
        plan, mine = self.plan, diff == self.sign
        key, value, kind = key[mine].astype(np.int32), value[mine].astype(np.int32), kind[mine]
        if self.undirected:  # each entry binds the atom both ways round: (key, value) and (value, key)
            x, y = np.concatenate([key, value]), np.concatenate([value, key])
            side = np.repeat(np.array([0, 1], np.int8), len(key))  # which of x, y this copy's key is
        else:  # a forward entry is (x, y) keyed by x, a reverse entry (y, x) keyed by y
            forward = kind == 0
            x, y, side = np.where(forward, key, value), np.where(forward, value, key), np.where(forward, 0, 1).astype(np.int8)
        keep = filter_candidates(
            1, x.reshape(-1, 1), np.arange(len(x)), y, plan.above, plan.below, plan.differ, False, worker.loops
        )
        keep &= plan.carries_label(0, x) & plan.carries_label(1, y)
        x, y, side = x[keep], y[keep], side[keep]
        worker.add(1, "proposals", int((side == 0).sum()))  # each seed once
        degrees = versioned_index.base_degrees(self.index_root, self.degree_base, self.workers)
        if self.levels[-1] == 1:  # a run of the seeds alone: its new prefixes are its children's
            targets = [(worker.siblings[tag], mask) for tag, mask in self.children]
        else:
            targets = [(worker, full_mask(plan, 2))]
        for target, mask in targets:
            with worker.clock(1, "kernel_us"):
                rows = _seeds_at_proposer(target.job.plan, x, y, side, worker.p, self.workers, degrees, mask)
            target.prefixes(1, rows)


class DeltaBiGJoin(BiGJoin):
    name = "delta-bigjoin"
    kernels = frozenset({"bigjoin", "one-level"})
    description = "Delta-BiGJoin: BiGJoin's counts maintained under edge update batches by delta queries"
    maintains_updates = True
    anti_edges = True
    # Labels filter the seeds at their two positions (`ExtensionPlan.carries_label`) and every later level's
    # proposals, as in BiGJoin; the versioned index ranks every vertex the updates mention up front.
    vertex_labels = True
    writes_matches = False  # counts kept current under updates; a listing of one state is not what it is for
    dataflow_class = DeltaFlow  # count() of the initial graph: BiGJoin's dataflow on the current view
    params = BiGJoin.params[:2] + (  # --memory-budget, --batch
        Param("changes", int, 0, "with --updates: record up to N changed matches per batch"),
        Param(
            "compact_ratio",
            float,
            DEFAULT_COMPACT_RATIO,
            "compact the versioned index when its overlays hold this share of the base's entries",
        ),
        Param(
            "share_prefixes",
            bool,
            True,
            "compute the prefixes that several delta queries share once (delta_sharing; off: the paper's dataflows)",
        ),
        Param(
            "seed_by_degree",
            bool,
            True,
            "seed each change at the endpoint whose level-2 list the base degrees say is smallest (off: the paper's Count)",
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
        loops = [f"{x}-{y}" for x, y in query.edges if x == y] + [f"!{x}-{y}" for x, y in ctx.spec.anti if x == y]
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
        self.memory = self.choose_budget()
        self.plan_deltas()
        if ctx.spec.query.labels:
            for plan in (self.plan, *self.delta_plans):
                plan.rank_labels(self.index.ids, *ctx.graph.label_arrays())

    def plan_deltas(self) -> None:
        """One delta query per query edge and per anti pair, each with the attribute order that starts
        at its pair. An anti pair's relation (no edge) changes by the negated change of the edges, so
        its delta query counts with the opposite sign (`polarity`)."""
        spec = self.ctx.spec
        self.compact_ratio = self.param("compact_ratio")
        self.change_limit = self.param("changes")
        self.delta_plans, self.delta_orders, self.polarity = [], [], []
        seeds = [(pair, 1) for pair in spec.query.edges] + [(pair, -1) for pair in spec.anti]
        for i, ((x, y), polarity) in enumerate(seeds):
            order = default_attribute_order(spec.query, start=(x, y))
            # The order constraints do not depend on the order; an anti pair's seed binds its second
            # attribute, which no edge joins to the first.
            self.delta_plans.append(ExtensionPlan.from_spec(replace(spec, attribute_order=order), seed_atom=i))
            self.delta_orders.append(order)
            self.polarity.append(polarity)
        roots = share_tree(self.delta_plans, self.param("share_prefixes"))
        self.runs: list[RunSlot] = []  # per sign, every run, parents first
        for sign in (1, -1):
            for root in roots:
                parent_of: dict[int, int] = {}
                for run in root.walk():
                    parent_of.update({id(child): len(self.runs) for child in run.children})
                    self.runs.append(RunSlot(sign, run, parent_of.get(id(run)), []))
        for e, slot in enumerate(self.runs):
            if slot.parent is not None:
                self.runs[slot.parent].children.append(e)

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
        """Apply the batch to the index and run its delta queries (`_run_batch`); the count changes by
        the sum of their counts, each with its sign (a leaf run counts once for each of its queries)."""
        index = self.index
        compact = index.version > 0 and index.overlay_share() > self.compact_ratio
        update = versioned_index.begin_batch(index, batch, compact)
        self._sample = None  # matches() must look at the current graph
        run = self._run_batch(update)
        applied = _applied(run.applied)
        delta = sum(slot.sign * sum(self.polarity[q] for q in slot.run.queries) * n for slot, n in zip(self.runs, run.counted))
        report = run.counters.report(index, self.budget_fields(), False)
        changes, truncated = None, False
        if self.change_limit:
            queries, rows = [], []
            for slot, found in zip(self.runs, run.found):
                if not slot.children:  # a leaf's matches are each of its queries' (in that query's order)
                    part = np.concatenate(found) if found else np.zeros((0, self.plan.m), np.int32)
                    queries += [(q, slot.sign * self.polarity[q]) for q in slot.run.queries]
                    rows += [part] * len(slot.run.queries)
            changes, truncated = self._net_changes(queries, rows)
        assert run.first_share is not None  # the first job always runs
        report.update(
            delta_queries=2 * len(self.delta_plans),
            budget_share_per_run=run.first_share.describe(),
            **self._sharing_report(run.proposals),
        )
        return BatchOutcome(delta, run.counters.count, report, changes, truncated, applied={**applied, "compacted": compact})

    def _sharing_report(self, proposals: list[int]) -> dict:
        """The runs several delta queries share, and the proposals each saves (those its other queries
        would each have made again)."""
        shared = [
            {
                "sign": slot.sign,
                "delta_queries": [f"dQ{q + 1}" for q in slot.run.queries],
                "levels": [slot.run.first, slot.run.last],
                "proposals": n,
                "proposals_saved": n * (len(slot.run.queries) - 1),
            }
            for slot, n in zip(self.runs, proposals)
            if len(slot.run.queries) > 1
        ]
        return {"shared_runs": shared, "proposals_saved_by_sharing": sum(r["proposals_saved"] for r in shared)}

    def _run_batch(self, update: versioned_index.BatchUpdate) -> _BatchRun:
        """The batch's first Spark job applies it to the index (its prelude) and starts every root run
        (both signs: the driver learns which the batch needs only from the update) at level 1; further
        jobs extend what the budget left queued, each run from the level BiGJoin's rule picks, with the
        runs that continue from it attached."""
        index, m = self.index, self.plan.m
        queues = [Batches(m, self.ctx.workers, {}) for _ in self.runs]
        common = {
            "index_root": str(index.root),
            "workers": self.ctx.workers,
            "tokens": self.routing_tokens(),
            "run_dir": str(index.root / f"run-{uuid.uuid4().hex[:8]}"),
            "match_limit": self.change_limit + 1 if self.change_limit else 0,
            "view": index.view,
            "undirected": index.undirected,
            "degree_base": update.old_base,
        }
        run = _BatchRun(Counters(m), [0] * len(self.runs), [[] for _ in self.runs], [0] * len(self.runs))
        seeds, job_id = versioned_index.seeds_dir(index.root, index.version), 0
        active = self._next_runs(queues, seeded=True)
        try:
            while active:
                share = self.memory.share(len(active))
                flows: dict[int, DeltaFlow] = {}
                for e, level in active.items():  # parents first: a continuation starts where its parent ends
                    flows[e] = self._flow(e, level, queues[e], share, common, job_id, flows, seeds)
                group = DataflowGroup(list(flows.values()), update.prelude if job_id == 0 else None)
                result = self.execute(group)
                if job_id == 0:
                    run.applied, run.first_share = update.finish(result.reports), share
                run.counters.add(group, result, sum(q.queued_prefixes() for q in queues))
                for e, flow in flows.items():
                    mine = result.stats[:, F_GROUP] // TAG_STRIDE == e
                    run.counted[e] += int(result.stats[mine, F_COUNTED].sum())
                    run.proposals[e] += int(result.stats[mine, F_PROPOSALS].sum())
                    _fold(flow, result, queues[e], run.found[e])
                job_id += 1
                active = self._next_runs(queues)
        finally:
            shutil.rmtree(common["run_dir"], ignore_errors=True)
        return run

    def _next_runs(self, queues: list[Batches], seeded: bool = False) -> dict[int, int]:
        """The runs of the next job and the level each starts at: the roots at level 1 (`seeded`, the
        batch's first job), else every run with queued work, from the level BiGJoin's rule picks; and
        every run that continues from one of those, attached."""
        active: dict[int, int] = {}
        for e, slot in enumerate(self.runs):
            if slot.parent is not None and slot.parent in active:
                active[e] = slot.run.first - 1
            elif seeded and slot.parent is None:
                active[e] = 1
            elif (level := next_level(queues[e])) is not None:
                active[e] = level
        return active

    def _flow(self, e: int, level: int, queue: Batches, share: Budget, common: dict, job_id: int, flows: dict, seeds: str):
        """Run `e`'s part of one Spark job, from `level`: seeded from the batch's changes (a root in the
        batch's first job), attached to its parent's last level, or from its own queue."""
        slot = self.runs[e]
        plan = self.delta_plans[slot.run.queries[0]]  # the run's queries agree on its levels
        attached = slot.parent in flows and level == slot.run.first - 1
        children = tuple(
            (c * TAG_STRIDE, full_mask(self.delta_plans[self.runs[c].run.queries[0]], slot.run.last + 1)) for c in slot.children
        )
        queue.budget = {j: share.proposals(j) for j in range(self.plan.m)}  # BiGJoin's rule reads B'
        return DeltaFlow(
            plan=plan,
            budget=share,
            first=level,
            queues={j: queue.queues[j] for j in range(2, self.plan.m)},
            consumed={j: queue.consumed[j] for j in range(2, self.plan.m)},
            job_id=job_id,
            tag=e * TAG_STRIDE,
            start_stage=flows[slot.parent].offsets[level] if attached else 0,
            seeds=seeds if job_id == 0 and slot.parent is None else None,
            sign=slot.sign,
            last=slot.run.last,
            children=children,
            attached=attached,
            seed_by_degree=self.param("seed_by_degree"),
            **{**common, "run_dir": os.path.join(common["run_dir"], f"r{e}")},
        )

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


class RunSlot(NamedTuple):
    """A shared run of one sign's delta queries, its parent's slot (None for a root, seeded) and the
    slots of the runs that continue from it."""

    sign: int
    run: SharedRun
    parent: int | None
    children: list[int]


@dataclass
class _BatchRun:
    """What one batch's jobs found, per run: matches counted, proposals made and changes sampled;
    the update's per-worker counters and the budget share of the first job."""

    counters: Counters
    counted: list[int]
    found: list[list[np.ndarray]]
    proposals: list[int]
    applied: np.ndarray = field(default_factory=lambda: np.zeros((0, len(versioned_index.UPDATE_FIELDS)), np.int64))
    first_share: Budget | None = None


def _seeds_at_proposer(plan: ExtensionPlan, x, y, side, p: int, workers: int, degrees, mask: int) -> np.ndarray:
    """The 2-prefix rows (x, y, mask, min_rel, min_count) of the seeds whose smallest level-2 list (by
    the base degrees, ties to the lower relation) is keyed by the endpoint this copy is keyed by
    (`side`), with only the relations keyed here left to count: the others were judged larger."""
    relations = int(plan.rel_count[2])
    estimate = np.zeros((len(x), relations), np.int64)
    owned = np.zeros((len(x), relations), np.bool_)
    for r in range(relations):
        k = x if plan.rel_pos[2, r] == 0 else y
        f, b = (_degree(table, k) for table in degrees)
        kind = plan.rel_kind[2, r]
        estimate[:, r] = f if kind == FORWARD else b if kind == REVERSE else f + b
        owned[:, r] = partition_of(k, workers) == p
    chosen = plan.rel_pos[2, estimate.argmin(axis=1)] == side
    rows = np.empty((int(chosen.sum()), 5), np.int32)
    rows[:, 0], rows[:, 1], rows[:, 3], rows[:, 4] = x[chosen], y[chosen], -1, INT32_MAX
    rows[:, 2] = (owned[chosen] * (1 << np.arange(relations))).sum(axis=1) & mask
    return rows


def _degree(table: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """table[k] of each key, 0 past its end (a vertex the base does not hold)."""
    out = np.zeros(len(keys), np.int64)
    inside = keys < len(table)
    out[inside] = table[keys[inside]]
    return out


def _applied(per_worker: np.ndarray) -> dict:
    """The update's counters summed over workers; its times as the slowest worker's, in seconds."""
    out: dict = {}
    for name, total, slowest in zip(versioned_index.UPDATE_FIELDS, per_worker.sum(axis=0), per_worker.max(axis=0, initial=0)):
        if name.endswith("_us"):
            out[name[:-3] + "_s"] = round(int(slowest) / 1e6, 4)
        else:
            out[name] = int(total)
    return out


def _fold(job: DeltaFlow, result, queue: Batches, found: list[np.ndarray]) -> None:
    """Fold one run's part of a job's result into its queues (what each level queued for the next,
    then what each level took) and keep its sampled changes."""
    m, workers = job.plan.m, job.workers
    for j in job.levels:
        if j + 1 < m:
            queue.add(j + 1, result.chunks(job.tag + j))
        if j >= 2:
            queue.advance(j, result.taken(job.tag + j, workers))
    if job.tag in result.matches:  # sampled at the last level, under the run's tag
        found.append(result.matches[job.tag])


__all__ = ["DeltaBiGJoin", "DeltaFlow"]
