"""Edge-file parsing, canonicalisation counts, the Parquet cache and the R-MAT generator."""

import gzip
import shutil
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from harness.core.errors import DataError
from harness.data import canonical, datasets, generators, spark_hash
from tests.strategies import messy_graphs

MESSY = (
    "# a comment\r\n"
    "1 2\r\n"
    "2\t1\r\n"  # reverse of 1-2
    "1   2\r\n"  # exact duplicate
    "3 3\r\n"  # self-loop
    "2 3\n"
    "  4 5  \n"
    "\n"
    "5 4\n"
)


def _edges(graph):
    return sorted(tuple(r) for r in graph.df.collect())


def test_snap_text_canonicalisation_counts_every_step(spark, tmp_path):
    path = tmp_path / "messy.txt"
    path.write_text(MESSY)
    und = datasets.load(spark, datasets.resolve(str(path)), "undirected")
    assert _edges(und) == [(1, 2), (2, 3), (4, 5)]
    assert und.vertices == 5 and und.edges == 3
    assert und.cleaning == {"input_rows": 7, "self_loops_dropped": 1, "duplicates_dropped": 1, "reverse_pairs_merged": 2}
    d = datasets.load(spark, datasets.resolve(str(path)), "directed")
    assert _edges(d) == [(1, 2), (2, 1), (2, 3), (3, 3), (4, 5), (5, 4)]
    assert d.cleaning == {"input_rows": 7, "duplicates_dropped": 1, "self_loops_kept": 1}


def test_gzip_and_cache(spark, tmp_path):
    path = tmp_path / "messy.txt.gz"
    path.write_bytes(gzip.compress(MESSY.encode()))
    first = datasets.load(spark, datasets.resolve(str(path)), "undirected")
    again = datasets.load(spark, datasets.resolve(str(path)), "undirected")
    assert not first.cache_hit and again.cache_hit
    assert _edges(first) == _edges(again) == [(1, 2), (2, 3), (4, 5)]
    assert first.fingerprint == again.fingerprint
    assert first.sha256 == again.sha256 and first.sha256_of == "file"
    directed = datasets.load(spark, datasets.resolve(str(path)), "directed")
    assert directed.path != first.path  # the cache is keyed by semantics too


def test_a_cached_copy_whose_edges_changed_is_refused(spark, tmp_path):
    """The job that fills Spark's cache checks the files against meta.json: the count, and the fingerprint
    (an edge swapped for another, the count unchanged)."""
    path = tmp_path / "swapped.txt"
    path.write_text("1 2\n2 3\n3 4\n")
    graph = datasets.load(spark, datasets.resolve(str(path)), "undirected")
    assert graph.fingerprint == f"3:{sum(r.h for r in graph.df.select(F.xxhash64('src', 'dst').alias('h')).collect())}"
    files = graph.path / "edges.parquet"
    swapped = spark.createDataFrame([(1, 2), (2, 3), (3, 5)], "src bigint, dst bigint")
    swapped.coalesce(1).write.mode("overwrite").parquet(str(tmp_path / "swapped.parquet"))
    graph.df.unpersist()  # else the next load's plan reads Spark's cached copy, not the files
    shutil.rmtree(files)
    shutil.copytree(tmp_path / "swapped.parquet", files)
    with pytest.raises(DataError, match=r"its edges' fingerprint is 3:-?\d+, metadata says 3:"):
        datasets.load(spark, datasets.resolve(str(path)), "undirected")
    shutil.rmtree(graph.path)  # the next load rebuilds it
    assert datasets.load(spark, datasets.resolve(str(path)), "undirected").fingerprint == graph.fingerprint


def test_lg_format_gzip_without_gz_suffix(spark, tmp_path):
    path = tmp_path / "tiny.jlg"
    path.write_bytes(gzip.compress(b"4,4,u,graph\n1,2\n2,3\n3,1\n3,4\n"))
    graph = datasets.load(spark, datasets.resolve(str(path)), "undirected")
    assert _edges(graph) == [(1, 2), (1, 3), (2, 3), (3, 4)]


