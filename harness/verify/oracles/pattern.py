"""What an oracle knows of a query: its edges and the semantics, nothing more. The implementations'
symmetry-breaking constraints, attribute order and vertex ranking never reach an oracle, so a bug
in them cannot agree with itself. The pattern's shape (clique, triangle, 4-cycle) and its
automorphism count are worked out here, from the edges alone."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import cached_property

MAX_PERMUTED_ATTRIBUTES = 8  # |Aut| by trying every permutation up to here (40,320); networkx's matcher above
# The connected shapes on 3 and 4 vertices by their degree sequences (each sequence is one shape).
MOTIFS = {
    (2, 1, 1): "wedge",
    (2, 2, 2): "triangle",
    (3, 1, 1, 1): "star3",
    (2, 2, 1, 1): "path4",
    (3, 2, 2, 1): "tailed_triangle",
    (2, 2, 2, 2): "cycle4",
    (3, 3, 2, 2): "diamond",
    (3, 3, 3, 3): "clique4",
}


@dataclass(frozen=True)
class Pattern:
    """A conjunctive query over the edge relation: edges (x, y) between attribute names, under
    `undirected` (distinct subgraph instances of a simple graph) or `directed` (the plain join)
    semantics. Matches are reported in `attributes` order."""

    edges: tuple[tuple[str, str], ...]
    semantics: str
    attributes: tuple[str, ...] = ()
    # Pairs a match must not join by an edge (undirected: no edge either way; directed: none x -> y);
    # `induced`: every pair that is not an edge too. The oracle works out what that means itself.
    anti_edges: tuple[tuple[str, str], ...] = ()
    induced: bool = False
    # Vertex labels: (attribute, label) pairs, a match's value for the attribute must carry that label;
    # `labels_glob`, the graph's label table (Parquet, columns vertex and label). A vertex the table
    # does not list has no label and matches no labelled attribute.
    labels: tuple[tuple[str, int], ...] = ()
    labels_glob: str | None = None

    def __post_init__(self):
        if not self.attributes:
            object.__setattr__(self, "attributes", tuple(dict.fromkeys(a for e in self.edges + self.anti_edges for a in e)))

    @classmethod
    def of(cls, query, semantics: str, labels_glob: str | None = None) -> Pattern:
        """From anything with `edges` and `attributes` (a harness Query): those two, its `anti_edges`,
        `induced` and `labels` are read; `labels_glob` is where the graph's vertex labels are."""
        anti = tuple(tuple(e) for e in getattr(query, "anti_edges", ()))
        return cls(
            tuple(tuple(e) for e in query.edges),
            semantics,
            tuple(query.attributes),
            anti,
            bool(getattr(query, "induced", False)),
            tuple((a, int(label)) for a, label in getattr(query, "labels", ())),
            labels_glob,
        )

    @cached_property
    def label_of(self) -> dict[str, int]:
        """The label each labelled attribute requires."""
        return dict(self.labels)

    @property
    def has_anti(self) -> bool:
        return bool(self.anti_edges) or self.induced

    @cached_property
    def forbidden(self) -> frozenset:
        """The pairs a match must not join by an edge: undirected, frozensets (the anti-edges, and with
        `induced` every non-adjacent pair); directed, ordered (x, y) (with `induced` every ordered pair
        of distinct attributes that is not an atom)."""
        if self.undirected:
            listed = {frozenset(p) for p in self.anti_edges}
            if self.induced:
                listed |= {frozenset(p) for p in itertools.combinations(self.attributes, 2)} - self.pairs
            return frozenset(listed)
        ordered = set(self.anti_edges)
        if self.induced:
            ordered |= {(x, y) for x in self.attributes for y in self.attributes if x != y} - set(self.edges)
        return frozenset(ordered)

    @property
    def undirected(self) -> bool:
        return self.semantics == "undirected"

    @cached_property
    def pairs(self) -> frozenset:
        """The undirected edges between distinct attributes, as frozensets."""
        return frozenset(frozenset(e) for e in self.edges if e[0] != e[1])

    @cached_property
    def automorphisms(self) -> int:
        """|Aut|: permutations of the attributes that map the undirected edge set onto itself."""
        attrs = self.attributes
        if len(attrs) > MAX_PERMUTED_ATTRIBUTES:
            import networkx as nx
            from networkx.algorithms.isomorphism import GraphMatcher

            graph: nx.Graph[str] = nx.Graph()
            graph.add_nodes_from(attrs)
            graph.add_edges_from(tuple(p) for p in self.pairs)
            return sum(self.keeps_constraints(g) for g in GraphMatcher(graph, graph).isomorphisms_iter())
        pairs = [tuple(p) for p in self.pairs]
        found = 0
        for image in itertools.permutations(attrs):
            to = dict(zip(attrs, image))
            found += all(frozenset((to[x], to[y])) in self.pairs for x, y in pairs) and self.keeps_constraints(to)
        return found

    def keeps_constraints(self, to: dict) -> bool:
        """An automorphism of the edges is one of the pattern only if it maps the undirected
        forbidden pairs onto themselves and every attribute to one that requires the same label (or none)."""
        return all(frozenset(to[a] for a in p) in self.forbidden for p in self.forbidden) and all(
            self.label_of.get(a) == self.label_of.get(to[a]) for a in self.attributes
        )

    @cached_property
    def clique_size(self) -> int | None:
        """k if the pattern is the undirected k-clique (every pair of attributes joined by one edge)."""
        k = len(self.attributes)
        if not self.undirected or k < 2 or len(self.edges) != k * (k - 1) // 2 or len(self.pairs) != len(self.edges):
            return None
        return k

    @cached_property
    def is_triangle_shape(self) -> bool:
        """Three attributes, three edges, one between each pair (any directions), no self-loop."""
        return len(self.attributes) == 3 and len(self.edges) == 3 and len(self.pairs) == 3

    @cached_property
    def is_four_cycle(self) -> bool:
        """Undirected a-b-c-d-a (the paper's diamond)."""
        if not self.undirected or len(self.attributes) != 4 or len(self.edges) != 4 or len(self.pairs) != 4:
            return False
        degree = {a: sum(a in p for p in self.pairs) for a in self.attributes}
        return set(degree.values()) == {2} and self.connected

    @cached_property
    def is_house(self) -> bool:
        """Undirected: a 4-clique plus a fifth attribute joined to exactly two of its attributes."""
        if not self.undirected or len(self.attributes) != 5 or len(self.edges) != 8 or len(self.pairs) != 8:
            return False
        degree = {a: sum(a in p for p in self.pairs) for a in self.attributes}
        roof = [a for a in self.attributes if degree[a] == 2]
        if len(roof) != 1:
            return False
        base = [a for a in self.attributes if a != roof[0]]
        return all(frozenset((x, y)) in self.pairs for i, x in enumerate(base) for y in base[i + 1 :])

    @cached_property
    def motif(self) -> str | None:
        """The connected undirected shape on 3 or 4 attributes, named as in the published motif counts
        (wedge, triangle; star3, path4, tailed_triangle, cycle4, diamond = K4 minus an edge, clique4),
        read from the degrees of its edges; None for any other pattern."""
        k = len(self.attributes)
        if not self.undirected or k not in (3, 4) or any(x == y for x, y in self.edges) or not self.connected:
            return None
        degrees = tuple(sorted((sum(a in p for p in self.pairs) for a in self.attributes), reverse=True))
        return MOTIFS.get(degrees)

    @cached_property
    def induced_in_effect(self) -> bool:
        """Undirected, and every pair of attributes that is not an edge is forbidden (by `induced` or
        by anti-edges on all of them)."""
        every = {frozenset(p) for p in itertools.combinations(self.attributes, 2)}
        return self.undirected and self.forbidden == every - self.pairs

    @cached_property
    def connected(self) -> bool:
        seen, frontier = {self.attributes[0]}, [self.attributes[0]]
        while frontier:
            a = frontier.pop()
            for x, y in self.edges:
                for u, v in ((x, y), (y, x)):
                    if u == a and v not in seen:
                        seen.add(v)
                        frontier.append(v)
        return len(seen) == len(self.attributes)

    def join_order(self) -> tuple[str, ...]:
        """An order in which to bind the attributes: the most connected first, then always the one
        with the most edges to those already bound. A cost choice only; no count depends on it."""
        degree = {a: sum(a in p for p in self.pairs) for a in self.attributes}
        order = [max(self.attributes, key=lambda a: (degree[a], -self.attributes.index(a)))]
        while len(order) < len(self.attributes):
            rest = [a for a in self.attributes if a not in order]
            order.append(
                max(
                    rest,
                    key=lambda a: (sum(frozenset((a, b)) in self.pairs for b in order), degree[a], -self.attributes.index(a)),
                )
            )
        return tuple(order)

    def instance_key(self, match: tuple) -> tuple:
        """What identifies a result: the subgraph (its edge set) in undirected semantics, the tuple in directed."""
        if not self.undirected:
            return tuple(match)
        value = dict(zip(self.attributes, match))
        edges = tuple(sorted(tuple(sorted((value[x], value[y]))) for x, y in self.edges))
        if self.forbidden:  # matches on the same edges are different instances when their forbidden pairs differ
            edges += (tuple(sorted(tuple(sorted(value[a] for a in p)) for p in self.forbidden)),)
        if self.labels:  # or when their labelled vertices do
            edges += (tuple(sorted((value[a], label) for a, label in self.labels)),)
        return edges
