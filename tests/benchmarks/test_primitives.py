"""Benchmarks of the core primitives (pytest-benchmark): canonicalisation, index build, one
prefix-extension step, and the anti-intersect against the intersect it stands beside. `make test` runs each once as a correctness test (benchmarks disabled);
`make gate` times them against the saved run in results/baselines/micro (`make baseline` saves it)."""

from __future__ import annotations

import uuid

import networkx as nx
import numpy as np
import pytest
from numba import njit

from harness.core.query import load_query, make_join_spec
from harness.data import canonical, datasets, generators
from implementations.extension.items import Prefixes
from implementations.gj.csr import build_csr, difference, intersect
from implementations.gj.extension_kernels import count_items, intersect_items, propose_items
from implementations.gj.plan import ExtensionPlan
from implementations.indices import distributed_index

SCALE = 12
SPEC = f"rmat:scale={SCALE},ef=8,a=0.57,b=0.19,c=0.19,seed=1"


@pytest.fixture(scope="module")
def raw(spark):
    kind, params = generators.parse_spec(SPEC)
    return generators.generate(spark, kind, params, 2).cache()


@pytest.fixture(scope="module")
def simple_graph(raw):
    g = nx.Graph()
    g.add_edges_from((r.src, r.dst) for r in raw.collect() if r.src != r.dst)
    return g


@pytest.fixture(scope="module")
def relation(spark):
    return datasets.load(spark, datasets.resolve(SPEC), "undirected").df


def test_canonicalize(benchmark, raw, simple_graph, tmp_path):
    """DuckDB's canonicalisation of the raw rows (an Arrow table), written to Parquet."""
    table = raw.toArrow()

    def run():
        out = tmp_path / f"{uuid.uuid4().hex}.parquet"
        return canonical.canonicalize(table, "undirected", out, tmp_path)["edges"]

    count = benchmark.pedantic(run, rounds=5, iterations=1, warmup_rounds=1)
    assert count == simple_graph.number_of_edges()


def test_index_build(benchmark, spark, relation, simple_graph):
    index = benchmark.pedantic(lambda: distributed_index.build(spark, relation, True, 2), rounds=5, iterations=1, warmup_rounds=1)
    assert int(index.forward.sum() + index.reverse.sum()) == 2 * simple_graph.number_of_edges()


def test_extension_step(benchmark, spark, relation, simple_graph):
    """Extend every edge (a1 < a2) to triangles at one worker: Count, Propose, then Intersect."""
    index = distributed_index.build(spark, relation, True, 1)
    ix, loops = distributed_index.load_partition(str(index.root), 0)
    query, options = load_query("triangle")
    plan = ExtensionPlan.from_spec(make_join_spec(query, "undirected", None, **options))
    keys, offsets, forward = np.asarray(ix.lists.keys), np.asarray(ix.lists.offsets), np.asarray(ix.lists.forward)
    pairs = np.column_stack([np.repeat(keys, np.diff(offsets[0])), forward]).astype(np.int32)

    def step():
        items = Prefixes.fresh(pairs, int(plan.rel_count[2]))
        count_items(
            0,
            1,
            ix,
            2,
            items.prefix,
            items.mask,
            items.min_rel,
            items.min_count,
            plan.rel_count,
            plan.rel_pos,
            plan.rel_kind,
            plan.rel_view,
            plan.above,
            plan.below,
        )
        first = np.zeros(len(pairs), np.int64)
        lengths, values = propose_items(
            0,
            1,
            ix,
            loops,
            2,
            items.prefix,
            items.min_rel,
            first,
            items.min_count.astype(np.int64),
            plan.rel_pos,
            plan.rel_kind,
            plan.rel_view,
            plan.above,
            plan.below,
            plan.differ,
            plan.loop,
        )
        mask = ((1 << int(plan.rel_count[2])) - 1) & ~(1 << items.min_rel)
        kept, _ = intersect_items(
            0,
            1,
            ix,
            2,
            items.prefix,
            mask.astype(np.int32),
            lengths,
            values,
            values,  # out: narrowed in place
            plan.rel_count,
            plan.rel_pos,
            plan.rel_kind,
            plan.rel_view,
        )
        return kept

    triangles = benchmark(step)
    assert triangles == sum(nx.triangles(simple_graph).values()) // 3


# ---- an anti-edge against the positive edge it replaces, operator against operator ----------------


@njit(nogil=True)
def _against_neighbours(subtract, offsets, values, src, dst, out, work):
    """For every ordered edge (a, b): N(b) intersected with N(a) (a positive edge a-c at level c), or
    N(b) less N(a) (the anti-edge !a-c in its place): the kernels both operators run, on the same
    candidates and the same list, with the matches written as the dataflow writes them."""
    kept = 0
    for e in range(len(src)):
        a, b = src[e], dst[e]
        if subtract:
            kept += difference(values, offsets[b], offsets[b + 1], values, offsets[a], offsets[a + 1], out, 0, work)
        else:
            kept += intersect(values, offsets[b], offsets[b + 1], values, offsets[a], offsets[a + 1], out, 0, True, work)
    return kept


@pytest.fixture(scope="module")
def neighbour_lists(simple_graph):
    """The graph's adjacency (both directions) as one CSR, and its ordered edges."""
    edges = np.array(list(simple_graph.edges()), dtype=np.int64)
    src = np.concatenate([edges[:, 0], edges[:, 1]])
    dst = np.concatenate([edges[:, 1], edges[:, 0]])
    n = int(max(src.max(), dst.max())) + 1
    offsets, values = build_csr(src, dst, n)
    return offsets, values, src, dst, np.zeros(int(np.diff(offsets).max()), np.int64)


ROUNDS = 20


@pytest.mark.parametrize("subtract", [False, True], ids=["intersect", "anti-intersect"])
def test_anti_edge_against_the_positive_edge(benchmark, neighbour_lists, simple_graph, subtract):
    """The same candidates N(b) tested against the same list N(a), per ordered edge (a, b): the
    intersect keeps 6 x triangles values in all, the anti-intersect the rest of the candidates."""
    offsets, values, src, dst, out = neighbour_lists
    work = np.zeros(2, np.int64)
    run = lambda: _against_neighbours(subtract, offsets, values, src, dst, out, work)  # noqa: E731
    kept = benchmark.pedantic(run, rounds=ROUNDS, iterations=1, warmup_rounds=1)  # the warm-up round compiles
    candidates = int(np.diff(offsets)[dst].sum())
    triangles = sum(nx.triangles(simple_graph).values()) // 3
    benchmark.extra_info.update(candidates=candidates, kept=int(kept), elements_stepped_over=int(work[1]) // (ROUNDS + 1))
    assert kept == (candidates - 6 * triangles if subtract else 6 * triangles)
