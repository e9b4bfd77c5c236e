"""The independent oracles: independent by construction (their imports never reach implementations/,
and they see a pattern's edges and semantics only), each one's count equal to networkx's on random
small graphs with ids over the whole int64 range (anti-edges and induced patterns too), and
hand-checked counts."""

import ast
import itertools
from pathlib import Path

import networkx as nx
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.core.query import BUILTINS
from harness.verify import oracles
from harness.verify.oracles import (
    COUNTS,
    ORACLES,
    Pattern,
    linalg,
    motifs,
    native,
    native_count,
    not_applicable,
    nx_search,
    run_oracle,
    sql,
)
from tests.strategies import connected_patterns, messy_graphs

REPO = Path(__file__).resolve().parent.parent
ORACLE_DIR = REPO / "harness" / "verify" / "oracles"


# ---------------------------------------------------------------- independence by construction


def _imports(path: Path) -> set[str]:
    """Absolute names of the modules a file imports (relative imports resolved)."""
    package = ".".join(path.relative_to(REPO).with_suffix("").parts)
    if path.name != "__init__.py":
        package = package.rsplit(".", 1)[0]
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            if node.level:
                base = base[: len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            names.add(module)
            names |= {f"{module}.{a.name}" for a in node.names}  # `from . import native` names a module
    return names


def _module_file(name: str) -> Path | None:
    parts = name.split(".")
    for candidate in (REPO.joinpath(*parts).with_suffix(".py"), REPO.joinpath(*parts, "__init__.py")):
        if candidate.is_file():
            return candidate
    return None


def test_oracles_import_nothing_from_implementations_even_indirectly():
    """Walk every import of the oracle package, and of the harness modules that verify counts, through
    every module of this repository they reach."""
    start = sorted(ORACLE_DIR.glob("*.py")) + [
        REPO / "harness" / "verify" / "check.py",
        REPO / "harness" / "verify" / "dynamic.py",
    ]
    seen, frontier, reached = set(), list(start), set()
    while frontier:
        path = frontier.pop()
        if path in seen:
            continue
        seen.add(path)
        for name in _imports(path):
            reached.add(name)
            found = _module_file(name)
            if found is not None:
                frontier.append(found)
    assert not [n for n in reached if n == "implementations" or n.startswith("implementations.")]
    assert ORACLE_DIR / "native.py" in seen and REPO / "harness" / "core" / "query.py" in seen  # the walk went deep


def test_oracles_see_only_the_pattern():
    """The oracle package imports nothing else of the harness and never reads the implementations'
    symmetry breaking, attribute order or ranking."""
    for path in ORACLE_DIR.glob("*.py"):
        outside = [n for n in _imports(path) if n.startswith("harness.") and not n.startswith("harness.verify.oracles")]
        assert not outside, f"{path.name} imports {outside}"
        attributes = {n.attr for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Attribute)}
        assert not attributes & {"less_than", "attribute_order", "distinct", "implies_less", "instance_key_of_spec"}, path.name


def test_every_oracle_says_what_it_counts():
    assert set(COUNTS) == set(ORACLES) == {"networkx", "duckdb", "graphblas", "native"}
    assert all(len(text) > 40 for text in COUNTS.values())


# ---------------------------------------------------------------- automorphisms and shapes


@pytest.mark.parametrize("name,expected", [("triangle", 6), ("clique4", 24), ("diamond", 8), ("house", 4), ("clique5", 120)])
def test_automorphisms_of_the_builtins(name, expected):
    assert Pattern.of(BUILTINS[name], "undirected").automorphisms == expected


@settings(max_examples=40, deadline=None)
@given(connected_patterns(2, 6))
def test_automorphisms_equal_networkx(query):
    pattern = Pattern.of(query, "undirected")
    graph = nx.Graph([tuple(p) for p in pattern.pairs])
    graph.add_nodes_from(pattern.attributes)
    expected = sum(1 for _ in nx.algorithms.isomorphism.GraphMatcher(graph, graph).isomorphisms_iter())
    assert pattern.automorphisms == expected


def test_shapes_are_read_from_the_edges_whatever_the_names_and_order():
    renamed_house = Pattern(
        (("r", "x"), ("x", "p"), ("q", "p"), ("p", "r"), ("q", "r"), ("x", "q"), ("q", "y"), ("y", "x")), "undirected"
    )
    assert renamed_house.is_house and renamed_house.clique_size is None
    assert Pattern((("c", "a"), ("b", "c"), ("a", "b")), "undirected").clique_size == 3
    assert Pattern((("a", "b"), ("b", "c"), ("c", "d"), ("d", "a")), "undirected").is_four_cycle
    assert not Pattern((("a", "b"), ("b", "c"), ("c", "d"), ("d", "a")), "directed").is_four_cycle
    assert Pattern((("a", "b"), ("c", "b"), ("a", "c")), "directed").is_triangle_shape
    assert not_applicable("native", Pattern.of(BUILTINS["diamond"], "undirected"))
    assert not_applicable("graphblas", Pattern((("a", "a"), ("a", "b"), ("b", "c"), ("a", "c")), "directed"))


