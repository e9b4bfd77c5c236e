"""Vertex labels as data: label files (text and Parquet), the generators' `labels=K`, and every bad
input's one-line error."""

import json
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import implementations
from harness.bench.runner import RunRequest, labelled_source
from harness.core.errors import DataError
from harness.core.query import load_query, make_join_spec
from harness.data import datasets, generators
from tests.test_cli import error_lines, harness


def _labels(graph) -> dict:
    arrays = graph.label_arrays()
    assert list(arrays.vertices) == sorted(arrays.vertices)
    return dict(zip(arrays.vertices.tolist(), arrays.labels.tolist()))


def test_a_text_label_file_reaches_the_graph_as_arrays_and_a_table(spark, tmp_path):
    edges, labels = tmp_path / "g.txt", tmp_path / "g.labels"
    edges.write_text("1 2\n2 3\n3 1\n3 4\n")
    labels.write_text("# vertex label\n3 0\n1 7\n\n  2\t7\n")  # vertex 4 has no label
    graph = datasets.load(spark, replace(datasets.resolve(str(edges)), labels=str(labels)), "undirected")
    assert _labels(graph) == {1: 7, 2: 7, 3: 0}
    assert sorted(tuple(r) for r in graph.labels_df.collect()) == [(1, 7), (2, 7), (3, 0)]
    assert graph.describe()["labels"] == str(labels)


def test_a_parquet_label_file(spark, tmp_path):
    edges, labels = tmp_path / "g.txt", tmp_path / "labels.parquet"
    edges.write_text("10 20\n20 30\n")
    pq.write_table(pa.table({"label": np.array([5, 6], np.int32), "vertex": np.array([30, 10], np.int64)}), labels)
    graph = datasets.load(spark, replace(datasets.resolve(str(edges)), labels=str(labels)), "undirected")
    assert _labels(graph) == {10: 6, 30: 5}


@pytest.mark.parametrize(
    "body,message",
    [
        ("1 0\n2 x\n", r"g.labels:2: non-integer label 'x'"),
        ("# c\n1 0\n2 1 3\n", r"g.labels:3: malformed label line \(expected 2 fields, got 3\)"),
        ("1\n", r"g.labels:1: malformed label line \(expected 2 fields, got 1\)"),
        ("1 0\n2 -4\n", r"g.labels:2: label -4 is not in 0..10\^18-1"),
        ("1 0\n1 2\n", r"g.labels: vertex 1 is listed 2 times"),
    ],
)
def test_a_bad_label_line_names_file_and_line(spark, tmp_path, body, message):
    edges, labels = tmp_path / "g.txt", tmp_path / "g.labels"
    edges.write_text("1 2\n")
    labels.write_text(body)
    with pytest.raises(DataError, match=message):
        datasets.load(spark, replace(datasets.resolve(str(edges)), labels=str(labels)), "undirected")
    assert not list((datasets.cache_root() / "labels").glob("*.tmp-*")), "no half-written cache entry"


def test_a_parquet_label_file_without_the_columns(spark, tmp_path):
    edges, labels = tmp_path / "g.txt", tmp_path / "bad.parquet"
    edges.write_text("1 2\n")
    pq.write_table(pa.table({"v": [1], "l": [2]}), labels)
    with pytest.raises(DataError, match=r"bad.parquet: needs integer columns vertex and label"):
        datasets.load(spark, replace(datasets.resolve(str(edges)), labels=str(labels)), "undirected")


