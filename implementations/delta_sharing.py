"""Shared delta queries (beyond the paper; its §7 names the idea): delta queries whose first levels
are the same computation, computed once.

dQ_i's plan (`ExtensionPlan.from_spec(seed_atom=i)`) describes each level by position: which earlier
positions key its relations, their kinds, the views they read and the order constraints. Two delta
queries of the same sign whose plans agree on levels 1..J start from the same seeds and extend them
the same way, so they produce the same (J+1)-prefixes as tuples of positions, though each reads
those positions as its own attributes. The query's automorphisms are what make this happen: for the
4-clique, dQ2 (a1-a3) and dQ3 (a1-a4) agree up to level 2, as do dQ4, dQ5 and dQ6.

`share_tree` groups the delta queries into a tree of runs of levels: a run is computed once for all
its queries, then hands its prefixes to each child run (`DeltaFlow.children`). Queries that agree on
every level (an automorphism that fixes the whole plan) end in one leaf, whose count stands for each."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from implementations.gj.plan import ExtensionPlan


@dataclass
class SharedRun:
    """Levels first..last of the delta queries `queries` (atom numbers), computed once; `children`
    continue from last + 1. A leaf's last level is the plan's last, and it counts for every query."""

    queries: tuple[int, ...]
    first: int
    last: int
    children: list[SharedRun] = field(default_factory=list)

    def walk(self):
        """This run and every run below it, parents first."""
        yield self
        for child in self.children:
            yield from child.walk()


def level_key(plan: ExtensionPlan, level: int) -> bytes:
    """Everything the plan says about levels 1..`level` (with the seeds' constraints at level 1)."""
    rows = slice(0, level + 1)
    relations = (plan.rel_count, plan.rel_pos, plan.rel_kind, plan.rel_view, plan.loop, plan.label)
    anti = (plan.anti_count, plan.anti_pos, plan.anti_kind, plan.anti_view)
    arrays = tuple(a[rows] for a in relations + anti)
    square = (plan.above[rows, rows], plan.below[rows, rows], plan.differ[rows, rows])
    return b"|".join(np.ascontiguousarray(a).tobytes() for a in (*arrays, *square))


def share_tree(plans: list[ExtensionPlan], share: bool = True) -> list[SharedRun]:
    """The runs (roots, each seeded at level 1) that compute the delta queries of one sign. Without
    `share`, one run per query over all its levels: the paper's dataflows as published."""
    m = plans[0].m
    if not share:
        return [SharedRun((i,), 1, m - 1) for i in range(len(plans))]
    return [_run(plans, group, 1) for group in _groups(plans, range(len(plans)), 1)]


def _groups(plans: list[ExtensionPlan], queries, level: int) -> list[tuple[int, ...]]:
    found: dict[bytes, list[int]] = {}
    for q in queries:
        found.setdefault(level_key(plans[q], level), []).append(q)
    return [tuple(g) for g in found.values()]


def _run(plans: list[ExtensionPlan], queries: tuple[int, ...], first: int) -> SharedRun:
    """The run of `queries`, which agree on levels up to `first`, from `first` while they all agree."""
    m, last = plans[0].m, first
    while last + 1 < m and len(_groups(plans, queries, last + 1)) == 1:
        last += 1
    run = SharedRun(queries, first, last)
    if last + 1 < m:
        run.children = [_run(plans, group, last + 1) for group in _groups(plans, queries, last + 1)]
    return run