# ---------------------------------------------------------------- counts against networkx


def canonical(rows: list[tuple[int, int]], semantics: str) -> list[tuple[int, int]]:
    if semantics == "undirected":
        return sorted({(min(s, d), max(s, d)) for s, d in rows if s != d})
    return sorted(set(rows))


def count_with(name: str, edges: list[tuple[int, int]], pattern: Pattern) -> int:
    """The oracle's count on these canonical edges, called in process (run_oracle adds the child process)."""
    if name == "networkx":
        return nx_search.count_edges(edges, pattern, 0)[0]
    if name == "duckdb":
        import duckdb

        con = duckdb.connect()
        con.execute("CREATE TABLE e (src BIGINT, dst BIGINT)")
        if edges:
            con.executemany("INSERT INTO e VALUES (?, ?)", edges)
        return sql.count_on(con, pattern, "e")
    src = np.array([s for s, _ in edges], np.int64)
    dst = np.array([d for _, d in edges], np.int64)
    return (native_count if name == "native" else linalg.count)(src, dst, pattern)[0]


def _renamed(edges, names, flip):
    """The same pattern under other attribute names, another edge order and (undirected) other directions."""
    return tuple((names[y], names[x]) if f else (names[x], names[y]) for (x, y), f in zip(edges, flip))


@st.composite
def shaped_patterns(draw, semantics: str):
    """Patterns the specialised oracles count (cliques, houses, triangles, 4-cycles), renamed and reordered."""
    if semantics == "directed":
        base = (("a", "b"), ("a", "c"), ("b", "c"))
        flip = draw(st.lists(st.booleans(), min_size=3, max_size=3))  # any orientation of each edge
    else:
        base = draw(
            st.sampled_from([BUILTINS[n].edges for n in ("triangle", "clique4", "diamond", "house", "clique5")] + [(("a", "b"),)])
        )
        flip = draw(st.lists(st.booleans(), min_size=len(base), max_size=len(base)))
    attrs = sorted({a for e in base for a in e})
    names = dict(zip(attrs, draw(st.permutations([f"x{i}" for i in range(len(attrs))]))))
    edges = list(_renamed(base, names, flip))
    return Pattern(tuple(draw(st.permutations(edges))), semantics)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_specialised_oracles_equal_networkx(data):
    semantics = data.draw(st.sampled_from(["undirected", "directed"]), label="semantics")
    pattern = data.draw(shaped_patterns(semantics), label="pattern")
    edges = canonical(data.draw(messy_graphs(14, 60, wide_ids=True), label="edges"), semantics)
    expected = count_with("networkx", edges, pattern)
    checked = 0
    for name in ("native", "graphblas", "duckdb"):
        if not_applicable(name, pattern) is None:
            assert count_with(name, edges, pattern) == expected, f"{name} on {pattern.edges} ({semantics})"
            checked += 1
    assert checked >= 2  # DuckDB and at least one of the in-memory counters


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_duckdb_equals_networkx_on_random_patterns(data):
    semantics = data.draw(st.sampled_from(["undirected", "directed"]), label="semantics")
    query = data.draw(connected_patterns(2, 5, directed=semantics == "directed"), label="pattern")
    pattern = Pattern.of(query, semantics)
    edges = canonical(data.draw(messy_graphs(10, 35, wide_ids=True), label="edges"), semantics)
    assert count_with("duckdb", edges, pattern) == count_with("networkx", edges, pattern)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_duckdb_equals_networkx_on_anti_and_induced_patterns(data):
    semantics = data.draw(st.sampled_from(["undirected", "directed"]), label="semantics")
    query = data.draw(connected_patterns(2, 5, directed=semantics == "directed", anti=True), label="pattern")
    pattern = Pattern.of(query, semantics)
    edges = canonical(data.draw(messy_graphs(10, 35, wide_ids=True), label="edges"), semantics)
    assert count_with("duckdb", edges, pattern) == count_with("networkx", edges, pattern)


# ---------------------------------------------------------------- induced 3- and 4-vertex patterns

