"""Check an implementation's count against published figures and the oracles; for small results,
compare the full sets of matches too. A skipped or timed-out oracle never counts as agreement."""
from __future__ import annotations

from collections import Counter
from typing import Callable

from .errors import DataError
from .oracles import ORACLES, run_oracle
from .query import BUILTINS, JoinSpec

ORACLE_CHOICES = ("auto", *ORACLES, "published", "none")  # published: only the published count, if any
NETWORKX_AUTO_MAX_EDGES = 3000  # above this `auto` uses DuckDB: networkx enumerates every monomorphism
MAX_COUNTEREXAMPLES = 20


def published_count(published: dict, spec: JoinSpec) -> int | None:
    builtin = BUILTINS.get(spec.query.name)
    if builtin is None or builtin.edges != spec.query.edges:
        return None
    return (published.get(spec.semantics) or {}).get(spec.query.name)


def oracles_for(choice: str, edges: int) -> list[str]:
    if choice not in ORACLE_CHOICES:
        raise DataError(f"unknown oracle '{choice}' (expected one of {', '.join(ORACLE_CHOICES)})")
    if choice in ("none", "published"):
        return []
    if choice == "auto":
        return ["networkx"] if edges <= NETWORKX_AUTO_MAX_EDGES else ["duckdb"]
    return [choice]


def compare_matches(spec: JoinSpec, found: list[tuple], expected: list[tuple]) -> list[dict]:
    """Multiset difference of subgraph instances, as readable counterexamples."""
    got = Counter(spec.instance_key(m) for m in found)
    want = Counter(spec.instance_key(m) for m in expected)
    example = {spec.instance_key(m): m for m in list(found) + list(expected)}
    out = []
    for kind, diff in (("missing", want - got), ("extra", got - want)):
        for key, times in diff.items():
            out.append({"kind": kind, "times": times, "match": dict(zip(spec.query.attributes, example[key]))})
    return out


def verify(published: dict, parquet_glob: str, edges: int, spec: JoinSpec, count: int,
           fetch_matches: Callable[[int], list[tuple]], choice: str = "auto",
           timeout_s: float = 600.0, match_limit: int = 2000) -> dict:
    checks = []
    pub = published_count(published, spec) if choice != "none" else None
    if pub is not None:
        checks.append({"name": "published", "status": "ok", "count": pub, "agrees": pub == count, "seconds": 0.0})
    for name in oracles_for(choice, edges):
        check = run_oracle(name, parquet_glob, spec, timeout_s, match_limit)
        expected = check.pop("matches")
        check["agrees"] = (check["count"] == count) if check["status"] == "ok" else None
        if check["agrees"] is not None and expected is not None and count <= match_limit:
            diff = compare_matches(spec, fetch_matches(match_limit + 1), expected)
            check["matches_compared"] = len(expected)
            check["counterexamples"] = diff[:MAX_COUNTEREXAMPLES]
            check["counterexamples_total"] = len(diff)
            check["agrees"] = check["agrees"] and not diff
        checks.append(check)
    computed = [c for c in checks if c["name"] != "published"]
    if computed:
        primary = computed[0]
    elif checks:
        primary = checks[0]
    else:
        primary = {"name": choice, "status": "skipped", "count": None, "agrees": None, "seconds": 0.0,
                   "reason": {"none": "--oracle none", "published": "no published count for this graph and query"}.get(choice, "no oracle applies")}
    disagrees = any(c["agrees"] is False for c in checks)
    return {
        "oracle": primary,
        "checks": checks,
        "verified": (not disagrees) and any(c["agrees"] for c in checks),
        "disagrees": disagrees,
    }
