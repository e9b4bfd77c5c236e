"""Peer systems that `compare` runs beside the project's implementations, each on the same canonical
graph (the harness's Parquet edges) and each returning a PeerResult:

- DuckDB: the DuckDB oracle's query (`oracles.sql`) over the edges loaded into a DuckDB table;
- Kùzu: the edges copied into a fresh on-disk database, the pattern as one Cypher MATCH;
- networkx: the networkx oracle (small graphs only);
- SuiteSparse:GraphBLAS: the GraphBLAS oracle (triangles and undirected 4-cycles);
- the native counter: the project's own reference kernel (`oracles.native`), shown as the native
  floor; it is not outside the project, so it never verifies a comparison on its own;
- Spark GraphX: `TriangleCount` through py4j, in the harness's Spark session (triangles only).

Every peer sees the pattern's edges and the semantics only (`oracles.Pattern`): none of the
implementations' symmetry breaking. DuckDB, Kùzu, networkx, GraphBLAS and the native counter run in a
child process that is killed at the timeout (`oracles.run_in_child`); GraphX runs in the driver and is
cancelled through its Spark job group."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from harness.core import store
from harness.verify.oracles import Pattern, linalg, native, not_applicable, nx_search, run_in_child, sql
from harness.verify.oracles import edges as edge_arrays

KUZU_THREADS = sql.DUCKDB_THREADS
KUZU_BUFFER_POOL_BYTES = (
    12 << 30
)  # Kùzu keeps intermediates in its pool: 6 GiB fails on clique4 of ego-Facebook; its default is 80% of memory


@dataclass
class PeerResult:
    """One row of a comparison. status: OK | TIM | EXE | SKIP (with `error` the reason)."""

    system: str
    cores: str  # what it ran on: "W=2" (Spark), "2 threads", "1 core"
    status: str
    count: int | None = None
    load_s: float | None = None  # bringing the canonical edges into the system (project impls: index_s)
    query_s: float | None = None
    error: str | None = None
    workers: int | None = None  # Spark's W, where there is one
    extra: dict = field(default_factory=dict)

    @property
    def total_s(self) -> float | None:
        if self.status != "OK" or self.query_s is None:
            return None
        return round((self.load_s or 0.0) + self.query_s, 4)

    def to_json(self) -> dict:
        return {
            "system": self.system,
            "cores": self.cores,
            "workers": self.workers,
            "status": self.status,
            "count": self.count,
            "load_s": self.load_s,
            "query_s": self.query_s,
            "total_s": self.total_s,
            "error": self.error,
            **self.extra,
        }


def skipped(system: str, cores: str, reason: str) -> PeerResult:
    return PeerResult(system, cores, "SKIP", error=reason)


# ---------------------------------------------------------------- in a child process


def _timed(fn):
    start = time.perf_counter()
    value = fn()
    return round(time.perf_counter() - start, 4), value


def duckdb_count(parquet_glob: str, pattern: Pattern) -> dict:
    con = sql.connect()
    load_s, _ = _timed(lambda: con.execute(f"CREATE TABLE edges AS SELECT src, dst FROM read_parquet({_quote(parquet_glob)})"))
    query_s, count = _timed(lambda: sql.count_on(con, pattern, "edges"))
    con.close()
    return {"count": count, "load_s": load_s, "query_s": query_s}


def kuzu_cypher(pattern: Pattern) -> tuple[str, int]:
    """(query, divisor): one Cypher MATCH whose count divided by the divisor is the pattern's count, as
    the DuckDB oracle computes it. Kùzu matches with walk semantics (nodes and relationships may
    repeat), so a directed pattern is the plain join. Undirected: a k-clique reads each stored
    (src < dst) relationship one way along the join order (increasing ids, divisor 1); any other
    pattern reads both directions with all attributes pairwise distinct, divided by |Aut|."""
    var = {a: f"v{i}" for i, a in enumerate(pattern.attributes)}  # attribute names may be Cypher keywords
    position = {a: i for i, a in enumerate(pattern.join_order())}
    clique = pattern.clique_size is not None
    bound: set[str] = set()

    def node(a: str) -> str:
        if a in bound:
            return f"({var[a]})"
        bound.add(a)
        return f"({var[a]}:V)"

    paths = []
    for x, y in sorted(pattern.edges, key=lambda e: (max(position[e[0]], position[e[1]]), min(position[e[0]], position[e[1]]))):
        if clique and position[y] < position[x]:
            x, y = y, x
        paths.append(f"{node(x)}-[:E]-{'>' if clique or not pattern.undirected else ''}{node(y)}")
    where, divisor = [], 1
    if pattern.undirected and not clique:
        attrs = pattern.attributes
        where = [
            f"{var[a]}.id <> {var[b]}.id"
            for i, a in enumerate(attrs)
            for b in attrs[i + 1 :]
            if frozenset((a, b)) not in pattern.pairs
        ]
        divisor = pattern.automorphisms
    return f"MATCH {', '.join(paths)}" + (f" WHERE {' AND '.join(where)}" if where else "") + " RETURN count(*)", divisor


def kuzu_count(parquet_glob: str, pattern: Pattern, db_dir: str) -> dict:
    """Copy the canonical edges into a fresh Kùzu database under db_dir (vertices from the edges'
    endpoints, then the relationships, both by Kùzu's own COPY FROM Parquet) and count."""
    import kuzu

    db = kuzu.Database(str(Path(db_dir) / "db"), buffer_pool_size=KUZU_BUFFER_POOL_BYTES, max_num_threads=KUZU_THREADS)
    con = kuzu.Connection(db, num_threads=KUZU_THREADS)
    source = _quote(parquet_glob)

    def load():
        con.execute("CREATE NODE TABLE V(id INT64, PRIMARY KEY(id))")
        con.execute("CREATE REL TABLE E(FROM V TO V)")
        con.execute(f"COPY V FROM (LOAD FROM {source} RETURN src AS id UNION LOAD FROM {source} RETURN dst AS id)")
        con.execute(f"COPY E FROM {source}")

    load_s, _ = _timed(load)
    cypher, divisor = kuzu_cypher(pattern)
    query_s, result = _timed(lambda: cast(kuzu.QueryResult, con.execute(cypher)).get_next())  # one statement, one result
    con.close()
    db.close()
    return {"count": sql.divide(int(result[0]), divisor), "load_s": load_s, "query_s": query_s}


def networkx_count(parquet_glob: str, pattern: Pattern) -> dict:
    """The networkx oracle: its own read of the edges is its load."""
    answer = nx_search.oracle(parquet_glob, pattern, 0)
    return {"count": answer["count"], "load_s": round(answer["load_s"], 4), "query_s": round(answer["count_s"], 4)}


def in_memory_count(parquet_glob: str, pattern: Pattern, counter: str) -> dict:
    """GraphBLAS or the native counter: load is reading the Parquet edges into arrays; query is
    building their own structures (renumbering, matrices or sorted lists) and counting."""
    load_s, (src, dst) = _timed(lambda: edge_arrays.read(parquet_glob))
    if counter == "native":
        native.warm_up()  # compiled before the clock starts, as for every numba kernel here
        count, query_s = native.count(src, dst, pattern)
    else:
        count, query_s = linalg.count(src, dst, pattern)
    return {"count": count, "load_s": load_s, "query_s": round(query_s, 4)}


def _quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


# ---------------------------------------------------------------- from the driver


def run_child_peer(system: str, cores: str, fn, args: tuple, timeout_s: float) -> PeerResult:
    """Run a peer's count in a child process (killed at the timeout): TIM, EXE or OK with its times."""
    status, payload, seconds = run_in_child(fn, args, timeout_s)
    if status == "timeout":
        return PeerResult(system, cores, "TIM", error=f"timed out after {seconds:.1f} s", extra={"wall_s": seconds})
    if status != "ok":
        return PeerResult(
            system,
            cores,
            "EXE",
            error=str(payload).strip().splitlines()[0][:300] if payload else "failed",
            extra={"wall_s": seconds},
        )
    return PeerResult(system, cores, "OK", payload["count"], payload["load_s"], payload["query_s"], extra={"wall_s": seconds})


def duckdb_peer(parquet_glob: str, pattern: Pattern, timeout_s: float) -> PeerResult:
    return run_child_peer("duckdb", f"{sql.DUCKDB_THREADS} threads", duckdb_count, (parquet_glob, pattern), timeout_s)


def kuzu_peer(parquet_glob: str, pattern: Pattern, timeout_s: float) -> PeerResult:
    db_dir = tempfile.mkdtemp(prefix="harness-kuzu-")
    try:
        result = run_child_peer("kuzu", f"{KUZU_THREADS} threads", kuzu_count, (parquet_glob, pattern, db_dir), timeout_s)
    finally:
        shutil.rmtree(db_dir, ignore_errors=True)
    result.extra["cypher"], result.extra["divisor"] = kuzu_cypher(pattern)
    return result


def networkx_peer(parquet_glob: str, pattern: Pattern, edges: int, max_edges: int, timeout_s: float) -> PeerResult:
    if edges > max_edges:
        return skipped("networkx", "1 core", f"{edges:,} edges > {max_edges:,} (--networkx-max-edges)")
    return run_child_peer("networkx", "1 core", networkx_count, (parquet_glob, pattern), timeout_s)


def in_memory_peer(system: str, parquet_glob: str, pattern: Pattern, timeout_s: float) -> PeerResult:
    """`graphblas` (2 threads) or `native` (1 core), where the pattern is one they count."""
    cores = f"{linalg.THREADS} threads" if system == "graphblas" else "1 core"
    reason = not_applicable(system, pattern)
    if reason is not None:
        return skipped(system, cores, reason)
    return run_child_peer(system, cores, in_memory_count, (parquet_glob, pattern, system), timeout_s)


def graphx_peer(spark, graph, pattern: Pattern, workers: int, timed) -> PeerResult:
    """Spark GraphX's TriangleCount, driven through py4j in the harness's Spark session.

    load: the canonical edges written as a space-separated text edge list by a DataFrame write, then
    `GraphLoader.edgeListFile(canonicalOrientation = true, W edge partitions)`, materialised;
    count: `TriangleCount.run`, and its per-vertex counts totalled in the JVM as a small map of
    count -> vertices (`countByValue`): each triangle is counted at its three vertices.
    `timed(phase, fn)` runs fn under the comparison's timeout and returns (seconds, value)."""
    cores = f"W={workers}"
    if not pattern.undirected or not pattern.is_triangle_shape:
        return skipped(
            "graphx",
            cores,
            "GraphX TriangleCount counts triangles only" + ("" if pattern.undirected else " (undirected semantics)"),
        )
    from pyspark.sql import functions as F

    sc = spark.sparkContext
    jvm = sc._jvm
    class_tag = getattr(getattr(jvm.scala.reflect, "ClassTag$"), "MODULE$")
    memory_only = jvm.org.apache.spark.storage.StorageLevel.MEMORY_ONLY()
    workdir = store.new_scratch("graphx")  # executors write and read the export: the store, not /tmp
    path = str(workdir / "edges")
    graphs = []

    def load():
        graph.df.select(F.concat_ws(" ", "src", "dst")).write.text(path)
        g = jvm.org.apache.spark.graphx.GraphLoader.edgeListFile(sc._jsc.sc(), path, True, workers, memory_only, memory_only)
        graphs.append(g)
        return g.edges().count()

    def count():
        counted = jvm.org.apache.spark.graphx.lib.TriangleCount.run(graphs[0], class_tag.Int(), class_tag.Int())
        graphs.append(counted)
        pairs = jvm.org.apache.spark.api.java.JavaPairRDD.fromRDD(counted.vertices(), class_tag.Long(), class_tag.Int())
        histogram = pairs.values().countByValue()  # {triangles at a vertex: vertices}
        total = sum(int(k) * int(v) for k, v in histogram.items())
        if total % 3:
            raise RuntimeError(f"per-vertex triangle counts sum to {total}, not a multiple of 3")
        return total // 3

    try:
        load_s, edges = timed("load", load)
        query_s, triangles = timed("count", count)
        return PeerResult(
            "graphx",
            cores,
            "OK",
            triangles,
            round(load_s, 4),
            round(query_s, 4),
            workers=workers,
            extra={"graphx_edges": int(edges)},
        )
    finally:
        for g in graphs:
            with contextlib.suppress(Exception):
                g.unpersist(False)
        shutil.rmtree(workdir, ignore_errors=True)
