"""Check an implementation's count against published figures and the independent oracles; for small
results, compare the full sets of matches too. Only an independent check that agreed verifies a
count: a skipped, failed or timed-out oracle never does, and the reason is kept."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from harness.core import motifs
from harness.core.errors import DataError
from harness.core.query import BUILTINS, JoinSpec
from harness.verify.oracles import FASTEST_FIRST, ORACLES, Pattern, choose, run_oracle

ORACLE_CHOICES = ("auto", *ORACLES, "published", "none")  # published: only the published count, if any
MAX_COUNTEREXAMPLES = 20


def published_count(published: dict, spec: JoinSpec) -> int | None:
    """The published count of this query on this graph: a built-in's (by name, same edges), or a census
    shape's vertex-induced count (`induced_motifs`, GraphMiner's). None for a labelled pattern."""
    if spec.query.labels:
        return None
    motif = motifs.motif_of(spec.query) if spec.semantics == "undirected" else None
    if motif is not None and motif.name in (published.get("induced_motifs") or {}):
        return published["induced_motifs"][motif.name]
    builtin = BUILTINS.get(spec.query.name)
    if builtin is None or builtin.edges != spec.query.edges:
        return None
    return (published.get(spec.semantics) or {}).get(spec.query.name)


def oracles_for(choice: str, pattern: Pattern, edges: int) -> list[str]:
    if choice not in ORACLE_CHOICES:
        raise DataError(f"unknown oracle '{choice}' (expected one of {', '.join(ORACLE_CHOICES)})")
    if choice in ("none", "published"):
        return []
    try:
        return choose(choice, pattern, edges)
    except StopIteration:  # auto found none that applies: each is reported skipped, with its reason
        return list(FASTEST_FIRST)


def compare_matches(pattern: Pattern, found: list[tuple], expected: list[tuple], subset: bool = False) -> list[dict]:
    """Differences between the implementation's matches (one per result) and an oracle's, as readable
    counterexamples. In undirected semantics an oracle may list several matches of one subgraph (its
    automorphic images): each subgraph is expected once. `subset`: a run stopped at a limit found some of
    them, so only extra ones (or one found twice) differ."""
    got = Counter(pattern.instance_key(m) for m in found)
    keys = [pattern.instance_key(m) for m in expected]
    want = Counter(set(keys)) if pattern.undirected else Counter(keys)
    example = {pattern.instance_key(m): m for m in list(expected) + list(found)}
    out = []
    for kind, diff in (("missing", Counter() if subset else want - got), ("extra", got - want)):
        for key, times in diff.items():
            out.append({"kind": kind, "times": times, "match": dict(zip(pattern.attributes, example[key]))})
    return out


def unverified_reason(choice: str, checks: list[dict]) -> str:
    """Why nothing independent agreed with a count that nothing contradicted."""
    if choice == "none":
        return "--oracle none: no independent check was run"
    if not checks:
        return "no published count for this graph and query" if choice == "published" else "no oracle applies"
    return "; ".join(f"{c['name']} {c['status']}" + (f": {c['reason']}" if c.get("reason") else "") for c in checks)


def verify(
    published: dict,
    parquet_glob: str,
    edges: int,
    spec: JoinSpec,
    count: int,
    fetch_matches: Callable[[int], list[tuple]] | None,
    choice: str = "auto",
    timeout_s: float = 600.0,
    match_limit: int = 2000,
    answers: dict | None = None,
    limit: int | None = None,
    labels_glob: str | None = None,
) -> dict:
    """{oracle, checks, verified, disagrees, unverified_reason}. `answers` caches oracle answers by
    (edges file, pattern, oracle) across runs on the same graph (each check says if it was reused).
    `fetch_matches` None: the count is not of matches the implementation can list (a census shape
    converted from another pattern's count), so only counts are compared. `limit`: the run stopped after
    that many matches, so each check expects min(limit, its count) (its `expected`) and the matches found
    must be some of the oracle's, each once. `labels_glob`: the graph's vertex label table, for a
    labelled pattern."""
    pattern = Pattern.of(spec.query, spec.semantics, labels_glob if spec.query.labels else None)

    def expect(true_count: int) -> dict:
        expected = true_count if limit is None else min(limit, true_count)
        return {"agrees": expected == count} | ({} if limit is None else {"limit": limit, "expected": expected})

    checks = []
    pub = published_count(published, spec) if choice != "none" else None
    if pub is not None:
        checks.append({"name": "published", "status": "ok", "count": pub, "seconds": 0.0} | expect(pub))
    for name in oracles_for(choice, pattern, edges):
        key = (parquet_glob, pattern, name, match_limit)
        reused = answers is not None and key in answers
        if not reused:
            answer = run_oracle(name, parquet_glob, pattern, timeout_s, match_limit)
            if answers is not None and answer["status"] == "ok":
                answers[key] = answer
        check = dict(answers[key] if answers is not None and reused else answer, reused=reused)
        expected = check.pop("matches")
        check.update(expect(check["count"]) if check["status"] == "ok" else {"agrees": None})
        if check["agrees"] is not None and expected is not None and fetch_matches is not None and count <= match_limit:
            diff = compare_matches(pattern, fetch_matches(match_limit + 1), expected, subset=limit is not None)
            check["matches_compared"] = len({pattern.instance_key(m) for m in expected})
            check["counterexamples"] = diff[:MAX_COUNTEREXAMPLES]
            check["counterexamples_total"] = len(diff)
            check["agrees"] = check["agrees"] and not diff
        checks.append(check)
    computed = [c for c in checks if c["name"] != "published"]
    primary = (
        computed[0]
        if computed
        else checks[0]
        if checks
        else {
            "name": choice,
            "status": "skipped",
            "count": None,
            "agrees": None,
            "seconds": 0.0,
            "reason": unverified_reason(choice, []),
        }
    )
    disagrees = any(c["agrees"] is False for c in checks)
    verified = (not disagrees) and any(c["agrees"] for c in checks)
    return {
        "oracle": primary,
        "checks": checks,
        "verified": verified,
        "disagrees": disagrees,
        "unverified_reason": None if verified or disagrees else unverified_reason(choice, checks),
    }
