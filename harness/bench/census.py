"""The motif census as one run (`--query motifs:3` or `motifs:4`): every connected k-vertex shape
counted vertex-induced by one implementation, each verified on its own, summed into one record.

How the implementation counts is the census method (`census.method` in the record):
- `induced`: each shape as a vertex-induced pattern (its non-edges anti-edges), which the
  implementation counts itself (its class says `anti_edges = True`);
- `convert`: each shape as a plain (non-induced) pattern, then the induced counts from the linear
  relation between the two (`motifs.induced_from_noninduced`).
Either way each shape's induced count is checked against the oracles counting the induced pattern
(and GraphMiner's published counts where the registry has them): the conversion is never trusted
unchecked."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from rich import box
from rich.table import Table

from harness.bench.record import RunRecord
from harness.bench.tables import fmt_int
from harness.core import motifs
from harness.core.errors import DataError
from harness.core.query import JoinSpec, make_join_spec

METHODS = ("induced", "convert")
# Counters and metrics that add up over the census's runs (the rest stay per motif): what the
# contest's "tuples moved" and "rounds" columns and the logical table read.
ADDITIVE_COUNTERS = (
    "tuples_exchanged",
    "tuples_exchanged_remote",
    "rounds",
    "proposals",
    "intersection_probes",
    "count_lookups",
    "spark_jobs",
    "kernels_compiled",
    "critical_path_tuples",
    "candidates",
    "probes",
    "bindings_tried",
    "local_work",
    "tuples_shipped",
)
ADDITIVE_METRICS = ("tuples_shipped",)
MAX_COUNTEREXAMPLES = 20


@dataclass(frozen=True)
class MotifRun:
    """One shape of the census: what the implementation counts, and the induced pattern the oracles check."""

    motif: motifs.Motif
    spec: JoinSpec  # induced, or the plain pattern under `convert`
    induced_spec: JoinSpec


@dataclass(frozen=True)
class CensusPlan:
    k: int
    method: str
    runs: tuple[MotifRun, ...]

    @property
    def name(self) -> str:
        return f"motifs:{self.k}"


@dataclass
class Counted:
    """What one shape's run gave: the implementation's count of `run.spec`, its times and outcome."""

    run: MotifRun
    impl: Any  # the Implementation, kept for matches() under `induced`
    index_s: float
    query_s: float
    index_reused: bool
    count: int
    counters: dict
    metrics: dict


def plan(k: int, impl_cls, method: str | None, semantics: str, attribute_order) -> CensusPlan:
    """The census's runs for an implementation; the method defaults to `induced` where its class counts
    induced patterns, else `convert`. Bad combinations are DataErrors naming the input."""
    if semantics != "undirected":
        raise DataError(
            f"query 'motifs:{k}': the motif census counts vertex-induced subgraphs of the simple undirected "
            f"graph; --semantics {semantics} does not apply"
        )
    if attribute_order:
        raise DataError(f"query 'motifs:{k}': --order does not apply to a census (each shape runs in its own order)")
    if method is None:
        method = "induced" if impl_cls.anti_edges else "convert"
    elif method not in METHODS:
        raise DataError(f"params.census_method: expected one of {', '.join(METHODS)}, got {method!r}")
    elif method == "induced" and not impl_cls.anti_edges:
        raise DataError(
            f"params.census_method: induced needs an implementation that counts induced patterns; {impl_cls.name} does not"
        )
    runs = tuple(
        MotifRun(m, make_join_spec(m.query(method == "induced"), semantics), make_join_spec(m.query(True), semantics))
        for m in motifs.MOTIFS[k]
    )
    return CensusPlan(k, method, runs)


def query_record(census: CensusPlan) -> dict:
    """The record's `query` for a census."""
    return {
        "name": census.name,
        "pattern": f"every connected {census.k}-vertex pattern, vertex-induced",
        "census": census.k,
        "motifs": [r.motif.name for r in census.runs],
    }


def induced_counts(census: CensusPlan, counted: list[Counted]) -> dict[str, int]:
    """Each shape's induced count, from what the implementation counted under the census method."""
    raw = {c.run.motif.name: c.count for c in counted}
    return raw if census.method == "induced" else motifs.induced_from_noninduced(census.k, raw)