@pytest.mark.parametrize("kind", ["rmat:scale=6,ef=4,seed=3", "hubs:n=50,m=80,hubs=2,fraction=0.2,seed=5"])
def test_generated_labels_are_seeded_in_range_and_partition_invariant(spark, kind):
    source = datasets.resolve(f"{kind},labels=3")
    assert source.labelled and not datasets.resolve(kind).labelled
    assert "labels" not in datasets.resolve(kind).location  # unlabelled specs keep their canonical text (and cache)
    graphs = [datasets.load(spark, source, "undirected", partitions=p) for p in (1, 3)]
    first, second = (_labels(g) for g in graphs)
    assert first == second and set(first.values()) <= {0, 1, 2} and len(set(first.values())) == 3
    vertices = {v for r in graphs[0].df.collect() for v in r}
    assert set(first) == vertices  # every vertex of the graph is labelled
    reseeded = datasets.load(spark, datasets.resolve(f"{kind.replace('seed=', 'seed=1')},labels=3"), "undirected")
    assert _labels(reseeded) != first


@pytest.mark.parametrize("spec", ["rmat:scale=5,labels=0", "hubs:n=10,m=5,labels=-2"])
def test_labels_k_below_one_is_an_error(spec):
    with pytest.raises(DataError, match=r"'labels' must be at least 1, got -?\d"):
        generators.parse_spec(spec)


def _spec(query: str):
    return make_join_spec(load_query(query)[0], "undirected")


def test_a_labelled_pattern_needs_a_labelled_graph_and_an_existing_file(tmp_path):
    with pytest.raises(
        DataError, match=r"query 'a:1-b,b-c' requires vertex labels \(YAML key 'labels'.*dataset 'rmat-small' has none"
    ):
        labelled_source(RunRequest("a:1-b,b-c", "rmat-small", "binary"), _spec("a:1-b,b-c"))
    with pytest.raises(DataError, match=rf"label file {tmp_path}/none.txt: not found"):
        labelled_source(RunRequest("triangle", "rmat-small", "binary", labels=str(tmp_path / "none.txt")), _spec("triangle"))
    assert labelled_source(RunRequest("a:1-b", "rmat:scale=4,labels=2", "binary"), _spec("a:1-b")).labelled


def test_the_cli_refuses_a_missing_label_file_and_an_unlabelled_graph(tmp_path):
    """Both fail before Spark starts: exit code 2, one error line, a DAT record without a count."""

    def run(*args):
        out = tmp_path / "r.json"
        proc = harness("run", "--impl", "binary", "--json", str(out), *args)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        [line] = error_lines(proc)
        record = json.loads(out.read_text())
        assert record["status"] == "DAT" and record["count"] is None
        return line

    missing = run("--query", "triangle", "--dataset", "rmat-small", "--labels", "/nonexistent/l.txt")
    assert "label file /nonexistent/l.txt: not found" in missing
    assert "dataset 'rmat-small' has none" in run("--query", "a:1-b,b-c", "--dataset", "rmat-small")


TRIANGLE_AND_TAIL = [(1, 2), (2, 3), (3, 1), (3, 4)]
LABELS = [(1, 7), (2, 7), (3, 0)]  # vertex 4 has no label


@pytest.mark.parametrize(
    "query,semantics,expected",
    [
        ("a:7-b:7", "undirected", 1),  # the edge 1-2: a and b swap, both labelled 7
        ("a:7-b", "undirected", 4),  # (1,2) (2,1) (1,3) (2,3): no automorphism keeps the labels
        ("a:0-b,b-c", "undirected", 2),  # 3-1-2 and 3-2-1
        ("a-b,b:0-c", "undirected", 3),  # centre 3, two of its three neighbours
        ("a:5-b", "undirected", 0),  # no vertex has label 5
        ("a-b,b-c,c-a,a-d,d:0-b", "undirected", 0),
        ("a:7-b", "directed", 2),  # 1->2, 2->3
        ("a-b:0,b-c", "directed", 2),  # 2->3->1, 2->3->4
    ],
)
def test_the_oracles_count_labelled_patterns(spark, query, semantics, expected):
    """networkx (node_match) and DuckDB (a join with the label table) agree with hand counts."""
    from harness.verify.oracles import Pattern, not_applicable, nx_search, sql

    graph = datasets.from_edges(spark, TRIANGLE_AND_TAIL, semantics, "labelled", vertex_labels=LABELS)
    pattern = Pattern.of(load_query(query)[0], semantics, graph.labels_glob())
    assert not_applicable("native", pattern) and not_applicable("graphblas", pattern)
    for oracle in (nx_search.oracle, sql.oracle):
        answer = oracle(graph.parquet_glob(), pattern, 100)
        assert answer["count"] == expected, (oracle.__module__, answer)
        label = dict(LABELS)
        for match in answer["matches"]:
            assert all(label.get(match[pattern.attributes.index(a)]) == want for a, want in pattern.labels)


