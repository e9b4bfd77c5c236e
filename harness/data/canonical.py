"""Canonicalisation out of core: DuckDB reduces raw (src, dst) rows to the canonical relation and
counts every row each step removes, in one grouping by canonical pair that spills to disk past a
memory limit. Spark generates or parses the raw rows; this reduces them in seconds where Spark's
shuffles took minutes (842 s for the LiveJournal twin's 69M rows)."""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
import pyarrow as pa

from harness.data.spark_hash import xxhash64_longs

# DuckDB's working memory; past it the groupings spill to `scratch`. For the LiveJournal twin, 2 GB gives a peak of
# 2.2 GiB (about twice its CSR of int64 lists both ways, 1.06 GiB); 1536MB gives 1.7 GiB and takes 4 s more.
MEMORY_LIMIT = os.environ.get("HARNESS_CANON_MEMORY", "2GB")
_BATCH = 1 << 20
ROW_GROUP_ROWS = 122_880  # DuckDB's Parquet row groups, the smallest unit Spark splits a file into


def canonicalize(raw: str | pa.Table, semantics: str, out_file: Path, scratch: Path) -> dict:
    """Write the canonical relation of `raw` (a Parquet glob or an Arrow table of (src, dst) int64)
    to `out_file`; return {vertices, edges, cleaning, fingerprint, degree_histogram}."""
    con = duckdb.connect()
    try:
        con.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")
        con.execute(f"SET threads = {max(1, os.cpu_count() or 1)}")
        con.execute(f"SET temp_directory = '{scratch}'")
        con.execute("SET preserve_insertion_order = false")
        if isinstance(raw, pa.Table):
            con.register("raw_rows", raw)
            source = "raw_rows"
        else:
            source = f"read_parquet('{raw}')"
        _group_pairs(con, source, semantics)
        summary = _cleaning(con, semantics)
        kept = "TRUE" if semantics == "directed" else "lo <> hi"
        con.execute(
            f"COPY (SELECT lo AS src, hi AS dst FROM pairs WHERE {kept}) TO '{out_file}' (FORMAT parquet, ROW_GROUP_SIZE {ROW_GROUP_ROWS})"
        )
        summary["fingerprint"] = f"{summary['edges']}:{_hash_sum(con, kept)}"
        summary["vertices"], summary["degree_histogram"] = _vertices_and_degrees(con, semantics)
        return summary
    finally:
        con.close()


def _group_pairs(con, source: str, semantics: str) -> None:
    """pairs(lo, hi, rows, orientations): one row per canonical pair (directed: (src, dst); undirected:
    {src, dst} as lo <= hi), the raw rows it stands for and in how many directions they ran (1 or 2)."""
    if semantics == "directed":
        lo, hi, forward = "src", "dst", "TRUE"
    else:
        lo, hi, forward = "least(src, dst)", "greatest(src, dst)", "src <= dst"
    con.execute(
        f"""CREATE TEMP TABLE pairs AS
            SELECT lo, hi, count(*) AS rows, bool_or(forward)::INT + bool_or(NOT forward)::INT AS orientations
            FROM (SELECT {lo} AS lo, {hi} AS hi, {forward} AS forward FROM {source}) GROUP BY lo, hi"""
    )


def _cleaning(con, semantics: str) -> dict:
    raw_rows, loops, pairs, loop_pairs, directed_pairs = con.execute(
        """SELECT coalesce(sum(rows), 0), coalesce(sum(rows) FILTER (lo = hi), 0), count(*),
                  count(*) FILTER (lo = hi), coalesce(sum(orientations) FILTER (lo <> hi), 0) FROM pairs"""
    ).fetchone()
    raw_rows, loops, directed_pairs = int(raw_rows), int(loops), int(directed_pairs)
    if semantics == "directed":
        cleaning = {"input_rows": raw_rows, "duplicates_dropped": raw_rows - pairs, "self_loops_kept": loops}
        return {"edges": pairs, "cleaning": cleaning}
    edges = pairs - loop_pairs
    cleaning = {
        "input_rows": raw_rows,
        "self_loops_dropped": loops,
        "duplicates_dropped": raw_rows - loops - directed_pairs,
        "reverse_pairs_merged": directed_pairs - edges,
    }
    return {"edges": edges, "cleaning": cleaning}


def _vertices_and_degrees(con, semantics: str) -> tuple[int, list[tuple[int, int]]]:
    """The vertices (every endpoint of a raw row, self-loops' too) and the (degree, vertices) histogram of
    the undirected simple graph (distinct neighbours, loops excluded), in one grouping by vertex."""
    links = (
        "SELECT DISTINCT least(lo, hi) AS a, greatest(lo, hi) AS b FROM pairs WHERE lo <> hi"
        if semantics == "directed"
        else "SELECT lo AS a, hi AS b FROM pairs WHERE lo <> hi"
    )
    rows = con.execute(
        f"""WITH links AS ({links}), degree AS (
                SELECT v, sum(link) AS d FROM (SELECT a AS v, 1 AS link FROM links UNION ALL SELECT b, 1 FROM links
                                               UNION ALL SELECT lo, 0 FROM pairs WHERE lo = hi) GROUP BY v)
            SELECT d, count(*) FROM degree GROUP BY d ORDER BY d"""
    ).fetchall()
    histogram = [(int(d), int(c)) for d, c in rows]
    return sum(c for _, c in histogram), [(d, c) for d, c in histogram if d > 0]


def _hash_sum(con, kept: str) -> int:
    """The exact sum of Spark's xxhash64(src, dst) over the kept pairs, batch by batch: the fingerprint
    a load recomputes in Spark (datasets._fingerprint), so that check is made by other code."""
    reader = con.sql(f"SELECT lo, hi FROM pairs WHERE {kept}").to_arrow_reader(_BATCH)
    total = 0
    for batch in reader:
        hashes = xxhash64_longs(batch.column(0).to_numpy(), batch.column(1).to_numpy())
        # Exact: the high and low 32 bits summed apart cannot overflow int64 within a batch.
        total += (int((hashes >> 32).sum()) << 32) + int((hashes & 0xFFFFFFFF).sum())
    return total
