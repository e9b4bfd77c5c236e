"""The networkx oracle, for small graphs.

- undirected: networkx's subgraph monomorphisms of the pattern into the graph divided by the
  pattern's automorphisms, both found by networkx's GraphMatcher;
- directed: networkx has no homomorphism counter, so a backtracking search over a networkx DiGraph
  (the plain join: attributes may coincide; a self-loop atom needs the loop).

Anti-edges: an induced pattern's matches are networkx's subgraph isomorphisms (induced) instead of its
monomorphisms; the explicit anti-edges filter them, and |Aut| counts only the automorphisms that keep
the forbidden pairs. Directed: the search rejects a value that would join a forbidden pair.

Vertex labels: each graph node carries its label (read from the label table, `Pattern.labels_glob`)
and the matcher's `node_match` takes a node for a labelled attribute only if the labels are equal;
|Aut| counts only the automorphisms that keep the labels. Directed: the search skips a value whose
label differs from its attribute's."""

from __future__ import annotations

import time

from harness.verify.oracles.pattern import Pattern


def _read_edges(parquet_glob: str) -> list[tuple[int, int]]:
    import duckdb

    relation = duckdb.sql(f"SELECT src, dst FROM read_parquet('{parquet_glob}')")
    assert relation is not None  # a SELECT has a result
    return relation.fetchall()


def read_labels(labels_glob: str | None) -> dict[int, int]:
    """vertex -> label from the label table; empty without one."""
    if labels_glob is None:
        return {}
    import duckdb

    relation = duckdb.sql(f"SELECT vertex, label FROM read_parquet('{labels_glob}')")
    assert relation is not None  # a SELECT has a result
    return dict(relation.fetchall())


def oracle(parquet_glob: str, pattern: Pattern, match_limit: int) -> dict:
    start = time.perf_counter()
    edges = _read_edges(parquet_glob)
    vertex_label = read_labels(pattern.labels_glob) if pattern.labels else {}
    loaded = time.perf_counter()
    count, matches = count_edges(edges, pattern, match_limit, vertex_label)
    return {"count": count, "matches": matches, "load_s": loaded - start, "count_s": time.perf_counter() - loaded}


def count_edges(
    edges: list[tuple[int, int]], pattern: Pattern, match_limit: int, vertex_label: dict[int, int] | None = None
) -> tuple[int, list | None]:
    """(count, up to match_limit + 1 matches in attribute order, or None above match_limit);
    `vertex_label` maps each labelled vertex to its label (a labelled pattern needs it)."""
    import networkx as nx
    from networkx.algorithms.isomorphism import GraphMatcher

    if pattern.undirected:
        graph = nx.Graph((s, d) for s, d in edges if s != d)
        shape: nx.Graph[str] = nx.Graph()
        shape.add_nodes_from(pattern.attributes)
        shape.add_edges_from(pattern.edges)
        automorphisms = sum(pattern.keeps_constraints(g) for g in GraphMatcher(shape, shape).isomorphisms_iter())
        matcher = _labelled_matcher(graph, shape, pattern, vertex_label or {}) if pattern.labels else GraphMatcher(graph, shape)
        found = matcher.subgraph_isomorphisms_iter() if pattern.induced else matcher.subgraph_monomorphisms_iter()
        anti = [tuple(p) for p in pattern.anti_edges]
        instances: dict = {}  # subgraph (edge set) -> one match of it
        monomorphisms = 0
        for mapping in found:
            if anti:
                inverse = {p: g for g, p in mapping.items()}
                if any(graph.has_edge(inverse[x], inverse[y]) for x, y in anti):
                    continue
            monomorphisms += 1
            if len(instances) <= match_limit:
                inverse = {p: g for g, p in mapping.items()}
                match = tuple(inverse[a] for a in pattern.attributes)
                instances.setdefault(pattern.instance_key(match), match)
        if monomorphisms % automorphisms:
            raise RuntimeError(f"{monomorphisms} monomorphisms is not a multiple of |Aut| = {automorphisms}")
        count = monomorphisms // automorphisms
        return count, (list(instances.values()) if count <= match_limit else None)
    return _homomorphisms(nx.DiGraph(edges), pattern, match_limit, vertex_label or {})


def _labelled_matcher(graph, shape, pattern: Pattern, vertex_label: dict[int, int]):
    """A GraphMatcher whose node_match maps a labelled attribute only to a node with its label."""
    import networkx as nx
    from networkx.algorithms.isomorphism import GraphMatcher

    nx.set_node_attributes(graph, {v: {"label": vertex_label[v]} for v in graph.nodes if v in vertex_label})
    nx.set_node_attributes(shape, {a: {"label": label} for a, label in pattern.labels})

    def node_match(node: dict, attribute: dict) -> bool:
        return "label" not in attribute or node.get("label") == attribute["label"]

    return GraphMatcher(graph, shape, node_match=node_match)


def _homomorphisms(graph, pattern: Pattern, match_limit: int, vertex_label: dict[int, int]) -> tuple[int, list | None]:
    attrs, atoms = pattern.attributes, pattern.edges
    order = [attrs[0]]
    while len(order) < len(attrs):  # breadth-first so every attribute has a bound neighbour
        nxt = next(
            (a for a in attrs if a not in order and any((x == a and y in order) or (y == a and x in order) for x, y in atoms)),
            None,
        )
        order.append(nxt or next(a for a in attrs if a not in order))
    nodes = list(graph.nodes)
    forbidden = sorted(pattern.forbidden)
    found: list[tuple] = []
    total = 0

    def search(i: int, value: dict) -> None:
        nonlocal total
        if i == len(order):
            total += 1
            if len(found) <= match_limit:
                found.append(tuple(value[a] for a in attrs))
            return
        a = order[i]
        candidates = None
        for x, y in atoms:
            if x == a and y != a and y in value:
                cand = set(graph.pred[value[y]])
            elif y == a and x != a and x in value:
                cand = set(graph.succ[value[x]])
            else:
                continue
            candidates = cand if candidates is None else candidates & cand
        for v in nodes if candidates is None else candidates:
            if a in pattern.label_of and vertex_label.get(v) != pattern.label_of[a]:
                continue
            value[a] = v
            if any(graph.has_edge(value[x], value[y]) for x, y in forbidden if a in (x, y) and x in value and y in value):
                continue
            if all(graph.has_edge(v, v) for x, y in atoms if x == y == a):
                search(i + 1, value)
        value.pop(a, None)

    search(0, {})
    return total, (found if total <= match_limit else None)
