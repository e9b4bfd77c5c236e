"""Shares/HyperCube beyond the conformance suite: the share search is exact, the tuples shipped are
exactly the formula's prediction (and exactly Spark's shuffle records), and every match is found in
the one cell its hashed values name."""

import itertools
import math

import pytest
from pyspark.sql import functions as F

import implementations
from harness.bench.record import RunRecord
from harness.bench.runner import RunRequest
from harness.core.query import BUILTINS, load_query, make_join_spec
from harness.data import datasets
from implementations import RunContext
from implementations.hypercube import Relation, allocate, communication, edge_cover_and_packing, share_vectors

CLIQUE4 = [("a", "b"), ("a", "c"), ("a", "d"), ("b", "c"), ("b", "d"), ("c", "d")]


def _relations(pairs, size=1000):
    return [Relation("-".join(p), p, size) for p in pairs]


def test_share_search_examines_every_vector():
    for m, workers in [(3, 8), (4, 12), (5, 32), (6, 7)]:
        brute = [v for v in itertools.product(range(1, workers + 1), repeat=m) if math.prod(v) <= workers]
        assert sorted(share_vectors(m, workers)) == sorted(brute)


@pytest.mark.parametrize(
    "workers,expected",
    [
        (1, (1, 1, 1)),
        (2, (2, 1, 1)),
        (4, (2, 2, 1)),
        (7, (3, 2, 1)),
        (8, (2, 2, 2)),
        (27, (3, 3, 3)),
        (64, (4, 4, 4)),
    ],
)
def test_triangle_shares(workers, expected):
    triangle = _relations([("a", "b"), ("b", "c"), ("a", "c")])
    alloc = allocate(("a", "b", "c"), triangle, workers)
    assert tuple(alloc.shares.values()) == expected
    # Each relation is replicated by the share of the attribute it lacks.
    s = alloc.shares
    assert alloc.communication == 1000 * (s["c"] + s["a"] + s["b"]) == communication(s, triangle)


def test_allocation_is_the_minimum_of_load_then_communication():
    relations = _relations(CLIQUE4[:4]) + [Relation("d-d", ("d",), 50)]
    attrs = ("a", "b", "c", "d")
    for workers in (2, 5, 16, 30):
        alloc = allocate(attrs, relations, workers)
        costs = [
            (communication(dict(zip(attrs, v)), relations) / math.prod(v), communication(dict(zip(attrs, v)), relations))
            for v in share_vectors(4, workers)
        ]
        assert (alloc.communication / alloc.cells, alloc.communication) == min(costs)
        assert alloc.cells <= workers


def test_cover_and_packing_numbers():
    assert edge_cover_and_packing(("a", "b", "c"), _relations([("a", "b"), ("b", "c"), ("a", "c")])) == (1.5, 1.5)
    assert edge_cover_and_packing(("a", "b", "c", "d"), _relations(CLIQUE4)) == (2.0, 2.0)
    assert edge_cover_and_packing(("a", "b", "c"), _relations([("a", "b"), ("b", "c")])) == (2.0, 1.0)  # a path


def _expected_shipped(record: RunRecord, graph_rows: int, loop_rows: int, spec) -> int:
    """Independently of the implementation: sum over the query's relations, and its anti-relations
    (which every cell that could test one needs too), of |R| * prod of the shares of the attributes R lacks."""
    shares = record.metrics["shares"]
    total = 0
    for x, y in spec.query.edges + spec.anti:
        if x == y:
            size = loop_rows
        elif spec.semantics == "undirected" and not (spec.implies_less(x, y) or spec.implies_less(y, x)):
            size = 2 * graph_rows  # both orientations of every undirected edge
        else:
            size = graph_rows
        total += size * math.prod(s for a, s in shares.items() if a not in (x, y))
    return total


@pytest.mark.parametrize(
    "query,semantics",
    [
        ("triangle", "undirected"),
        pytest.param("clique4", "undirected", marks=pytest.mark.thorough),
        pytest.param("house", "undirected", marks=pytest.mark.thorough),
        pytest.param("diamond", "directed", marks=pytest.mark.thorough),
        ("a-b,b-c,c-a,a-a", "directed"),
        ("a-b,b-c,c-d,d-a,!a-c,!b-d", "undirected"),  # the induced 4-cycle
        pytest.param("a-b,b-c,!c-a,!b-b,a-a", "directed", marks=pytest.mark.thorough),
    ],
)
def test_tuples_shipped_equal_the_formula(runner, query, semantics):
    dataset = "rmat:scale=7,ef=6,seed=5"
    for workers in (1, 3, 8):
        # Counts are checked against the oracles by the conformance suite; this test is about shipping.
        record = runner.run(RunRequest(query, dataset, "shares", workers=workers, semantics=semantics, oracle="none"))
        assert record.status == "UNVERIFIED" and record.count is not None, record.error
        graph, _, _ = runner.graph(datasets.resolve(dataset), semantics, workers)
        loops = graph.df.filter(F.col("src") == F.col("dst")).count()
        spec = make_join_spec(load_query(query)[0], semantics)
        shipped = record.metrics["tuples_shipped"]
        assert shipped == _expected_shipped(record, graph.edges, loops, spec) == record.logical["tuples_shipped_predicted"]
        # ... and it is what Spark shuffled in the query's one round.
        rounds = [r for r in record.metrics["per_round"] if r["phase"] == "query"]
        assert len(rounds) == 1 and rounds[0]["records"] == shipped
        assert math.prod(record.metrics["shares"].values()) == record.logical["cells"] <= workers
        assert sum(record.logical["load_per_cell"]) == shipped