MOTIF_EDGES = {
    "wedge": (("a", "b"), ("b", "c")),
    "triangle": (("a", "b"), ("b", "c"), ("a", "c")),
    "star3": (("a", "b"), ("a", "c"), ("a", "d")),
    "path4": (("a", "b"), ("b", "c"), ("c", "d")),
    "tailed_triangle": (("a", "b"), ("b", "c"), ("a", "c"), ("c", "d")),
    "cycle4": (("a", "b"), ("b", "c"), ("c", "d"), ("d", "a")),
    "diamond": (("a", "b"), ("b", "c"), ("c", "d"), ("d", "a"), ("a", "c")),
    "clique4": tuple(itertools.combinations("abcd", 2)),
}


def test_motif_conversion_inverts_the_containment_counted_by_networkx():
    """CONTAINS[H][H'] is the copies of H in H' (monomorphisms / |Aut(H)|, by networkx), and
    INDUCED_FROM is its inverse: Σ_H' INDUCED_FROM[H][H']·CONTAINS[H'][H''] = [H == H'']."""
    from networkx.algorithms.isomorphism import GraphMatcher

    shapes = {name: nx.Graph(list(edges)) for name, edges in MOTIF_EDGES.items()}
    for name, shape in shapes.items():
        automorphisms = sum(1 for _ in GraphMatcher(shape, shape).isomorphisms_iter())
        for host_name, host in shapes.items():
            copies = sum(1 for _ in GraphMatcher(host, shape).subgraph_monomorphisms_iter()) // automorphisms
            same_size = len(host) == len(shape)
            assert motifs.CONTAINS[name].get(host_name, 0) == (copies if same_size else 0), (name, host_name)
    for name in shapes:
        for target in shapes:
            product = sum(w * motifs.CONTAINS[h].get(target, 0) for h, w in motifs.INDUCED_FROM[name].items())
            assert product == (name == target), (name, target)


@st.composite
def induced_motif_patterns(draw):
    """One of the eight shapes, renamed and reordered, induced by `induced: true` or by anti-edges on
    every pair that is not an edge."""
    base = MOTIF_EDGES[draw(st.sampled_from(sorted(MOTIF_EDGES)))]
    attrs = sorted({a for e in base for a in e})
    names = dict(zip(attrs, draw(st.permutations([f"x{i}" for i in range(len(attrs))]))))
    edges = tuple(
        draw(st.permutations(list(_renamed(base, names, draw(st.lists(st.booleans(), min_size=len(base), max_size=len(base)))))))
    )
    if draw(st.booleans()):
        return Pattern(edges, "undirected", induced=True)
    adjacent = {frozenset(e) for e in edges}
    anti = tuple((x, y) for x, y in itertools.combinations(sorted(names.values()), 2) if frozenset((x, y)) not in adjacent)
    return Pattern(edges, "undirected", anti_edges=anti)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_native_induced_motifs_equal_networkx(data):
    pattern = data.draw(induced_motif_patterns(), label="pattern")
    edges = canonical(data.draw(messy_graphs(14, 60, wide_ids=True), label="edges"), "undirected")
    assert pattern.motif is not None and not_applicable("native", pattern) is None
    assert count_with("native", edges, pattern) == count_with("networkx", edges, pattern), pattern.motif


def test_which_oracles_count_anti_and_induced_patterns():
    induced_cycle = Pattern(MOTIF_EDGES["cycle4"], "undirected", induced=True)
    assert oracles.choose("auto", induced_cycle, 10**6) == ["native"]
    assert not_applicable("graphblas", induced_cycle)  # its 4-cycles are not induced
    assert not_applicable("graphblas", Pattern(MOTIF_EDGES["triangle"], "undirected", induced=True)) is None
    partly = Pattern(MOTIF_EDGES["path4"], "undirected", anti_edges=(("a", "c"),))  # b-d may still be an edge
    assert not_applicable("native", partly) and oracles.choose("auto", partly, 10**6) == ["duckdb"]
    assert not_applicable("native", Pattern(MOTIF_EDGES["path4"], "undirected"))  # not induced
    assert not_applicable("native", Pattern(MOTIF_EDGES["path4"], "directed", induced=True))
    assert not_applicable("native", Pattern(BUILTINS["house"].edges, "undirected", induced=True))
    assert not_applicable("native", Pattern(BUILTINS["clique5"].edges, "undirected", induced=True)) is None  # nothing to forbid


CYCLE4 = [(0, 1), (1, 2), (2, 3), (0, 3)]
CYCLE5 = [(0, 1), (1, 2), (2, 3), (3, 4), (0, 4)]
K4 = [(i, j) for i in range(4) for j in range(i + 1, 4)]