LABEL_IMPLEMENTATIONS = sorted(name for name, cls in implementations.REGISTRY.items() if cls.vertex_labels)


def test_which_implementations_count_labelled_patterns():
    """BiGJoin's variants opt in one by one (their own kernels may not filter labels): now all of them."""
    assert LABEL_IMPLEMENTATIONS == [
        "bigjoin", "bigjoin-carry", "bigjoin-s", "bigjoin-s-paper", "binary", "delta-bigjoin", "local-gj", "nested-loop",
        "replicated", "shares",
    ]  # fmt: skip


@pytest.mark.parametrize("impl_name", LABEL_IMPLEMENTATIONS)
def test_each_labelled_implementation_on_a_hub_graph(spark, impl_name):
    """A hub graph whose labels cut each pattern's candidates, against both oracles (tests/test_conformance.check)."""
    from tests.test_conformance import FIXED_GRAPHS, check

    edges = FIXED_GRAPHS["hub"]
    labels = [(v, v % 3) for v in range(16) if v != 5]  # vertex 5 has no label
    counts = {}
    for query, semantics in [
        ("a:0-b,b-c,c-a", "undirected"),
        ("a-b:1,b-c:1", "undirected"),
        ("a:0-b:2,b-c,c-d,d-a", "undirected"),
        ("a:0-b,b-c:2", "directed"),
    ]:
        counts[query] = check(spark, impl_name, edges, load_query(query)[0], semantics, "hub", 2, labels)
    assert counts["a:0-b,b-c,c-a"] > 0  # the hub (vertex 0, label 0) closes triangles; check() compared every count


def test_a_workload_names_a_label_file_relative_to_itself(tmp_path):
    from harness.bench import workload

    (tmp_path / "w.yaml").write_text("queries: [a:1-b]\ndatasets: [rmat-small]\nimplementations: [binary]\nlabels: l.txt\n")
    [req] = workload.load(str(tmp_path / "w.yaml")).requests()
    assert req.labels == str(tmp_path / "l.txt")
    (tmp_path / "bad.yaml").write_text("queries: [triangle]\ndatasets: [rmat-small]\nimplementations: [binary]\nlabels: [1]\n")
    with pytest.raises(DataError, match=r"bad.yaml: key 'labels' must be the path of a label file"):
        workload.load(str(tmp_path / "bad.yaml"))


def test_a_registry_entry_names_its_label_file(tmp_path, monkeypatch):
    registry = tmp_path / "registry.yaml"
    registry.write_text(f"datasets:\n  tiny:\n    generator: rmat:scale=4\n    labels: {tmp_path / 'tiny.labels'}\n")
    source = datasets.load_registry(registry)["tiny"]
    assert source.labels == str(tmp_path / "tiny.labels") and source.labelled
    monkeypatch.setattr(datasets, "resolve", lambda name: source)
    with pytest.raises(
        DataError, match=rf"label file {tmp_path}/tiny.labels: not found \(dataset 'tiny', registry key 'labels'\)"
    ):
        labelled_source(RunRequest("triangle", "tiny", "binary"), _spec("triangle"))


def test_compare_refuses_a_labelled_pattern():
    """The peer systems would count the unlabelled pattern."""
    from harness.bench import compare

    with pytest.raises(DataError, match=r"query 'a:1-b,b-c': compare does not take vertex labels"):
        compare.plan("a:1-b,b-c", "rmat-small")
