"""The toy implementation beyond what the conformance suite (which picks it up from REGISTRY) checks:
it refuses graphs above its edge limit with a one-line DataError, and compare skips it there."""

from types import SimpleNamespace

from harness.bench import compare
from harness.bench.runner import RunRequest
from implementations.nested_loop import MAX_EDGES


def test_a_graph_above_the_limit_is_DAT_with_one_line(runner):
    record = runner.run(RunRequest("triangle", "rmat:scale=8,ef=8,seed=1", "nested-loop", oracle="none"))
    edges = record.dataset["edges"]
    assert edges > MAX_EDGES and record.status == "DAT" and record.count is None
    assert record.error == (
        f"nested-loop counts graphs of up to {MAX_EDGES:,} edges (a pure-Python loop); {record.dataset['name']} has {edges:,}"
    )


def test_a_small_graph_is_counted_and_verified(runner):
    record = runner.run(RunRequest("clique4", "rmat:scale=5,ef=6,seed=2", "nested-loop", oracle="networkx"))
    assert record.status == "OK" and record.verified, record.error
    assert record.logical["bindings_tried"] > 0 and record.metrics["driver_load_s"] >= 0


def test_compare_skips_it_on_a_larger_graph():
    cmp = compare.plan("triangle", "rmat:scale=6", systems="nested-loop,local-gj")
    graph = SimpleNamespace(edges=MAX_EDGES + 1, parquet_glob=lambda: "unused")
    steps = dict(compare._steps(cmp, None, graph, "run"))
    assert list(steps) == ["local-gj", "nested-loop"]
    row = steps["nested-loop"]()
    assert row.status == "SKIP" and row.error == f"counts graphs of up to {MAX_EDGES:,} edges"
