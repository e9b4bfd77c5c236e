"""nested-loop: the plainest count there is, for tiny graphs only, and the worked example of
docs/adding-an-implementation.md.

The edge set is read to the driver, and each attribute of the join spec's order is bound in turn to
every vertex: a binding is kept only if every atom, order constraint, inequality and anti-edge (no
edge between the pair) among the attributes bound so far holds, each checked by a set lookup. Per-record Python, exponential in the
pattern's size: it refuses graphs of more than MAX_EDGES edges. An attribute with a vertex label loops
over the vertices of that label only (`ctx.graph.label_arrays()`)."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice
from typing import NamedTuple

from harness.core.errors import DataError
from harness.core.query import in_query_order
from implementations.base import Implementation, Outcome, RunCancelled

MAX_EDGES = 1000  # a pure-Python loop: beyond this a count takes minutes


class Check(NamedTuple):
    """One condition on two positions of the attribute order: an atom, an order constraint, an
    inequality or an anti-edge."""

    kind: str  # "edge", "less", "differ" or "anti"
    first: int
    second: int


class NestedLoop(Implementation):
    name = "nested-loop"
    description = f"toy: a plain nested loop over the vertices on the driver (graphs of up to {MAX_EDGES:,} edges)"
    runs_in_driver = True
    driver_edges = True  # the harness reads ctx.graph.edge_arrays() before prepare(), as driver_load_s
    max_edges = MAX_EDGES
    anti_edges = True  # an anti pair is one more check: the edge lookup negated
    vertex_labels = True  # a labelled attribute loops over the vertices of its label only

    def prepare(self) -> None:
        graph = self.ctx.graph
        if graph.edges > self.max_edges:
            raise DataError(
                f"nested-loop counts graphs of up to {self.max_edges:,} edges (a pure-Python loop); "
                f"{graph.name} has {graph.edges:,}"
            )
        src, dst = graph.edge_arrays()
        self.edges = set(zip(src.tolist(), dst.tolist()))
        self.vertices = sorted(set(src.tolist()) | set(dst.tolist()))
        self.checks = self._checks_by_position()
        self.candidates = self._candidates_by_position()

    def _candidates_by_position(self) -> list[list[int]]:
        """The vertices each position loops over: all of them, or those with the label its attribute requires."""
        spec = self.ctx.spec
        required = spec.query.label_of
        if not required:
            return [self.vertices] * len(spec.attribute_order)
        vertices, labels = self.ctx.graph.label_arrays()
        label = dict(zip(vertices.tolist(), labels.tolist()))
        return [
            self.vertices if a not in required else [v for v in self.vertices if label.get(v) == required[a]]
            for a in spec.attribute_order
        ]

    def _checks_by_position(self) -> list[list[Check]]:
        """For each position of the attribute order, the checks whose later attribute sits there."""
        spec = self.ctx.spec
        position = {a: i for i, a in enumerate(spec.attribute_order)}
        checks: list[list[Check]] = [[] for _ in spec.attribute_order]
        for kind, pairs in (("edge", spec.query.edges), ("less", spec.less_than), ("differ", spec.distinct), ("anti", spec.anti)):
            for x, y in pairs:
                checks[max(position[x], position[y])].append(Check(kind, position[x], position[y]))
        return checks

    def _holds(self, check: Check, values: list[int]) -> bool:
        u, v = values[check.first], values[check.second]
        if check.kind == "less":
            return u < v
        if check.kind == "differ":
            return u != v
        return self._joined(u, v) != (check.kind == "anti")

    def _joined(self, u: int, v: int) -> bool:
        """An edge u -> v (undirected: between u and v)."""
        if self.ctx.spec.semantics == "undirected":  # one canonical row (src < dst) per edge, no loops
            return (min(u, v), max(u, v)) in self.edges
        return (u, v) in self.edges

    def _bindings(self) -> Iterator[tuple[int, ...]]:
        """Every match, in attribute order; counts the vertices tried in self.tried."""
        size = len(self.ctx.spec.attribute_order)
        values = [0] * size

        def extend(level: int) -> Iterator[tuple[int, ...]]:
            for vertex in self.candidates[level]:
                if level == 0 and self.ctx.cancelled.is_set():  # the harness's deadline passed
                    raise RunCancelled(f"nested-loop stopped at vertex {vertex}")
                values[level] = vertex
                self.tried += 1
                if all(self._holds(check, values) for check in self.checks[level]):
                    if level + 1 == size:
                        yield tuple(values)
                    else:
                        yield from extend(level + 1)

        self.tried = 0
        return extend(0)

    def count(self) -> Outcome:
        count = sum(1 for _ in self._bindings())
        return Outcome(count=count, counters={"bindings_tried": self.tried})

    def matches(self, limit: int) -> list[tuple]:
        spec = self.ctx.spec
        return in_query_order(spec.query, spec.attribute_order, islice(self._bindings(), limit))
