"""`replicated` beyond the conformance suite (which counts it on every fixed and random graph): its index
is built by a task into the store, never on the driver; every worker maps that one copy; its ranges
cover the vertices once and cut the work evenly; and what it reports adds up."""

import itertools

import networkx as nx
import numpy as np
import pytest

from harness.bench import memory_model
from harness.bench.runner import RunRequest
from implementations import local_gj
from implementations.replicated import RANGES_PER_WORKER, work_ranges


@pytest.fixture(scope="module")
def clustered_graph(tmp_path_factory):
    """A power-law clustered graph: hubs whose ranges must be cut finer than the rest."""
    graph = nx.powerlaw_cluster_graph(3000, 6, 0.5, seed=11)
    path = tmp_path_factory.mktemp("replicated") / "clustered.txt"
    path.write_text("".join(f"{u} {v}\n" for u, v in graph.edges()))
    return str(path)


@pytest.mark.parametrize("pieces", [1, 3, 32])
def test_ranges_cover_every_vertex_once_and_cut_the_work_evenly(pieces):
    degree = np.random.default_rng(5).zipf(2.0, 5000).clip(max=4000)
    ranges = work_ranges(degree, pieces)
    assert ranges[0][0] == 0 and ranges[-1][1] == len(degree) and len(ranges) <= pieces
    assert all(hi > lo for lo, hi in ranges) and all(a[1] == b[0] for a, b in itertools.pairwise(ranges))
    estimate = local_gj.work_estimate(degree)
    work = np.array([estimate[hi] - estimate[lo] for lo, hi in ranges])
    heaviest = (1.0 + degree.astype(float) ** 2).max()
    assert work.max() <= estimate[-1] / pieces + heaviest  # a range holds its share, and at most one vertex more


def test_no_vertex_no_range():
    assert work_ranges(np.zeros(0, np.int64), 8) == []


def test_the_driver_never_reads_the_edges_and_the_counters_add_up(runner, clustered_graph, monkeypatch):
    # No RDD job either: its Python workers would come from a daemon of their own, started (and warmed)
    # inside the timed phase that first runs one (gj.python_tasks); its tasks use the session's.
    from pyspark import SparkContext

    def no_rdd(*args, **kwargs):
        raise AssertionError("replicated started an RDD job")

    monkeypatch.setattr(SparkContext, "parallelize", no_rdd)
    record = runner.run(RunRequest("clique4", clustered_graph, "replicated", workers=2, oracle="auto"))
    reference = runner.run(RunRequest("clique4", clustered_graph, "local-gj", workers=2, oracle="none", allow_unverified=True))
    assert record.status == "OK" and record.verified, record.error
    assert record.count == reference.count > 0
    assert record.metrics.get("driver_load_s") in (None, 0)  # local-gj reads the edges on the driver; replicated, in a task
    logical = record.logical
    assert logical["ranges"] == len(logical["work_per_range"]) == len(logical["seconds_per_range"])
    assert 1 < logical["ranges"] <= RANGES_PER_WORKER * 2
    assert sum(logical["work_per_range"]) == logical["candidates"] + logical["probes"]
    # The same search as local-gj's over the same ranks, cut into ranges: the same candidates and probes.
    assert (logical["candidates"], logical["probes"]) == (reference.logical["candidates"], reference.logical["probes"])
    # what a worker holds: the offsets of the three kinds of list, the one kind a clique reads (its
    # forward lists: one int64 per edge) and the loops, not local-gj's whole (3, E) array
    vertices, edges = logical["index_vertices"], record.dataset["edges"]
    assert logical["replicated_index_bytes"] == 3 * (vertices + 1) * 8 + edges * 8 + 8  # + the kinds read, one int64
    assert memory_model.predict(record) == (logical["replicated_index_bytes"], "the whole graph's index on every worker")


def test_python_tasks_run_one_argument_each_and_return_in_order(spark):
    from implementations.gj.python_tasks import run_tasks

    def task(argument):
        from pyspark import TaskContext

        yield from ((argument, TaskContext.get().partitionId(), i) for i in range(argument % 3))

    arguments = [5, 0, 7, 3, 4]
    found = run_tasks(spark, arguments, task)
    assert found == [(a, p, i) for p, a in enumerate(arguments) for i in range(a % 3)]
    assert run_tasks(spark, [], task) == []
