"""The Generic Join plan of a JoinSpec: for each attribute position, the relations that bind it (which
earlier position is the lookup key, and which index answers it) and the filters on its values.
One plan serves `local-gj` and every BiGJoin variant."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from harness.core.errors import DataError
from harness.core.query import JoinSpec
from implementations.gj.constants import BOTH, CURRENT, FORWARD, OLD, REVERSE


class KernelPlan(NamedTuple):
    """The plan's arrays as the dataflow kernels take them: one argument instead of eight."""

    rel_count: np.ndarray
    rel_pos: np.ndarray
    rel_kind: np.ndarray
    rel_view: np.ndarray
    above: np.ndarray
    below: np.ndarray
    differ: np.ndarray
    loop: np.ndarray
    anti_count: np.ndarray
    anti_pos: np.ndarray
    anti_kind: np.ndarray
    anti_view: np.ndarray
    label: np.ndarray
    vertex_label: np.ndarray


@dataclass
class ExtensionPlan:
    m: int
    rel_count: np.ndarray  # (m,) relations binding position j
    rel_pos: np.ndarray  # (m, R) the earlier position holding each relation's key
    rel_kind: np.ndarray  # (m, R) FORWARD / REVERSE / BOTH
    rel_view: np.ndarray  # (m, R) the index view it reads: CURRENT, or OLD (Delta-BiGJoin's later atoms)
    above: np.ndarray  # (m, m) value at j must be > value at p
    below: np.ndarray  # (m, m) value at j must be < value at p
    differ: np.ndarray  # (m, m) value at j must differ from value at p
    loop: np.ndarray  # (m,) value at j needs a self-loop
    # The query's non-loop relations as (early position, late position, kind): each is read only at
    # its late position, keyed by its early one. rel_atom[j, r] names the relation behind rel_*[j, r].
    atoms: list[tuple[int, int, int]]
    rel_atom: np.ndarray  # (m, R)
    # Anti-relations (JoinSpec.anti), read like relations at their late position: a candidate at j
    # survives only if it is absent from the list of anti_kind keyed by the value at anti_pos[j, r].
    anti_count: np.ndarray  # (m,)
    anti_pos: np.ndarray  # (m, A)
    anti_kind: np.ndarray  # (m, A)
    anti_view: np.ndarray  # (m, A) CURRENT, or OLD (a delta query's anti-atoms after its seed)
    # Vertex labels: the label position j's value must carry (-1: none), and the label of each vertex
    # rank (-1: none; empty for an unlabelled pattern), set by the implementation once its index ranks them.
    label: np.ndarray  # (m,)
    vertex_label: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    @classmethod
    def from_spec(cls, spec: JoinSpec, seed_atom: int | None = None) -> ExtensionPlan:
        """With `seed_atom` i, the plan of delta query dQ_i: atom i is left out (its changes seed the
        first two positions) and the atoms after it read the old version of the relation. Atoms are
        the query's edges, then its anti pairs (`JoinSpec.anti`): i >= len(edges) seeds anti pair
        i - len(edges), whose relation changes by the negated change of the edges."""
        order = spec.attribute_order
        m = len(order)
        at = {a: i for i, a in enumerate(order)}
        plan = cls(
            m=m,
            rel_count=np.zeros(m, dtype=np.int64),
            rel_pos=np.zeros((m, max(1, 2 * len(spec.query.edges))), dtype=np.int64),
            rel_kind=np.zeros((m, max(1, 2 * len(spec.query.edges))), dtype=np.int64),
            rel_view=np.full((m, max(1, 2 * len(spec.query.edges))), CURRENT, dtype=np.int64),
            above=np.zeros((m, m), dtype=np.bool_),
            below=np.zeros((m, m), dtype=np.bool_),
            differ=np.zeros((m, m), dtype=np.bool_),
            loop=np.zeros(m, dtype=np.bool_),
            atoms=[],
            rel_atom=np.zeros((m, max(1, 2 * len(spec.query.edges))), dtype=np.int64),
            anti_count=np.zeros(m, dtype=np.int64),
            anti_pos=np.zeros((m, max(1, len(spec.anti))), dtype=np.int64),
            anti_kind=np.zeros((m, max(1, len(spec.anti))), dtype=np.int64),
            anti_view=np.full((m, max(1, len(spec.anti))), CURRENT, dtype=np.int64),
            label=np.array([spec.query.label_of.get(a, -1) for a in order], dtype=np.int64),
        )
        for atom, (x, y) in enumerate(spec.query.edges):
            if atom == seed_atom:
                continue
            if x == y:
                plan.loop[at[x]] = True
                continue
            late, early = (y, x) if at[y] > at[x] else (x, y)
            j = at[late]
            kind = _read_kind(spec, early, late, y)
            r = plan.rel_count[j]
            plan.rel_pos[j, r], plan.rel_kind[j, r], plan.rel_atom[j, r] = at[early], kind, len(plan.atoms)
            if seed_atom is not None and atom > seed_atom:
                plan.rel_view[j, r] = OLD
            plan.rel_count[j] += 1
            plan.atoms.append((at[early], j, kind))
        plan._add_anti(spec, at, None if seed_atom is None else seed_atom - len(spec.query.edges))
        for lo, hi in spec.less_than:
            if at[hi] > at[lo]:
                plan.above[at[hi], at[lo]] = True
            else:
                plan.below[at[lo], at[hi]] = True
        for x, y in spec.distinct:
            late, early = (x, y) if at[x] > at[y] else (y, x)
            plan.differ[at[late], at[early]] = True
        return plan

    def _add_anti(self, spec: JoinSpec, at: dict[str, int], seed_anti: int | None) -> None:
        """Each anti pair at the later of its two positions, with the index kind a relation there would
        read. A delta query leaves out the anti pair it is seeded by (`seed_anti`, counted among the
        anti pairs; negative: an edge seeds it) and reads the anti pairs after its seed in the old view."""
        for i, (x, y) in enumerate(spec.anti):
            if i == seed_anti:
                continue
            late, early = (y, x) if at[y] > at[x] else (x, y)
            j = at[late]
            kind = _read_kind(spec, early, late, y)
            r = self.anti_count[j]
            self.anti_pos[j, r], self.anti_kind[j, r] = at[early], kind
            if seed_anti is not None and i > seed_anti:
                self.anti_view[j, r] = OLD
            self.anti_count[j] += 1

    @property
    def kernel(self) -> KernelPlan:
        """The arrays as one argument of the dataflow kernels."""
        return KernelPlan(
            self.rel_count, self.rel_pos, self.rel_kind, self.rel_view, self.above, self.below, self.differ, self.loop,
            self.anti_count, self.anti_pos, self.anti_kind, self.anti_view, self.label, self.vertex_label,
        )  # fmt: skip

    @property
    def last_from_one_list(self) -> bool:
        """Whether the last attribute is read from one list and tested only by `differ` and order:
        the dataflow counts it where it is proposed (`dataflow_kernels._count_static`)."""
        j = self.m - 1
        return j >= 1 and self.rel_count[j] == 1 and self.anti_count[j] == 0 and not self.loop[j] and self.label[j] < 0

    def rank_labels(self, ids: np.ndarray, vertices: np.ndarray, labels: np.ndarray) -> None:
        """`vertex_label` from the index's rank -> vertex id map and the label table (vertices sorted)."""
        if len(vertices) == 0:
            self.vertex_label = np.full(len(ids), -1, dtype=np.int64)
            return
        at = np.minimum(np.searchsorted(vertices, ids), len(vertices) - 1)
        self.vertex_label = np.where(vertices[at] == ids, labels[at], -1).astype(np.int64)

    def carries_label(self, level: int, ranks: np.ndarray) -> np.ndarray:
        """Which ranks carry the label position `level` requires (all of them if it requires none)."""
        if self.label[level] < 0:
            return np.ones(len(ranks), dtype=bool)
        return self.vertex_label[ranks] == self.label[level]

    def labelled(self, level: int, ranks: np.ndarray) -> np.ndarray:
        """The ranks that carry the label position `level` requires (all of them if it requires none)."""
        if self.label[level] < 0:
            return ranks
        return ranks[self.carries_label(level, ranks)]

    def require_connected_order(self, spec: JoinSpec) -> None:
        """Dataflow joins extend prefixes through relations: every position after the first needs one."""
        for j in range(1, self.m):
            if self.rel_count[j] == 0:
                raise DataError(
                    f"attribute order {','.join(spec.attribute_order)}: {spec.attribute_order[j]} "
                    "is bound by no relation to an earlier attribute (the query must be connected)"
                )
        if self.rel_count.max(initial=0) > 30:
            raise DataError("at most 30 relations may bind one attribute")


def _read_kind(spec: JoinSpec, early: str, late: str, dst: str) -> int:
    """The index that holds `late` among `early`'s neighbours for the pair (x, dst): directed, the
    out-list if late is the pair's dst, else the in-list; undirected, the smallest the order
    constraints allow."""
    if spec.semantics == "directed":
        return FORWARD if late == dst else REVERSE
    if spec.implies_less(early, late):
        return FORWARD
    if spec.implies_less(late, early):
        return REVERSE
    return BOTH
