"""Hypothesis strategies shared by the test modules: random patterns and messy random graphs."""

from dataclasses import replace

from hypothesis import strategies as st

from harness.core.query import Query


@st.composite
def connected_patterns(draw, min_vertices: int = 2, max_vertices: int = 5, directed: bool = False, anti: bool = False) -> Query:
    """A random connected pattern: a random spanning tree plus random extra edges. Directed
    patterns orient each edge at random and may add the reverse atom too. With `anti`, a pattern with
    a pair that is not an edge is induced (a third of the time) or takes at least one random
    anti-edge among those pairs; a complete pattern has none to take."""
    n = draw(st.integers(min_vertices, max_vertices))
    attrs = [f"v{i}" for i in range(n)]
    pairs = set()
    for i in range(1, n):
        pairs.add((draw(st.integers(0, i - 1)), i))
    others = [(i, j) for i in range(n) for j in range(i + 1, n) if (i, j) not in pairs]
    if others:
        pairs |= set(draw(st.lists(st.sampled_from(others), unique=True, max_size=len(others))))
    edges = []
    for i, j in sorted(pairs):
        if directed and draw(st.booleans()):
            i, j = j, i
        edges.append((attrs[i], attrs[j]))
        if directed and draw(st.integers(0, 4)) == 0:
            edges.append((attrs[j], attrs[i]))
    order = tuple(draw(st.permutations(edges)))
    taken = set(edges) if directed else {frozenset(e) for e in edges}
    free = [
        (attrs[i], attrs[j])
        for i in range(n)
        for j in range(n)
        if i != j and (directed or i < j) and ((attrs[i], attrs[j]) if directed else frozenset((attrs[i], attrs[j]))) not in taken
    ]
    if not anti or not free:
        return Query("random", order)
    if draw(st.integers(0, 2)) == 0:
        return Query("random", order, induced=True)
    chosen = draw(st.lists(st.sampled_from(free), unique=True, min_size=1, max_size=len(free)))
    return Query("random", order, anti_edges=tuple(chosen))


INT64 = (-(2**63), 2**63 - 1)


@st.composite
def vertex_ids(draw, n: int) -> list[int]:
    """n distinct int64 vertex ids spread over the whole range; hypothesis favours its ends, and the
    extremes themselves are often in."""
    extremes = draw(st.lists(st.sampled_from([INT64[0], INT64[1], 0, -1]), unique=True, max_size=min(n, 4)))
    rest = draw(st.lists(st.integers(*INT64), unique=True, min_size=n, max_size=n))
    ids = list(dict.fromkeys(extremes + rest))[:n]
    return draw(st.permutations(ids))


@st.composite
def messy_graphs(draw, max_vertices: int = 12, max_rows: int = 45, wide_ids: bool = False) -> list[tuple[int, int]]:
    """Edge rows with self-loops, duplicates, both directions, a hub and isolated ids; with wide_ids,
    the vertices are int64 ids spread over the whole range instead of 0..n-1."""
    n = draw(st.integers(1, max_vertices))
    ids = st.integers(0, n - 1)
    rows = draw(st.lists(st.tuples(ids, ids), max_size=max_rows))
    if n > 2 and draw(st.booleans()):  # a hub adjacent to most vertices
        hub = draw(ids)
        rows += [(hub, v) if draw(st.booleans()) else (v, hub) for v in range(n) if draw(st.integers(0, 4))]
    if rows and draw(st.booleans()):
        rows += draw(st.lists(st.sampled_from(rows), max_size=8))  # exact duplicates
    if wide_ids:
        name = draw(vertex_ids(n))
        rows = [(name[s], name[d]) for s, d in rows]
    return rows


LABELS = 3  # labels 0..LABELS-1 on random graphs and patterns: common enough to match, rare enough to filter


@st.composite
def labelled_patterns(draw, min_vertices: int = 2, max_vertices: int = 5, directed: bool = False, anti: bool = False) -> Query:
    """A connected pattern (`connected_patterns`) whose vertices each require a label in 0..LABELS-1
    with some probability (at least one does)."""
    query = draw(connected_patterns(min_vertices, max_vertices, directed, anti))
    chosen = draw(st.lists(st.sampled_from(query.attributes), unique=True, min_size=1))
    labels = {a: draw(st.integers(0, LABELS - 1)) for a in chosen}
    return replace(query, labels=tuple(sorted(labels.items(), key=lambda item: query.attributes.index(item[0]))))


@st.composite
def vertex_labels(draw, edges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """(vertex, label) for the graph's vertices: most labelled in 0..LABELS-1, some left without a label."""
    vertices = sorted({v for e in edges for v in e})
    return [(v, label) for v in vertices if (label := draw(st.integers(-1, LABELS - 1))) >= 0]