@pytest.mark.parametrize(
    "shape,graph,expected",
    [
        ("wedge", CYCLE4, 4),  # every vertex with its two neighbours, which are not adjacent
        ("wedge", K4, 0),  # every wedge closes
        ("path4", CYCLE5, 5),  # the 5-cycle minus one of its edges, on four of its vertices
        ("cycle4", K4, 0),
        ("diamond", K4, 0),
        ("clique4", K4, 1),
        ("star3", K4, 0),
    ],
)
def test_hand_counts_of_induced_patterns(shape, graph, expected):
    pattern = Pattern(MOTIF_EDGES[shape], "undirected", induced=True)
    counted = [oracle for oracle in ORACLES if not_applicable(oracle, pattern) is None]
    assert {"networkx", "duckdb", "native"} <= set(counted)
    for oracle in counted:
        assert count_with(oracle, graph, pattern) == expected, oracle


def test_anti_edges_by_hand():
    """An anti-edge is a pair with no edge either way (undirected), or none x -> y (directed)."""
    open_wedge = Pattern((("a", "b"), ("b", "c")), "undirected", anti_edges=(("a", "c"),))
    assert count_with("duckdb", CYCLE4 + [(0, 2)], open_wedge) == 2  # the wedges at 1 and 3 close through 0-2
    no_back = Pattern((("a", "b"),), "directed", anti_edges=(("b", "a"),))
    assert (
        count_with("duckdb", [(1, 2), (2, 1), (2, 3)], no_back) == count_with("networkx", [(1, 2), (2, 1), (2, 3)], no_back) == 1
    )


K5 = [(i, j) for i in range(5) for j in range(i + 1, 5)]


@pytest.mark.parametrize("name,expected", [("triangle", 10), ("clique4", 5), ("clique5", 1), ("diamond", 15), ("house", 30)])
def test_hand_counts_on_k5(name, expected):
    """K5: C(5,3) triangles, C(5,4) 4-cliques, one 5-clique, 3 four-cycles on each of its 5 four-sets,
    and 30 houses (5 four-cliques x 6 roof edges x the one vertex left)."""
    pattern = Pattern.of(BUILTINS[name], "undirected")
    for oracle in ORACLES:
        if not_applicable(oracle, pattern) is None:
            assert count_with(oracle, K5, pattern) == expected, oracle


def test_directed_triangle_patterns_by_hand():
    """A directed 3-cycle 1->2->3->1 plus a self-loop on 1 and the edge 1->3: the plain join."""
    edges = canonical([(1, 2), (2, 3), (3, 1), (1, 1), (1, 3)], "directed")
    transitive = Pattern((("a", "b"), ("a", "c"), ("b", "c")), "directed")  # a->b, a->c, b->c
    cycle = Pattern((("a", "b"), ("b", "c"), ("c", "a")), "directed")
    brute = {
        p: sum(
            all((v[x], v[y]) in set(edges) for x, y in p.edges)
            for v in (dict(zip("abc", t)) for t in itertools.product([1, 2, 3], repeat=3))
        )
        for p in (transitive, cycle)
    }
    for p in (transitive, cycle):
        for oracle in ("networkx", "duckdb", "graphblas"):
            assert count_with(oracle, edges, p) == brute[p], (oracle, p.edges)
    # tr(A^3), by hand: 1-2-3-1 from each of its 3 vertices, 1-1-1-1, and 1-1-3-1, 1-3-1-1, 3-1-1-3
    assert brute[cycle] == 7


def test_native_counter_refuses_a_graph_that_is_not_simple():
    with pytest.raises(ValueError, match="repeated edge"):
        native.count(np.array([1, 1, 2]), np.array([2, 2, 3]), Pattern.of(BUILTINS["triangle"], "undirected"))


# ---------------------------------------------------------------- run_oracle: child process, statuses


def test_run_oracle_reports_counts_times_and_never_raises(tmp_path):
    path = tmp_path / "k5.parquet"
    pq.write_table(pa.table({"src": [s for s, _ in K5], "dst": [d for _, d in K5]}), path)
    clique4 = Pattern.of(BUILTINS["clique4"], "undirected")
    answer = run_oracle("native", str(path), clique4, 120)
    assert answer["status"] == "ok" and answer["count"] == 5 and answer["count_s"] >= 0 and answer["load_s"] >= 0
    assert answer["counts"] == COUNTS["native"]
    skipped = run_oracle("graphblas", str(path), clique4, 120)
    assert skipped["status"] == "skipped" and skipped["reason"].startswith("not applicable") and skipped["count"] is None
    timeout = run_oracle("duckdb", str(path), clique4, 0.01)
    assert timeout["status"] == "timeout" and timeout["count"] is None
    assert oracles.choose("auto", clique4, 10**6) == ["native"]
    assert oracles.choose("auto", Pattern.of(BUILTINS["diamond"], "undirected"), 10**6) == ["graphblas"]
    assert oracles.choose("auto", Pattern((("a", "b"), ("b", "c")), "undirected"), 10**6) == ["duckdb"]
    assert oracles.choose("auto", clique4, 100) == ["networkx"]
