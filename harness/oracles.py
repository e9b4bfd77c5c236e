"""Independent oracles: DuckDB SQL generated from the query, and networkx. Neither touches Spark;
each reads the canonical Parquet edges and runs in its own process so a timeout can kill it."""
from __future__ import annotations

import multiprocessing as mp
import time
from collections import defaultdict

from .query import JoinSpec

ORACLES = ("duckdb", "networkx")


# ---------------------------------------------------------------- DuckDB


def oriented_atoms(spec: JoinSpec) -> list[tuple[str, str, bool]]:
    """The query's edges as (x, y, oriented), in the attribute order (by the later, then the earlier
    attribute of each edge). directed: every edge is oriented as written. undirected: where the order
    constraints force x < y (or y < x, then the pair is swapped) the edge is oriented, and reading the
    stored orientation (src < dst) selects the same rows as both directions plus the filter; otherwise
    it reads both directions."""
    position = {a: i for i, a in enumerate(spec.attribute_order)}
    atoms = sorted(spec.query.edges, key=lambda e: (max(position[e[0]], position[e[1]]), min(position[e[0]], position[e[1]])))
    out = []
    for x, y in atoms:
        if spec.semantics != "undirected":
            out.append((x, y, True))
        elif spec.implies_less(y, x):
            out.append((y, x, True))
        else:
            out.append((x, y, spec.implies_less(x, y)))
    return out


def duckdb_sql(spec: JoinSpec, source: str, select: str = "count(*)") -> str:
    """One SQL query computing the same result as `spec`, over `source` (a table expression).

    undirected: every atom reads both directions of the simple graph, all attributes are pairwise
    distinct, and the symmetry-breaking order picks one match per subgraph. directed: a plain join."""
    q = spec.query
    undirected = spec.semantics == "undirected"
    refs: dict[str, list[str]] = defaultdict(list)
    where: list[str] = []
    froms = []
    for i, (x, y, oriented) in enumerate(oriented_atoms(spec)):
        froms.append(f"{'rel' if oriented else 'sym'} AS r{i}")
        refs[x].append(f"r{i}.src")
        refs[y].append(f"r{i}.dst")
    for a in q.attributes:
        where += [f"{refs[a][0]} = {other}" for other in refs[a][1:]]
    col = {a: refs[a][0] for a in q.attributes}
    if undirected:
        attrs = q.attributes
        where += [f"{col[attrs[i]]} <> {col[attrs[j]]}" for i in range(len(attrs)) for j in range(i + 1, len(attrs))]
        where += [f"{col[x]} < {col[y]}" for x, y in spec.less_than]
        # Vertices are renamed to their rank by (degree, id): a bijection, so the set of subgraphs is
        # unchanged, but the order constraints then orient edges towards high degree and the joins
        # stay small on skewed graphs. Matches are renamed back.
        tables = (f"simple AS (SELECT least(src, dst) AS s, greatest(src, dst) AS d FROM {source} WHERE src <> dst), "
                  "deg AS (SELECT v, count(*) AS n FROM (SELECT s AS v FROM simple UNION ALL SELECT d FROM simple) GROUP BY v), "
                  "ranked AS (SELECT v, row_number() OVER (ORDER BY n, v) AS r FROM deg), "
                  "rel AS (SELECT least(a.r, b.r) AS src, greatest(a.r, b.r) AS dst FROM simple "
                  "JOIN ranked a ON simple.s = a.v JOIN ranked b ON simple.d = b.v), "
                  "sym AS (SELECT src, dst FROM rel UNION ALL SELECT dst, src FROM rel)")
    else:
        tables = f"rel AS (SELECT DISTINCT src, dst FROM {source})"
    body = f"FROM {', '.join(froms)}" + (f" WHERE {' AND '.join(where)}" if where else "")
    if select == "count(*)":
        return f"WITH {tables} SELECT count(*) {body}"
    inner = f"SELECT {', '.join(f'{col[a]} AS c{i}' for i, a in enumerate(q.attributes))} {body}"
    if not undirected:
        return f"WITH {tables} {inner}"
    names = ", ".join(f"k{i}.v" for i in range(len(q.attributes)))
    joins = " ".join(f"JOIN ranked k{i} ON m.c{i} = k{i}.r" for i in range(len(q.attributes)))
    return f"WITH {tables}, m AS ({inner}) SELECT {names} FROM m {joins}"


DUCKDB_THREADS = 2


def duckdb_connect():
    """An in-memory DuckDB connection with the oracle's settings (threads, spill budget, join order)."""
    import os
    import tempfile

    import duckdb

    temp_dir = os.path.join(os.environ.get("HARNESS_CACHE", tempfile.gettempdir()), "duckdb-tmp")

    con = duckdb.connect()
    con.execute(f"SET threads = {DUCKDB_THREADS}")
    con.execute("SET enable_progress_bar = false")
    con.execute(f"SET temp_directory = '{temp_dir}'")
    con.execute("SET max_temp_directory_size = '8GB'")
    # Join in the order written (attribute order): DuckDB's own order builds huge intermediates on cliques.
    con.execute("SET disabled_optimizers = 'join_order'")
    con.execute("SET memory_limit = '6GB'")
    return con