def summarize(census: CensusPlan, counted: list[Counted]) -> tuple[dict, int, dict, dict]:
    """(the record's `census` section, the total, the summed logical counters, the summed metrics)."""
    induced = induced_counts(census, counted)
    total = sum(induced.values())
    entries = [
        {
            "name": c.run.motif.name,
            "label": c.run.motif.label,
            "pattern": c.run.motif.dashes(),
            "short": c.run.motif.short(),
            "count": induced[c.run.motif.name],
            "share": round(induced[c.run.motif.name] / total, 9) if total else None,
            "counted": {"pattern": c.run.spec.query.describe(), "induced": c.run.spec.query.induced, "count": c.count},
            "index_s": round(c.index_s, 4),
            "query_s": round(c.query_s, 4),
            "index_reused": c.index_reused,
            "logical": c.counters,
            "metrics": c.metrics,
            "verification": None,
        }
        for c in counted
    ]
    section = {"k": census.k, "method": census.method, "total": total, "motifs": entries}
    own = _sums([c.metrics for c in counted], ADDITIVE_METRICS)
    clocks = [c.metrics["python_task_s"] for c in counted if isinstance(c.metrics.get("python_task_s"), dict)]
    if clocks and len(clocks) == len(counted):  # the tasks' own clocks (kernel, pack, io), per key
        own["python_task_s"] = {
            key: round(sum(x.get(key, 0.0) for x in clocks), 3) for key in dict.fromkeys(k for x in clocks for k in x)
        }
    return section, total, _sums([c.counters for c in counted], ADDITIVE_COUNTERS), own


def _sums(parts: list[dict], names: tuple[str, ...]) -> dict:
    """Per name present in every part as an integer, the sum over the parts."""
    return {
        name: sum(p[name] for p in parts)
        for name in names
        if parts and all(isinstance(p.get(name), int) and not isinstance(p.get(name), bool) for p in parts)
    }


VerifyOne = Callable[[JoinSpec, int, Callable[[int], list[tuple]] | None], dict]


def verify(section: dict, counted: list[Counted], verify_one: VerifyOne, method: str) -> dict:
    """Check every shape's induced count (`verify_one`: harness.verify.check.verify on the graph, returning its
    dict) and fill each entry's `verification`; returns the record's {oracle, checks, verified,
    disagrees, unverified_reason} over all shapes. Matches are compared only under `induced`: under
    `convert` the implementation's matches are of the plain pattern."""
    outcomes = []
    for entry, c in zip(section["motifs"], counted):
        outcome = verify_one(c.run.induced_spec, entry["count"], c.impl.matches if method == "induced" else None)
        entry["verification"] = _motif_verification(outcome)
        outcomes.append((entry["name"], outcome))
    checks = _aggregate_checks(outcomes)
    disagrees = any(o["disagrees"] for _, o in outcomes)
    verified = not disagrees and all(o["verified"] for _, o in outcomes)
    primary = next((c for c in checks if c["name"] != "published"), checks[0] if checks else None)
    reasons = [f"{name}: {o['unverified_reason']}" for name, o in outcomes if o["unverified_reason"]]
    return {
        "oracle": primary or dict(outcomes[0][1]["oracle"], count=None),
        "checks": checks,
        "verified": verified,
        "disagrees": disagrees,
        "unverified_reason": None if verified or disagrees else "; ".join(reasons),
    }


def _motif_verification(outcome: dict) -> dict:
    """One shape's verdict: agrees / disagrees / unverified, the main check, and every check (without the
    oracle's description, which the record's aggregated check carries)."""
    status = "disagrees" if outcome["disagrees"] else "agrees" if outcome["verified"] else "unverified"
    oracle = outcome["oracle"]
    return {
        "status": status,
        "oracle": oracle["name"],
        "count": oracle.get("count"),
        "reason": outcome["unverified_reason"],
        "checks": [{k: v for k, v in c.items() if k != "counts"} for c in outcome["checks"]],
    }


