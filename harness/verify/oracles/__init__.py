"""Independent oracles: counts of a pattern on the canonical Parquet edges by code that shares nothing
with `implementations/` (a test walks the imports) and sees only the pattern's edges and the
semantics (`Pattern`). Each runs in a child process that a timeout kills.

| oracle | counts | where it applies |
|---|---|---|
| networkx | undirected: subgraph monomorphisms (isomorphisms when induced) / automorphisms, both by networkx; directed: backtracking homomorphisms | any pattern; small graphs |
| duckdb | one SQL join: injective matches / |Aut| (cliques: increasing ids), or the plain directed join; `NOT EXISTS` per forbidden pair | any pattern, anti-edges and induced too |
| graphblas | SuiteSparse:GraphBLAS masked products (triangles), A·A (4-cycles) | triangles (both semantics), undirected 4-cycles; no forbidden pairs |
| native | a plain numba k-clique counter (degree orientation, sorted merges); houses from 4-cliques; induced 3- and 4-vertex shapes from non-induced counts (motifs.py) | undirected k-cliques, houses; induced undirected 3- and 4-vertex connected patterns |

`auto` takes networkx on small graphs (it also lists the matches), else the fastest oracle that
applies: native, then GraphBLAS, then DuckDB."""

from __future__ import annotations

from typing import Any

from harness.verify.oracles import linalg, motifs, native, nx_search, sql
from harness.verify.oracles.child import run_in_child
from harness.verify.oracles.pattern import Pattern

NETWORKX_AUTO_MAX_EDGES = 3000  # above this `auto` leaves networkx out: it enumerates every monomorphism

COUNTS = {
    "networkx": "undirected: networkx subgraph monomorphisms (isomorphisms when induced, anti-edges filtered) "
    "divided by the automorphisms networkx finds that keep the forbidden pairs; "
    "directed: homomorphisms by backtracking over a networkx DiGraph",
    "duckdb": "one DuckDB SQL join: undirected, injective matches over both edge directions divided by |Aut| "
    "(k-cliques: matches with increasing ids); directed, the plain join over the distinct edge rows; each pair "
    "of attributes that must not be joined (anti-edges, induced) a NOT EXISTS over the same edges, and |Aut| "
    "over the automorphisms that keep those pairs",
    "graphblas": "SuiteSparse:GraphBLAS: undirected triangles sum(L·L masked by L); directed triangle patterns "
    "sum((R1·R2) masked by R3); undirected 4-cycles sum over i != j of C_ij(C_ij - 1) / 8 with C = A·A",
    "native": "undirected k-cliques by a plain single-threaded numba kernel: degree-ordered orientation, "
    "sorted-merge intersections (the native reference); houses as the sum over 4-cliques and their "
    "edges of (triangles on the edge) - 2; induced undirected 3- and 4-vertex patterns as a linear "
    "combination of non-induced counts (from degrees, triangles per edge, 4-cycles by Chiba-Nishizeki "
    "paths and 4-cliques)",
}
ORACLES = tuple(COUNTS)
FASTEST_FIRST = ("native", "graphblas", "duckdb")  # measured: see docs/oracles.md ("Oracle speed" in results/README.md)


def not_applicable(name: str, pattern: Pattern) -> str | None:
    """None if oracle `name` counts this pattern, else the reason it does not."""
    if pattern.labels and name in ("native", "graphblas"):
        return "does not count patterns with vertex labels"
    if name == "native":
        if motifs.applicable(pattern) is None:
            return None
        if pattern.forbidden or not (pattern.clique_size is not None or pattern.is_house):
            return "counts undirected k-cliques, houses and induced 3- and 4-vertex patterns only"
        return None
    if name == "graphblas":
        return "does not count patterns with anti-edges or induced patterns" if pattern.forbidden else linalg.applicable(pattern)
    return None


def choose(choice: str, pattern: Pattern, edges: int) -> list[str]:
    """The oracles that `choice` (auto or a name) runs on a graph of `edges` edges."""
    if choice != "auto":
        return [choice]
    if edges <= NETWORKX_AUTO_MAX_EDGES:
        return ["networkx"]
    return [next(name for name in FASTEST_FIRST if not_applicable(name, pattern) is None)]


def _in_memory(count_fn):
    def run(parquet_glob: str, pattern: Pattern, match_limit: int) -> dict:
        import time

        from harness.verify.oracles import edges as edge_arrays

        start = time.perf_counter()
        src, dst = edge_arrays.read(parquet_glob)
        load_s = time.perf_counter() - start
        count, count_s = count_fn(src, dst, pattern)
        return {"count": count, "matches": None, "load_s": load_s, "count_s": count_s}

    return run


def native_count(src, dst, pattern: Pattern) -> tuple[int, float]:
    """The native oracle's (count, seconds): an induced 3- or 4-vertex pattern by motifs.py, else
    native.py's k-cliques and houses."""
    return (motifs.count if motifs.applicable(pattern) is None else native.count)(src, dst, pattern)


def native_oracle(parquet_glob: str, pattern: Pattern, match_limit: int) -> dict:
    native.warm_up()  # compile outside the timed count
    if motifs.applicable(pattern) is None:
        motifs.warm_up()
    return _in_memory(native_count)(parquet_glob, pattern, match_limit)


def graphblas_oracle(parquet_glob: str, pattern: Pattern, match_limit: int) -> dict:
    return _in_memory(linalg.count)(parquet_glob, pattern, match_limit)


FUNCTIONS = {"networkx": nx_search.oracle, "duckdb": sql.oracle, "graphblas": graphblas_oracle, "native": native_oracle}


def run_oracle(name: str, parquet_glob: str, pattern: Pattern, timeout_s: float, match_limit: int = 2000) -> dict:
    """{name, counts, status: ok|timeout|error|skipped, count, matches, seconds, load_s, count_s, reason}; never raises."""
    result: dict[str, Any] = {
        "name": name,
        "counts": COUNTS[name],
        "count": None,
        "matches": None,
        "reason": None,
        "seconds": 0.0,
        "load_s": None,
        "count_s": None,
        "status": "skipped",
    }
    reason = not_applicable(name, pattern)
    if reason is not None:
        result["reason"] = f"not applicable: {reason}"
        return result
    status, payload, seconds = run_in_child(FUNCTIONS[name], (parquet_glob, pattern, match_limit), timeout_s)
    result.update(status=status, seconds=seconds)
    if status == "ok":
        result.update(
            count=payload["count"],
            matches=payload["matches"],
            load_s=round(payload["load_s"], 4),
            count_s=round(payload["count_s"], 4),
        )
    else:
        result["reason"] = payload
    return result


__all__ = [
    "COUNTS",
    "NETWORKX_AUTO_MAX_EDGES",
    "ORACLES",
    "Pattern",
    "choose",
    "native_count",
    "not_applicable",
    "run_in_child",
    "run_oracle",
]