@pytest.mark.parametrize(
    "body,line,message",
    [
        ("1 2\n2 3 4\n", 2, "expected 2 fields, got 3"),
        ("# c\n1 2\n1 x\n", 3, "non-integer vertex id 'x'"),
        ("1 2\n3 4-\n", 2, "non-integer vertex id '4-'"),
        ("1 2\n5\n", 2, "expected 2 fields, got 1"),
        ("1 2\n1 1234567890123456789012\n", 2, r"vertex id 1234567890123456789012 out of range \[-2\^63, 2\^63-1\]"),
        ("1 2\n1 9223372036854775808\n", 2, r"vertex id 9223372036854775808 out of range"),
        ("1 2\n-9223372036854775809 1\n", 2, r"vertex id -9223372036854775809 out of range"),
    ],
)
def test_bad_lines_name_file_and_line(spark, tmp_path, body, line, message):
    path = tmp_path / "bad.txt"
    path.write_text(body)
    with pytest.raises(DataError, match=rf"bad.txt:{line}: .*{message}"):
        datasets.load(spark, datasets.resolve(str(path)), "undirected")
    assert not list((datasets.cache_root() / "graphs").glob("*.tmp-*")), "no half-written cache entry"


def test_text_ids_cover_the_whole_int64_range(spark, tmp_path):
    """Every signed 64-bit id is a vertex, whatever its sign or digits (a leading + or zeros too)."""
    low, high = -(2**63), 2**63 - 1
    path = tmp_path / "wide.txt"
    path.write_text(f"{low} {high}\n{high} 0\n0 {low}\n-1 +0001\n{9 * 10**18} {low}\n")
    graph = datasets.load(spark, datasets.resolve(str(path)), "undirected")
    assert _edges(graph) == sorted([(low, high), (0, high), (low, 0), (-1, 1), (low, 9 * 10**18)])
    assert graph.vertices == 6


def test_bad_line_number_across_many_partitions(spark, tmp_path):
    path = tmp_path / "big.txt"
    lines = [f"{i} {i + 1}" for i in range(60000)]
    lines[45678] = "7 seven"
    path.write_text("\n".join(lines) + "\n")
    spark.conf.set("spark.sql.files.maxPartitionBytes", "65536")
    try:
        assert spark.read.text(str(path)).rdd.getNumPartitions() > 5
        with pytest.raises(DataError, match=r"big.txt:45679: non-integer vertex id 'seven'"):
            datasets.load(spark, datasets.resolve(str(path)), "undirected")
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")


def test_empty_graph(spark, tmp_path):
    path = tmp_path / "empty.txt"
    path.write_text("# nothing here\n")
    graph = datasets.load(spark, datasets.resolve(str(path)), "undirected")
    assert graph.edges == 0 and graph.vertices == 0 and graph.df.count() == 0


def test_unknown_dataset_and_missing_file():
    with pytest.raises(DataError, match="unknown dataset 'no-such-graph'"):
        datasets.resolve("no-such-graph")
    with pytest.raises(DataError, match=r"edge file /nonexistent/x.txt: not found"):
        datasets.resolve("/nonexistent/x.txt")
    with pytest.raises(DataError, match="unknown parameter 'scal'"):
        datasets.resolve("rmat:scal=3")


@pytest.mark.parametrize(
    "spec",
    [
        "rmat:scale=7,ef=4,seed=3",
        "rmat:scale=8,ef=2,a=0.7,b=0.1,c=0.1,seed=11",
    ],
)
def test_rmat_is_partition_invariant(spark, spec):
    kind, params = generators.parse_spec(spec)
    runs = [sorted(tuple(r) for r in generators.generate(spark, kind, params, p).collect()) for p in (1, 3, 8)]
    assert runs[0] == runs[1] == runs[2]
    assert len(runs[0]) == params.ef * 2**params.scale
    assert all(0 <= v < 2**params.scale for edge in runs[0] for v in edge)