def _aggregate_checks(outcomes: list[tuple[str, dict]]) -> list[dict]:
    """One check per oracle over the shapes it was asked about: `agrees` is False if it disagreed on
    any, True if it agreed on at least one and disagreed on none (`motifs` says which it checked),
    None if it answered for none; `status` is ok when it answered for every shape asked."""
    by_name: dict[str, list[tuple[str, dict]]] = {}
    for motif, outcome in outcomes:
        for check in outcome["checks"]:
            by_name.setdefault(check["name"], []).append((motif, check))
    out = []
    for name, pairs in by_name.items():
        answered = [(m, c) for m, c in pairs if c["status"] == "ok"]
        verdicts = [c["agrees"] for _, c in answered if c["agrees"] is not None]
        failed = next(((m, c) for m, c in pairs if c["status"] != "ok"), None)
        examples = [dict(e, motif=m) for m, c in pairs for e in c.get("counterexamples", [])]
        check = {
            "name": name,
            "status": "ok" if failed is None else failed[1]["status"],
            "count": sum(c["count"] for _, c in answered) if answered else None,
            "agrees": False if False in verdicts else (True if verdicts else None),
            "seconds": round(sum(c.get("seconds") or 0.0 for _, c in pairs), 4),
            "motifs": [m for m, _ in answered],
            "reused": all(c.get("reused", False) for _, c in pairs),
        }
        if "counts" in pairs[0][1]:
            check["counts"] = pairs[0][1]["counts"]
        if failed is not None:
            check["reason"] = f"{failed[0]}: {failed[1].get('reason')}"
        if examples:
            check["counterexamples"] = examples[:MAX_COUNTEREXAMPLES]
        out.append(check)
    return out


# ---------------------------------------------------------------- the census table


def _share(share: float | None) -> str:
    return "-" if share is None else f"{100 * share:.3g}%"


class _Answer(NamedTuple):
    """One implementation's census of a case (a record's `census` section)."""

    implementation: str
    census: dict


def tables(records: list[RunRecord]) -> list[Table]:
    """Per census case (k, dataset, semantics, W), one table: each shape's induced count and share, the
    checks that agreed on it, and whether every implementation that finished counted the same."""
    cases: dict[tuple, list[_Answer]] = {}
    for r in records:
        if r.census and r.status in ("OK", "UNVERIFIED", "VAL"):
            key = (r.query_name, r.dataset_name, r.semantics, r.workers)
            cases.setdefault(key, []).append(_Answer(r.implementation, r.census))
    return [_case_table(key, runs) for key, runs in cases.items()]


def _case_table(key: tuple, runs: list[_Answer]) -> Table:
    name, dataset, semantics, workers = key
    by_method: dict[str, list[str]] = {}
    for r in runs:
        by_method.setdefault(r.census["method"], []).append(r.implementation)
    how = "; ".join(f"{m} ({', '.join(dict.fromkeys(impls))})" for m, impls in by_method.items())
    t = Table(
        title=f"{name} on {dataset} ({semantics}, W={workers}): vertex-induced census",
        caption=f"counted as: {how}",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    for column, justify in (("motif", "left"), ("pattern", "left"), ("count", "right"), ("share", "right")):
        t.add_column(column, justify=justify)  # type: ignore[arg-type]
    t.add_column("verified by", justify="left")
    t.add_column("implementations", justify="left")
    for i, shape in enumerate(runs[0].census["motifs"]):
        answers = {r.implementation: r.census["motifs"][i]["count"] for r in runs}
        common = Counter(answers.values()).most_common(1)[0][0]  # shown; the column after says who differs
        entry = next(r.census["motifs"][i] for r in runs if r.census["motifs"][i]["count"] == common)
        agreed = sorted(
            {
                c["name"]
                for r in runs
                for c in (r.census["motifs"][i]["verification"] or {}).get("checks", [])
                if c.get("agrees") is True
            }
        )
        t.add_row(
            shape["label"],
            shape["short"],
            fmt_int(common),
            _share(entry["share"]),
            ", ".join(agreed) or "[yellow]nobody[/]",
            _agreement(answers),
        )
    totals = {r.implementation: r.census["total"] for r in runs}
    t.add_row(
        "total",
        "connected induced subgraphs",
        fmt_int(Counter(totals.values()).most_common(1)[0][0]),
        "100%",
        "",
        _agreement(totals),
    )
    return t


def _agreement(answers: dict[str, int]) -> str:
    """Whether the implementations counted a shape alike: "all 5 agree", else how many gave the most
    common count and what the others gave."""
    common, times = Counter(answers.values()).most_common(1)[0]
    if times == len(answers):
        return f"all {times} agree"
    others = ", ".join(f"{impl} {fmt_int(count)}" for impl, count in answers.items() if count != common)
    return f"[red]{times} of {len(answers)}; {others}[/]"


def with_spec(ctx, spec: JoinSpec):
    """The run context for another shape of the census: the same graph, parameters, shared indices
    (arrangements), cancel flag and progress, another join spec."""
    return dataclasses.replace(ctx, spec=spec)
