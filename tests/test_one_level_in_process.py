"""BiGJoin-S as published (`bigjoin-s-paper`, the one-level engine) and Delta-BiGJoin (the dataflow, batch by batch) run in this process (`BiGJoin.in_process`), each on
an index its own tasks build here (`balanced_index.build_locally`, `versioned_index.build_locally`):
what the session's warm-up runs, so here it must count right (against local-gj) and leave nothing to
compile. And the locally built indices against the ones Spark builds."""

from __future__ import annotations

import itertools
import random
import shutil

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.core.query import BUILTINS, make_join_spec, parse_pattern_string
from harness.data import datasets
from implementations.bigjoin_s_paper import BiGJoinSPaper
from implementations.delta_bigjoin import DeltaBiGJoin
from implementations.gj import exchange
from implementations.indices import balanced_index, distributed_index, versioned_index
from implementations.warm import update_batch
from tests.strategies import connected_patterns, messy_graphs
from tests.test_dataflow import THOROUGH, canonical, reference


@pytest.fixture(scope="module", autouse=True)
def warm():
    from implementations import warm

    warm.warm_up()


@st.composite
def cases(draw):
    semantics = draw(st.sampled_from(["undirected", "directed"]))
    rows = draw(messy_graphs(14, 60, wide_ids=True))
    query = draw(connected_patterns(2, 5, directed=semantics == "directed", anti=draw(st.booleans())))
    return semantics, rows, make_join_spec(query, semantics), draw(st.integers(1, 4)), draw(st.sampled_from([3, 40, 1 << 22]))


@settings(max_examples=100 if THOROUGH else 20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases())
def test_bigjoin_s_paper_in_process_counts_equal_local_gj(case):
    semantics, rows, spec, workers, batch = case
    src, dst = canonical(rows, semantics)
    if not len(src):
        return
    source = distributed_index.build_on_driver(src, dst, semantics == "undirected", workers)
    balanced = balanced_index.build_locally(source, exchange.local_tokens(workers))
    try:
        count, counters, _ = BiGJoinSPaper.in_process(spec, workers, balanced, params={"batch": batch}).extend_by_level(10)
    finally:
        for root in (source.root, balanced.root):
            shutil.rmtree(root, ignore_errors=True)
    assert count == reference(src, dst, spec), (spec.query.describe(), semantics, workers, batch)
    assert counters.totals["kernels_compiled"] == 0  # the module's warm-up covered every type


@pytest.mark.parametrize("pattern", ["a-b,b-c,!a-a", "a-b,b-c,!b-b,!c-a", "a-b,b-c,c-a,!b-b,!c-c", "a-b,!b-a,!b-b"])
def test_directed_anti_loops_equal_a_brute_force_count(pattern):
    """A directed `!a-a` (a's value has no self-loop) is a filter, not a list: bigjoin-s-paper and
    local-gj against every assignment of a small graph with self-loops."""
    rng = random.Random(pattern)
    rows = sorted({(rng.randrange(9), rng.randrange(9)) for _ in range(40)} | {(v, v) for v in range(0, 9, 3)})
    src, dst = canonical(rows, "directed")
    query = parse_pattern_string(pattern)
    edges = set(rows)
    expected = sum(
        all((m[x], m[y]) in edges for x, y in query.edges) and not any((m[x], m[y]) in edges for x, y in query.anti_edges)
        for m in (dict(zip(query.attributes, values)) for values in itertools.product(range(9), repeat=len(query.attributes)))
    )
    spec = make_join_spec(query, "directed")
    source = distributed_index.build_on_driver(src, dst, False, 2)
    balanced = balanced_index.build_locally(source, exchange.local_tokens(2))
    try:
        count, _, _ = BiGJoinSPaper.in_process(spec, 2, balanced, params={"batch": 5}).extend_by_level(10)
    finally:
        for root in (source.root, balanced.root):
            shutil.rmtree(root, ignore_errors=True)
    assert count == reference(src, dst, spec) == expected > 0


@pytest.mark.parametrize(("query", "semantics"), [("triangle", "undirected"), ("clique4", "undirected"), ("diamond", "directed")])
def test_delta_bigjoin_in_process_keeps_the_count_through_inserts_deletes_and_compaction(query, semantics):
    rnd = random.Random(f"{query}-{semantics}")  # a str seed is the same in every process
    rows = sorted({(rnd.randrange(40), rnd.randrange(40)) for _ in range(400)} - {(v, v) for v in range(40)})
    src, dst = (np.array(c, np.int64) for c in zip(*rows))
    spec, workers = make_join_spec(BUILTINS[query], semantics), 3
    initial = np.arange(len(src)) % 3 != 0  # two thirds loaded; the batches insert the rest and delete some
    index = versioned_index.build_locally(
        src[initial], dst[initial], semantics == "undirected", workers, exchange.local_tokens(workers)
    )
    delta = DeltaBiGJoin.in_process(spec, workers, index, params={"batch": 50, "compact_ratio": 0.2, "changes": 5})
    present = initial.copy()
    count = reference(*canonical(list(zip(src[initial], dst[initial])), semantics), spec)
    try:
        for _ in range(3):
            flip = np.flatnonzero(np.array([rnd.random() < 0.25 for _ in range(len(src))]))
            inserted, deleted = flip[~present[flip]], flip[present[flip]]
            out = delta.apply_updates(update_batch(src, dst, inserted, deleted))
            present[flip] = ~present[flip]
            count += out.delta
            assert count == reference(*canonical(list(zip(src[present], dst[present])), semantics), spec)
            assert out.counters["kernels_compiled"] == 0
        assert index.compactions >= 1
    finally:
        shutil.rmtree(index.root, ignore_errors=True)


@pytest.mark.parametrize("semantics", ["undirected", "directed"])
def test_the_local_builds_write_what_spark_builds(spark, semantics):
    rows = [(10**12 + 7, -5), (-5, 3), (3, 10**12 + 7), (8, -5), (-5, 8), (42, 3), (3, 42), (9, 3), (8, 42)]
    graph = datasets.from_edges(spark, rows, semantics, "local-builds")
    undirected, workers = semantics == "undirected", 3
    tokens = exchange.routing_tokens(spark, workers)
    source = distributed_index.build(spark, graph.df, undirected, workers)
    built = [
        (balanced_index.build(spark, source), balanced_index.build_locally(source, tokens)),
        (
            versioned_index.build(spark, graph.df, graph.df, undirected, workers, graph.df.select(graph.df.src.alias("v"))),
            versioned_index.build_locally(*graph.edge_arrays(), undirected, workers, tokens),
        ),
    ]
    try:
        for on_spark, here in built:
            assert _files(on_spark.root).keys() == _files(here.root).keys()
            for name, array in _files(on_spark.root).items():
                assert np.array_equal(array, np.load(here.root / name)), name
    finally:
        for index in [source] + [i for pair in built for i in pair]:
            shutil.rmtree(index.root, ignore_errors=True)


def _files(root) -> dict[str, np.ndarray]:
    return {str(p.relative_to(root)): np.load(p) for p in sorted(root.rglob("*.npy"))}