def _rmat_as_spark_expressions(spark, p: generators.RmatParams):
    """R-MAT as it was defined before numpy computed it (every recorded count on an R-MAT graph was
    made on these edges): one Spark SQL expression per endpoint, a level's draw `uniform(seed, id, level)`."""
    index, src, dst = F.col("id"), F.lit(0).cast("bigint"), F.lit(0).cast("bigint")
    for level in range(p.scale):
        u = generators.uniform(p.seed, index, level)
        bit = F.lit(1 << level).cast("bigint")
        src = src + F.when(u >= p.a + p.b, bit).otherwise(0)
        dst = dst + F.when(((u >= p.a) & (u < p.a + p.b)) | (u >= p.a + p.b + p.c), bit).otherwise(0)
    if p.scramble:
        mask = (1 << p.scale) - 1
        src = (src * generators._SCRAMBLE_MUL + generators._SCRAMBLE_ADD).bitwiseAND(F.lit(mask))
        dst = (dst * generators._SCRAMBLE_MUL + generators._SCRAMBLE_ADD).bitwiseAND(F.lit(mask))
    return spark.range(0, p.ef * (1 << p.scale), numPartitions=2).select(src.alias("src"), dst.alias("dst"))


@pytest.mark.parametrize(
    "spec",
    [
        "rmat:scale=12,ef=2,seed=1",
        "rmat:scale=9,ef=3,a=0.7,b=0.1,c=0.1,seed=11,scramble=false",
        "rmat:scale=5,ef=4,seed=4294967298",
    ],
)
def test_numpy_rmat_places_every_edge_where_the_spark_expressions_do(spark, spec):
    _, params = generators.parse_spec(spec)
    want = [tuple(r) for r in _rmat_as_spark_expressions(spark, params).collect()]
    got = list(zip(*(a.tolist() for a in generators.rmat_edges(params, np.arange(len(want), dtype=np.int64)))))
    assert got == want
    assert sorted(tuple(r) for r in generators.generate(spark, "rmat", params, 3).collect()) == sorted(want)


def test_rmat_is_skewed_and_seeded(spark):
    kind, params = generators.parse_spec("rmat:scale=10,ef=8,seed=1")
    degrees = generators.generate(spark, kind, params, 2).select(F.explode(F.array("src", "dst")).alias("v")).groupBy("v").count()
    stats = degrees.agg(F.max("count").alias("max"), F.avg("count").alias("avg")).first()
    assert stats["max"] > 10 * stats["avg"]  # heavy tail: a=0.57 concentrates edges on few ids
    _, other = generators.parse_spec("rmat:scale=10,ef=8,seed=2")
    a = generators.generate(spark, kind, params, 2).collect()
    b = generators.generate(spark, kind, other, 2).collect()
    assert a != b


def test_registry_holds_the_shared_graphs(shared_datasets):
    registry = datasets.load_registry()
    shared = [s for s in registry.values() if s.kind == "file" and str(shared_datasets) in s.location]
    assert len(shared) == 11
    assert registry["ego-Facebook"].published["undirected"]["triangle"] == 1612010
    assert registry["rmat-default"].kind == "generator"
    # A shared file given by path is recognised, so its published counts still apply.
    by_path = datasets.resolve(str(shared_datasets / "ego-Facebook" / "facebook_combined.txt.gz"))
    assert by_path.name == "ego-Facebook" and by_path.published


def _reference_canonical(rows: list[tuple[int, int]], semantics: str) -> dict:
    """The canonical relation and its counts, by Python sets: what DuckDB's canonicalisation must give."""
    loops = sum(1 for s, d in rows if s == d)
    if semantics == "directed":
        edges = set(rows)
        cleaning = {"input_rows": len(rows), "duplicates_dropped": len(rows) - len(edges), "self_loops_kept": loops}
    else:
        directed = {(s, d) for s, d in rows if s != d}
        edges = {(min(s, d), max(s, d)) for s, d in directed}
        cleaning = {
            "input_rows": len(rows),
            "self_loops_dropped": loops,
            "duplicates_dropped": len(rows) - loops - len(directed),
            "reverse_pairs_merged": len(directed) - len(edges),
        }
    neighbours: dict[int, set[int]] = {}
    for s, d in rows:
        if s != d:
            neighbours.setdefault(s, set()).add(d)
            neighbours.setdefault(d, set()).add(s)
    histogram = sorted(Counter(len(n) for n in neighbours.values()).items())
    vertices = len({v for row in rows for v in row})
    return {"edges": edges, "cleaning": cleaning, "vertices": vertices, "degree_histogram": histogram}


