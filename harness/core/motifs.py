"""The motif census's shapes: every connected, unlabelled pattern on k = 3 or 4 vertices, as queries,
and the linear relation between their induced and non-induced counts.

A non-induced count N(H) counts the subgraph instances of H (edge sets isomorphic to H); an induced
count I(G) counts the k-vertex sets whose induced subgraph is G. Every instance of H on k vertices
lies in exactly one k-vertex set, whose induced shape G contains it, so N(H) = sum over G of
m(H, G) I(G), with m(H, G) the number of H's among the spanning subgraphs of G. m is triangular (G has
at least H's edges), so the induced counts follow from the non-induced ones by back-substitution,
densest shape first. The matrix is worked out here from the shapes' edges, not typed in."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from functools import cache

from harness.core.errors import DataError
from harness.core.query import Query

CENSUS_SIZES = (3, 4)
_CENSUS = re.compile(r"^\s*motifs\s*:(.*)$", re.IGNORECASE)


@dataclass(frozen=True)
class Motif:
    """One connected shape on k vertices a1..ak; `name` is GraphMiner's (published_counts.json)."""

    name: str
    label: str  # what the table calls it
    edges: tuple[tuple[str, str], ...]

    @property
    def attributes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(a for e in self.edges for a in e))

    @property
    def complete(self) -> bool:
        """Every pair joined: induced and non-induced are the same pattern (no anti-edge)."""
        k = len(self.attributes)
        return len(self.edges) == k * (k - 1) // 2

    def query(self, induced: bool) -> Query:
        """The motif as a query: vertex-induced (every non-edge an anti-edge) or not. A complete shape
        is the same query either way and stays a plain one, so the oracles and published counts of
        plain cliques check it."""
        return Query(self.name, self.edges, induced=induced and not self.complete)

    def dashes(self) -> str:
        """The pattern string (a1-a2,a1-a3,...)."""
        return ",".join(f"{x}-{y}" for x, y in self.edges)

    def short(self) -> str:
        """The edges in a table's width: 1-2 1-3 1-4."""
        return " ".join(f"{x[1:]}-{y[1:]}" for x, y in self.edges)


def _clique(k: int) -> tuple[tuple[str, str], ...]:
    return tuple((f"a{i}", f"a{j}") for i in range(1, k + 1) for j in range(i + 1, k + 1))


# In the order, sparsest first; a1 is the best-connected vertex of each, where plans start.
MOTIFS: dict[int, tuple[Motif, ...]] = {
    3: (
        Motif("wedge", "wedge", (("a1", "a2"), ("a1", "a3"))),
        Motif("triangle", "triangle", _clique(3)),
    ),
    4: (
        Motif("star3", "3-star", (("a1", "a2"), ("a1", "a3"), ("a1", "a4"))),
        Motif("path4", "4-path", (("a1", "a2"), ("a1", "a3"), ("a2", "a4"))),
        Motif("tailed_triangle", "tailed triangle", (("a1", "a2"), ("a1", "a3"), ("a2", "a3"), ("a1", "a4"))),
        Motif("cycle4", "4-cycle", (("a1", "a2"), ("a2", "a3"), ("a3", "a4"), ("a4", "a1"))),
        Motif("diamond", "diamond", (("a1", "a2"), ("a1", "a3"), ("a1", "a4"), ("a2", "a3"), ("a2", "a4"))),
        Motif("clique4", "4-clique", _clique(4)),
    ),
}


def parse(spec: object) -> int | None:
    """k for a census query (`motifs:3`, `motifs:4`), None for any other query; a census of another
    size is a DataError naming the value."""
    if not isinstance(spec, str):
        return None
    found = _CENSUS.match(spec)
    if found is None:
        return None
    value = found.group(1).strip()
    if not value.isdigit() or int(value) not in CENSUS_SIZES:
        sizes = " or ".join(f"motifs:{k}" for k in CENSUS_SIZES)
        raise DataError(f"query '{spec}': a motif census is {sizes} (vertices per pattern), got '{value}'")
    return int(value)


def motif_of(query: Query) -> Motif | None:
    """The census motif this query is (same name and edges, vertex-induced unless complete), else None."""
    for motif in itertools.chain.from_iterable(MOTIFS.values()):
        if query.name == motif.name and query == motif.query(True):
            return motif
    return None


def _canonical(edges: frozenset, k: int) -> frozenset:
    """An isomorphism-invariant form of a graph on vertices 0..k-1: its least relabelled edge list."""
    return min(
        (frozenset(frozenset(p[v] for v in e) for e in edges) for p in itertools.permutations(range(k))),
        key=lambda g: sorted(tuple(sorted(e)) for e in g),
    )


def _numbered(motif: Motif) -> frozenset:
    index = {a: i for i, a in enumerate(motif.attributes)}
    return frozenset(frozenset((index[x], index[y])) for x, y in motif.edges)


@cache
def containment(k: int) -> tuple[tuple[int, ...], ...]:
    """m[h][g]: how many edge subsets of motif g (on its k vertices) are isomorphic to motif h."""
    shapes = MOTIFS[k]
    forms = [_canonical(_numbered(m), k) for m in shapes]
    rows = []
    for h, motif in enumerate(shapes):
        row = []
        for g in shapes:
            subsets = itertools.combinations(sorted(_numbered(g), key=sorted), len(motif.edges))
            row.append(sum(_canonical(frozenset(s), k) == forms[h] for s in subsets))
        rows.append(tuple(row))
    return tuple(rows)


def induced_from_noninduced(k: int, noninduced: dict[str, int]) -> dict[str, int]:
    """Induced counts from the non-induced counts of the same shapes (by name): I(G) = N(G) minus
    m(G, G') I(G') over the denser shapes G', densest first. Exact integer arithmetic."""
    shapes, m = MOTIFS[k], containment(k)
    induced: dict[str, int] = {}
    for g in sorted(range(len(shapes)), key=lambda i: -len(shapes[i].edges)):
        denser = [d for d in range(len(shapes)) if len(shapes[d].edges) > len(shapes[g].edges)]  # counted already
        induced[shapes[g].name] = int(noninduced[shapes[g].name]) - sum(m[g][d] * induced[shapes[d].name] for d in denser)
    return {s.name: induced[s.name] for s in shapes}


def noninduced_from_induced(k: int, induced: dict[str, int]) -> dict[str, int]:
    """The forward relation N(H) = sum over G of m(H, G) I(G), for tests and for reading published figures."""
    shapes, m = MOTIFS[k], containment(k)
    return {h.name: sum(m[i][j] * int(induced[g.name]) for j, g in enumerate(shapes)) for i, h in enumerate(shapes)}