@pytest.mark.parametrize("semantics", ["undirected", "directed"])
def test_labelled_relations_are_filtered_before_the_one_shuffle(runner, semantics):
    """A labelled pattern's relations are semi-joined with their attributes' labelled vertices before
    the shuffle: the cells receive exactly the prediction from the filtered sizes, in one round, and
    fewer tuples than the unlabelled twin ships."""
    dataset = "rmat:scale=7,ef=6,seed=5,labels=3"
    shipped = {}
    for query in ("a-b,b-c,c-a", "a:0-b:1,b-c,c-a"):
        record = runner.run(RunRequest(query, dataset, "shares", workers=4, semantics=semantics, oracle="none"))
        assert record.status == "UNVERIFIED" and record.count is not None, record.error
        shipped[query] = record.metrics["tuples_shipped"]
        assert shipped[query] == record.logical["tuples_shipped_predicted"]
        rounds = [r for r in record.metrics["per_round"] if r["phase"] == "query"]
        assert len(rounds) == 1 and rounds[0]["records"] == shipped[query]
    assert 0 < shipped["a:0-b:1,b-c,c-a"] < shipped["a-b,b-c,c-a"]


@pytest.mark.parametrize("semantics", ["undirected", "directed"])
def test_every_match_is_found_in_its_own_cell_only(spark, semantics):
    edges = [(i, j) for i in range(9) for j in range(i + 1, 9) if (i * j + i + j) % 4 != 1] + [(3, 3), (8, 2)]
    graph = datasets.from_edges(spark, edges, semantics, "dense")
    spec = make_join_spec(BUILTINS["clique4"], semantics)
    impl = implementations.get("shares")(RunContext(spark, graph, spec, 8))
    impl.prepare()
    assert impl.allocation.cells == 8
    total = impl.count().count
    by_cell = impl.matches_by_cell(100_000)
    assert total == sum(len(found) for _, found in by_cell) > 0
    assert sum(1 for _, found in by_cell if len(found)) > 1  # the work really was spread
    rows = [(cell, *map(int, match)) for cell, found in by_cell for match in found]
    assert len({r[1:] for r in rows}) == len(rows)  # no match twice
    positions = range(len(spec.attribute_order))
    frame = spark.createDataFrame(rows, ["cell"] + [f"v{j}" for j in positions])
    named = frame.select("cell", impl.cell_of({j: F.col(f"v{j}") for j in positions}).alias("own")).collect()
    assert all(r.cell == r.own for r in named)


@pytest.mark.parametrize(
    "query",
    [
        "clique4",
        "clique5",
        pytest.param(
            "a-b,a-c,a-d,!b-c,!b-d,!c-d",  # the induced 3-star (its plain twin does the same work)
            marks=pytest.mark.xfail(
                strict=True, reason="same count, but the cell steps over 4% more list elements: not yet explained"
            ),
        ),
    ],
)
def test_one_cell_does_the_work_of_local_gj(runner, query):
    """With one cell every relation holds the same oriented edges, so the cell reads one index and
    Generic Join carries each level's candidates down exactly as local-gj does: the same work, not
    the work of intersecting every relation afresh at every level."""
    dataset = "rmat:scale=8,ef=8,seed=3"
    records = {impl: runner.run(RunRequest(query, dataset, impl, workers=1, oracle="none")) for impl in ("shares", "local-gj")}
    shares, local = records["shares"].logical, records["local-gj"].logical
    assert records["shares"].count == records["local-gj"].count > 0
    assert shares["cells"] == 1
    assert shares["probes_per_cell"][0] == local["probes"]  # list elements stepped over by intersections
    # Candidates differ only at level 0: local-gj walks every vertex, a cell those its edges name.
    assert 0 <= local["candidates"] - shares["candidates_per_cell"][0] <= records["local-gj"].dataset["vertices"]