@settings(max_examples=60, deadline=None)
@given(rows=messy_graphs(14, 60, wide_ids=True), semantics=st.sampled_from(["undirected", "directed"]))
def test_canonicalisation_agrees_with_python_sets(rows, semantics, tmp_path_factory):
    """Every count, the relation itself and its fingerprint, on messy graphs with ids over all of int64."""
    where = tmp_path_factory.mktemp("canonical")
    pairs = np.array(rows, dtype=np.int64).reshape(-1, 2)
    got = canonical.canonicalize(pa.table({"src": pairs[:, 0], "dst": pairs[:, 1]}), semantics, where / "e.parquet", where)
    want = _reference_canonical(rows, semantics)
    table = pq.read_table(where / "e.parquet")
    written = list(zip(table.column("src").to_pylist(), table.column("dst").to_pylist()))
    assert len(written) == len(set(written)) == got["edges"] and set(written) == want["edges"]
    assert (got["cleaning"], got["vertices"], got["degree_histogram"]) == (
        want["cleaning"],
        want["vertices"],
        want["degree_histogram"],
    )
    src, dst = (np.array([e[i] for e in sorted(want["edges"])], dtype=np.int64) for i in (0, 1))
    assert got["fingerprint"] == f"{len(want['edges'])}:{sum(int(h) for h in spark_hash.xxhash64_longs(src, dst))}"


def test_the_fingerprint_hash_is_spark_s_xxhash64(spark):
    """spark_hash.xxhash64_longs (numpy) against Spark's own xxhash64, which every later load recomputes."""
    rng = np.random.default_rng(7)
    extremes = [0, 1, -1, 2**63 - 1, -(2**63), 2**31, -(2**31) - 1]
    src = np.concatenate([rng.integers(-(2**63), 2**63 - 1, 2000, dtype=np.int64), np.array(extremes, dtype=np.int64)])
    dst = np.concatenate([rng.integers(-(2**63), 2**63 - 1, 2000, dtype=np.int64), np.array(extremes[::-1], dtype=np.int64)])
    df = spark.createDataFrame(pa.table({"i": np.arange(len(src)), "src": src, "dst": dst}).to_pandas())
    spark_hashes = [r.h for r in df.orderBy("i").select(F.xxhash64("src", "dst").alias("h")).collect()]
    assert spark_hash.xxhash64_longs(src, dst).tolist() == spark_hashes


def test_a_large_relation_is_read_in_splits_and_merged_without_a_shuffle(spark, monkeypatch, tmp_path):
    """Past 32 row groups a partition, the load reads the file in splits and merges them, balanced, and
    leaves Spark's split size as it found it; the count and fingerprint are checked as for any load."""
    monkeypatch.setattr(canonical, "ROW_GROUP_ROWS", 2048)  # DuckDB's smallest row group
    before = spark.conf.get(datasets.MAX_PARTITION_BYTES)
    graph = datasets.load(spark, datasets.resolve("er:n=20000,m=240000,seed=3"), "undirected", partitions=3)
    assert graph.edges >= 32 * 2048 * 3
    assert "Exchange" not in graph.df._jdf.queryExecution().executedPlan().toString()
    sizes = [r["count"] for r in graph.df.groupBy(F.spark_partition_id()).count().collect()]
    assert len(sizes) == 3 and sum(sizes) == graph.edges and max(sizes) < 1.1 * min(sizes)
    assert spark.conf.get(datasets.MAX_PARTITION_BYTES) == before
    small = datasets.from_edges(spark, [(1, 2), (2, 3)], "undirected", partitions=3)
    assert "Exchange hashpartitioning(src" in small.df._jdf.queryExecution().executedPlan().toString()
