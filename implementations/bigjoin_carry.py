"""`bigjoin-carry`: BiGJoin whose prefixes carry the part of their parent's candidate set that the next
level reuses. Beyond the paper: §3.2's prefixes travel without their parent's candidates, so a
4-clique's prefix (a1, a2, a3) counts, proposes and intersects a3's lists afresh; here it starts from
C = N(a1) ∩ N(a2) above a3, which its parent already computed, and needs one intersection,
C ∩ N(a3), at a3's owner.

Where it applies (`CarryPlan`): level L carries when every relation binding a_(L-1) also binds a_L,
keyed by the same attribute in the same direction, a_(L-1)'s lower bounds hold at a_L, and a_(L-1)'s
candidates are exactly its lists' intersection within its lower bounds (no upper bound, inequality or
self-loop filter nor vertex label cut them): `local_gj.level_plan`'s carry, the rule local-gj uses,
plus that last condition. Then the candidate set C of a finished (L-1)-prefix p is complete at one worker, and its
members c go, grouped by destination, as families (p, C, members) to the owners of their first
extra relation's key (bigjoin-carry's only new exchange), where they queue as prefixes do. A level
that does not carry runs BiGJoin's Count and Propose, so every query runs, and a query with no
carried level runs BiGJoin's dataflow exactly.

Cost. A family ships C once to each destination, so a carried level moves at most W·|C| + |C|
values per parent where BiGJoin proposes one list per member; what a member starts from is C above
it, never a fresh list. Memory: a family's expansion work (the carried values it can produce) counts
against the budget like proposals, and C itself like a prefix row's bytes; the parent's set C is
never cut (the level before a carried one takes whole prefixes per window), so a batch may exceed the
budget by at most one candidate set, at most the largest list of the index."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.core import store
from implementations.bigjoin import BiGJoin
from implementations.carry_kernels import expand_families, family_window, make_families
from implementations.extension.dataflow import DataflowJob, WorkerStage, checks, map_chunk
from implementations.gj.exchange import BlobKind
from implementations.gj.plan import ExtensionPlan
from implementations.local_gj import level_plan


@dataclass(frozen=True)
class CarryPlan:
    """Per level L: whether it carries its parent's candidates, and its extra lookups still to apply:
    relations to intersect and anti-relations to subtract (a mask over the level's `Lookups`)."""

    carried: np.ndarray  # (m,) bool
    extra_mask: np.ndarray  # (m,) int64
    extra_count: np.ndarray  # (m,) int64

    @classmethod
    def of(cls, plan: ExtensionPlan) -> CarryPlan:
        carry, extra, extra_count, checked = level_plan(
            plan.rel_count, plan.rel_pos, plan.rel_kind, plan.above, plan.below, plan.differ, plan.loop
        )
        carried = np.zeros(plan.m, dtype=np.bool_)
        masks = np.zeros(plan.m, dtype=np.int64)
        counts = np.zeros(plan.m, dtype=np.int64)
        for level in range(2, plan.m):
            inherits = _anti_of(plan, level - 1) <= _anti_of(plan, level)
            unlabelled = plan.label[level - 1] < 0  # a label filter cut the parent's set: it is not a_L's
            carried[level] = bool(carry[level]) and not bool(checked[level - 1]) and inherits and unlabelled
        for level in map(int, np.flatnonzero(carried)):
            relations = [int(r) for r in extra[level, : extra_count[level]]]
            inherited = _anti_of(plan, level - 1)  # already subtracted from the parent's set
            anti = [a for a in range(int(plan.anti_count[level])) if _anti(plan, level, a) not in inherited]
            masks[level] = sum(1 << r for r in relations) | sum(1 << (int(plan.rel_count[level]) + a) for a in anti)
            counts[level] = len(relations) + len(anti)
        return cls(carried, masks, counts)

    def describe(self) -> dict:
        return {"carried_levels": [int(level) for level in np.flatnonzero(self.carried)]}


def _anti(plan: ExtensionPlan, level: int, a: int) -> tuple[int, int]:
    return int(plan.anti_pos[level, a]), int(plan.anti_kind[level, a])


def _anti_of(plan: ExtensionPlan, level: int) -> set[tuple[int, int]]:
    """A level's anti-relations as (key position, kind). A parent's candidate set, stripped of its
    level's, is carried only where the next level has the same ones (else it would lack values)."""
    return {_anti(plan, level, a) for a in range(int(plan.anti_count[level]))}


@dataclass(kw_only=True)
class CarryJob(DataflowJob):
    carry: CarryPlan
    counts_last = False  # a carried last level is narrowed by the carry kernels, which hold its values

    def level_hops(self, level: int) -> int:
        """A carried level's items start at the owner of their first extra relation, so they need
        one hop fewer than its extra relations, and a level before a carried one ships families
        (one hop) instead of counting and routing prefixes."""
        if level == 0:
            return 0
        plan, others, carried = self.plan, self.workers - 1, self.carry.carried
        extra = int(self.carry.extra_count[level]) - 1  # a carried level's items start at its first extra lookup
        n = max(0, min(extra if carried[level] else checks(plan, level), others))
        if level + 1 < plan.m:
            if carried[level + 1]:
                n += min(1, others) if self.carry.extra_count[level + 1] else 0
            else:
                n += min(int(plan.rel_count[level + 1]), others) + min(1, others)
        return n

    def whole_items(self, level: int) -> bool:
        return level + 1 < self.plan.m and bool(self.carry.carried[level + 1]) and not self.carry.carried[level]

    def queue_kind(self, level: int) -> int:
        return BlobKind.FAMILIES if self.carry.carried[level] else BlobKind.PREFIXES

    def work_column(self, level: int) -> int:
        return level + 1 if self.carry.carried[level] else level + 2

    def finish(self, worker: WorkerStage, level: int, rows: np.ndarray, values: np.ndarray, take: np.ndarray) -> None:
        """bigjoin-carry's difference: before a carried level, a complete candidate set becomes
        families for the members' first extra relations' owners."""
        nxt = level + 1
        if nxt == self.plan.m or not self.carry.carried[nxt]:
            super().finish(worker, level, rows, values, take)
            return
        worker.add(level, "produced", int(rows[take, level + 1].sum()))
        with worker.clock(level, "kernel_us"):
            families, segments, dest = make_families(
                worker.p, self.workers, level, rows, values, take, int(self.carry.extra_mask[nxt]), self.lookup_pos,
                bool(self.plan.above[nxt, level]),
            )  # fmt: skip
        mine = dest == worker.p
        if mine.any():
            worker.arrive(nxt, families[mine], segments[np.repeat(mine, families[:, level + 3])])
            dest[mine] = -1
        worker.send(BlobKind.FAMILIES, level, nxt, families, segments, level + 3, dest)

    def start_level(self, worker: WorkerStage, level: int) -> None:
        if not self.carry.carried[level]:
            super().start_level(worker, level)
            return
        for rows, seg, first, last, start in self.family_windows(worker, level):
            plan = self.plan
            with worker.clock(level, "kernel_us"):
                cand, values, proposals, probes, counted = expand_families(
                    worker.p, self.workers, worker.ix, worker.loops, level, rows, seg, start, first, last,
                    int(self.carry.extra_mask[level]), plan.kernel, worker.keep_done(level),
                )  # fmt: skip
            worker.add(level, "proposals", proposals)
            worker.add(level, "probes", probes)
            worker.route_candidates(level, cand, values, counted)

    def family_windows(self, worker: WorkerStage, level: int):
        """(rows, segments, first member, last member, segment start) per queue chunk the window
        reaches: whole members, from where earlier jobs stopped, within the budget."""
        budget = self.budget
        skip = self.consumed.get(level, [0] * self.workers)[worker.p]
        counts_bytes = budget.batch is None
        room = budget.bytes if counts_bytes else budget.batch
        per_row, per_value = (budget.row_bytes(level), budget.proposal_bytes(level)) if counts_bytes else (0, 1)
        after = bool(self.plan.above[level, level - 1])
        at, taken = 0, 0
        for path, work in worker.queue_files(level):
            if work is not None and at + work <= skip:
                at += work
                continue
            with worker.clock(level, "io_us"):
                rows, seg, chunk = map_chunk(path)
                first, last, start, got, room = family_window(
                    rows, seg, level, max(0, skip - at), room, per_row, per_value, counts_bytes, after, taken > 0
                )
            total = chunk.work
            if got:
                taken += got
                yield rows, seg, first, last, start
            if at + total <= skip + taken:
                store.drop_local(path)  # used up: a re-executed task reads the store's copy
            at += total
            if room <= 0 or at > skip + taken:  # the window ended inside this chunk
                break
        worker.add(level, "taken_work", taken)


class BiGJoinCarry(BiGJoin):
    name = "bigjoin-carry"
    kernels = frozenset({"bigjoin", "bigjoin-carry"})  # its warm-up after BiGJoin's, whose kernels it calls too
    description = "BiGJoin whose prefixes carry their parent's candidate set where the next level reuses it (beyond the paper)"
    dataflow_class = CarryJob
    vertex_labels = True  # a carried level filters its family's set by label; a labelled level's set is not carried

    def job_args(self) -> dict:
        return {"carry": CarryPlan.of(self.plan)}

    def budget_fields(self) -> dict:
        return {**super().budget_fields(), **CarryPlan.of(self.plan).describe()}


__all__ = ["BiGJoinCarry", "CarryJob", "CarryPlan"]