def duckdb_oracle(parquet_glob: str, spec: JoinSpec, match_limit: int) -> tuple[int, list | None]:
    con = duckdb_connect()
    source = f"read_parquet('{parquet_glob}')"
    count = con.execute(duckdb_sql(spec, source)).fetchone()[0]
    matches = None
    if count <= match_limit:
        matches = [tuple(r) for r in con.execute(duckdb_sql(spec, source, select="matches")).fetchall()]
    con.close()
    return int(count), matches


# ---------------------------------------------------------------- networkx


def _read_edges(parquet_glob: str) -> list[tuple[int, int]]:
    import duckdb

    return duckdb.sql(f"SELECT src, dst FROM read_parquet('{parquet_glob}')").fetchall()


def networkx_oracle(parquet_glob: str, spec: JoinSpec, match_limit: int) -> tuple[int, list | None]:
    """undirected: networkx's subgraph monomorphisms divided by the pattern's automorphisms (found by
    networkx too), so the harness's symmetry breaking is not used. directed: networkx has no
    homomorphism counter, so this is a backtracking search over a networkx DiGraph."""
    import networkx as nx
    from networkx.algorithms.isomorphism import GraphMatcher

    edges = _read_edges(parquet_glob)
    q = spec.query
    if spec.semantics == "undirected":
        graph = nx.Graph(edges)
        pattern = nx.Graph([(x, y) for x, y in q.edges])
        automorphisms = sum(1 for _ in GraphMatcher(pattern, pattern).isomorphisms_iter())
        instances: dict = {}  # subgraph (edge set) -> one match of it
        monomorphisms = 0
        for mapping in GraphMatcher(graph, pattern).subgraph_monomorphisms_iter():
            monomorphisms += 1
            if len(instances) <= match_limit:
                inverse = {p: g for g, p in mapping.items()}
                match = tuple(inverse[a] for a in q.attributes)
                instances.setdefault(spec.instance_key(match), match)
        if monomorphisms % automorphisms:
            raise RuntimeError(f"{monomorphisms} monomorphisms is not a multiple of |Aut| = {automorphisms}")
        count = monomorphisms // automorphisms
        return count, (list(instances.values()) if count <= match_limit else None)
    graph = nx.DiGraph(edges)
    return _homomorphisms(graph, q, match_limit)


def _homomorphisms(graph, q, match_limit: int) -> tuple[int, list | None]:
    order = [q.attributes[0]]
    while len(order) < len(q.attributes):  # breadth-first so every attribute has a bound neighbour
        nxt = next((a for a in q.attributes if a not in order and any(
            (x == a and y in order) or (y == a and x in order) for x, y in q.edges)), None)
        order.append(nxt or next(a for a in q.attributes if a not in order))
    nodes = list(graph.nodes)
    found: list[tuple] = []
    total = 0

    def search(i: int, value: dict) -> None:
        nonlocal total
        if i == len(order):
            total += 1
            if len(found) <= match_limit:
                found.append(tuple(value[a] for a in q.attributes))
            return
        a = order[i]
        candidates = None
        for x, y in q.edges:
            if x == a and y != a and y in value:
                cand = set(graph.pred[value[y]])
            elif y == a and x != a and x in value:
                cand = set(graph.succ[value[x]])
            else:
                continue
            candidates = cand if candidates is None else candidates & cand
        for v in (nodes if candidates is None else candidates):
            if all(graph.has_edge(v, v) for x, y in q.edges if x == y == a):
                value[a] = v
                search(i + 1, value)
                del value[a]

    search(0, {})
    return total, (found if total <= match_limit else None)


# ---------------------------------------------------------------- running with a timeout


def _child(conn, fn, args: tuple) -> None:
    try:
        conn.send(("ok", fn(*args)))
    except BaseException as exc:  # report, never hang the parent
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


def run_in_child(fn, args: tuple, timeout_s: float) -> tuple[str, object, float]:
    """fn(*args) in a spawned process (fn must be a module-level function), killed at the timeout.
    Returns (status ok|timeout|error, the value or the reason, seconds); never raises."""
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child, fn, args), daemon=True)
    start = time.perf_counter()
    proc.start()
    child.close()
    if parent.poll(timeout_s):
        try:
            status, payload = parent.recv()
        except EOFError:
            status, payload = "error", "child process died"
    else:
        status, payload = "timeout", f"no answer within {timeout_s:g} s"
    seconds = round(time.perf_counter() - start, 3)
    proc.kill() if proc.is_alive() else None
    proc.join(5)
    return status, payload, seconds


_ORACLE_FNS = {"duckdb": duckdb_oracle, "networkx": networkx_oracle}


def run_oracle(name: str, parquet_glob: str, spec: JoinSpec, timeout_s: float, match_limit: int = 2000) -> dict:
    """{name, status: ok|timeout|error, count, matches, seconds, reason}; never raises."""
    status, payload, seconds = run_in_child(_ORACLE_FNS[name], (parquet_glob, spec, match_limit), timeout_s)
    result = {"name": name, "count": None, "matches": None, "reason": None, "seconds": seconds, "status": status}
    if status == "ok":
        result["count"], result["matches"] = payload
    else:
        result["reason"] = payload
    return result
