"""The DuckDB oracle: one SQL join generated from the pattern's edges and the semantics alone.

- undirected: every edge reads both directions of the simple graph, all attributes are pairwise
  distinct, and the rows are the injective matches; the count is their number divided by |Aut|
  (`Pattern.automorphisms`). A k-clique instead reads each edge once as (smaller id, larger id)
  along the oracle's own join order: every permutation of a clique is an automorphism, so exactly
  one of its k! injective matches has increasing ids.
- directed: the plain join over the distinct edge rows (self-loop atoms read the loops).
- anti-edges and induced patterns (`Pattern.forbidden`): each forbidden pair is a `NOT EXISTS`
  (written as `NOT IN`, see `_absent`) over the same edge rows (undirected: the simple graph both ways; directed: the distinct rows x -> y),
  and |Aut| counts only the automorphisms that keep the forbidden pairs. A clique has none.
- vertex labels: each labelled attribute joins the label table (vertex, label) on its value, with
  the label it requires, right after the atom that first binds it; |Aut| counts only the
  automorphisms that keep the labels (a clique with labels is counted as any other pattern).
The join order is the oracle's own (`Pattern.join_order`); DuckDB's optimiser is told to keep it."""

from __future__ import annotations

import os
import tempfile
import time
from collections import defaultdict

from harness.verify.oracles.pattern import Pattern

DUCKDB_THREADS = 2


def sql(pattern: Pattern, source: str, select: str = "count") -> tuple[str, int]:
    """(query, divisor): the query's count(*) (or its rows, select="matches", in attribute order)
    divided by the divisor is the pattern's count over the edge rows `source` (a table expression)."""
    position = {a: i for i, a in enumerate(pattern.join_order())}
    atoms = sorted(pattern.edges, key=lambda e: (max(position[e[0]], position[e[1]]), min(position[e[0]], position[e[1]])))
    clique = pattern.clique_size is not None and not pattern.labels
    refs: dict[str, list[str]] = defaultdict(list)
    froms, where = [], []
    for i, (x, y) in enumerate(atoms):
        if pattern.undirected and clique and position[y] < position[x]:
            x, y = y, x  # the earlier attribute takes the smaller id
        table = "simple" if pattern.undirected and clique else "sym" if pattern.undirected else "rel"
        froms.append(f"{table} AS r{i}")
        refs[x].append(f"r{i}.src")
        refs[y].append(f"r{i}.dst")
        for a, ref in ((x, f"r{i}.src"), (y, f"r{i}.dst")):
            if a in pattern.label_of and len(refs[a]) == 1:  # the attribute's label, as soon as it is bound
                froms.append(f"labels AS l_{a}")
                where += [f"l_{a}.vertex = {ref}", f"l_{a}.label = {pattern.label_of[a]}"]
    for a in pattern.attributes:
        where += [f"{refs[a][0]} = {other}" for other in refs[a][1:]]
    col = {a: refs[a][0] for a in pattern.attributes}
    divisor = 1
    if pattern.undirected:
        tables = (
            f"simple AS (SELECT DISTINCT least(src, dst) AS src, greatest(src, dst) AS dst FROM {source} WHERE src <> dst), "
            "sym AS (SELECT src, dst FROM simple UNION ALL SELECT dst, src FROM simple)"
        )
        if not clique:
            attrs = pattern.attributes
            where += [
                f"{col[a]} <> {col[b]}"
                for i, a in enumerate(attrs)
                for b in attrs[i + 1 :]
                if frozenset((a, b)) not in pattern.pairs
            ]  # adjacent attributes differ: no loops
            divisor = pattern.automorphisms
    else:
        tables = f"rel AS (SELECT DISTINCT src, dst FROM {source})"
    forbidden = (tuple(sorted(p)) for p in pattern.forbidden) if pattern.undirected else pattern.forbidden
    where += [_absent(pattern, col, pair) for pair in sorted(forbidden)]
    body = f"FROM {', '.join(froms)}" + (f" WHERE {' AND '.join(where)}" if where else "")
    what = "count(*)" if select == "count" else ", ".join(col[a] for a in pattern.attributes)
    return f"WITH {tables} SELECT {what} {body}", divisor


def _absent(pattern: Pattern, col: dict, pair: tuple[str, str]) -> str:
    """The condition that no edge joins the values of the forbidden pair (x, y): NOT EXISTS written as
    NOT IN, the same condition on these non-null columns. DuckDB decorrelates NOT EXISTS through a
    join that first materialises every positive match (the induced wedge of rmat-16 ran out of its
    8 GB of spill); NOT IN is a mark join that streams the matches past a hash table of the edges."""
    x, y = pair
    table = "sym" if pattern.undirected else "rel"
    return f"({col[x]}, {col[y]}) NOT IN (SELECT src, dst FROM {table})"


def divide(rows: int, divisor: int) -> int:
    if rows % divisor:
        raise RuntimeError(f"{rows} injective matches is not a multiple of |Aut| = {divisor}")
    return rows // divisor


def connect():
    """An in-memory DuckDB connection with the oracle's settings (threads, memory and spill budget,
    join order as written)."""
    import duckdb

    temp_dir = os.path.join(tempfile.gettempdir(), "harness-duckdb-tmp")  # spills go to local disk, not the store
    con = duckdb.connect()
    con.execute(f"SET threads = {DUCKDB_THREADS}")
    con.execute("SET enable_progress_bar = false")
    con.execute(f"SET temp_directory = '{temp_dir}'")
    con.execute("SET max_temp_directory_size = '8GB'")
    con.execute("SET disabled_optimizers = 'join_order'")  # its own order builds huge intermediates on cliques
    con.execute("SET memory_limit = '6GB'")
    return con


def count_on(con, pattern: Pattern, source: str) -> int:
    query, divisor = sql(pattern, source)
    return divide(int(con.execute(query).fetchone()[0]), divisor)


def oracle(parquet_glob: str, pattern: Pattern, match_limit: int) -> dict:
    """{count, matches (rows, up to |Aut| per instance; None above match_limit), load_s, count_s}."""
    con = connect()
    start = time.perf_counter()
    con.execute(f"CREATE TABLE edges AS SELECT src, dst FROM read_parquet('{parquet_glob}')")
    if pattern.labels:
        con.execute(f"CREATE TABLE labels AS SELECT vertex, label FROM read_parquet('{pattern.labels_glob}')")
    loaded = time.perf_counter()
    count = count_on(con, pattern, "edges")
    counted = time.perf_counter()
    matches = None
    if count <= match_limit:
        matches = [tuple(r) for r in con.execute(sql(pattern, "edges", select="matches")[0]).fetchall()]
    con.close()
    return {"count": count, "matches": matches, "load_s": loaded - start, "count_s": counted - loaded}
