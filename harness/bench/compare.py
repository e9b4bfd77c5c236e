"""`python -m harness compare --query Q --dataset D`: every implementation of the project, the native
counter (the native floor) and the peer systems (DuckDB, Kùzu, networkx, SuiteSparse:GraphBLAS, Spark
GraphX, the published count) on the same canonical graph in one process, their counts checked against
each other, their times side by side, and the COST of BiGJoin: the fewest Spark cores at which it beats
the single-threaded local-gj (McSherry, Isard and Murray, HotOS 2015).

Agreement among the project's own code (its implementations and the native counter) is agreement, not
verification: the verdict is verified only if a system outside the project agreed too, else UNVERIFIED.

A project implementation runs through the Runner (oracle "none": the comparison is the check); its
time is index_s + query_s, as everywhere in the harness. A peer's time is its load (the canonical
edges into the system) plus its query. Writes compare.json and compare.md into one directory."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, cast

from rich.markup import escape
from rich.table import Table

import implementations
from harness.bench.tables import fmt_int
from harness.core import motifs, results
from harness.core.errors import DataError, HarnessError
from harness.core.query import SEMANTICS, JoinSpec, Query, load_query, make_join_spec
from harness.data import datasets
from harness.verify import peers
from harness.verify.check import published_count
from harness.verify.oracles import NETWORKX_AUTO_MAX_EDGES, Pattern
from harness.verify.peers import PeerResult

PROJECT = tuple(implementations.REGISTRY)
NATIVE = "native"  # the project's own native counter: the native floor, not an outsider
PEERS = ("duckdb", "kuzu", "networkx", "graphblas", "graphx")
PUBLISHED = "published"
SYSTEMS = (NATIVE,) + PROJECT + PEERS + (PUBLISHED,)
OUTSIDE = PEERS + (PUBLISHED,)  # systems that share no code with the project
# COST is defined between these two (a role each plays, not a list of implementations to keep up to date).
BASELINE = "local-gj"  # the COST baseline: one core
SWEPT = "bigjoin"  # run at every W of --workers; the others at the largest
COLUMNS = ("system", "W/cores", "status", "count", "load s", "query s", "total s", "× native", "× local-gj", "note")


@dataclass
class Comparison:
    """What to run, every name checked before Spark starts."""

    query_arg: str
    dataset_arg: str
    query: Query
    spec: JoinSpec
    source: datasets.Source
    systems: tuple[str, ...]
    workers: tuple[int, ...]
    timeout_s: float
    networkx_max_edges: int

    @property
    def semantics(self) -> str:
        return self.spec.semantics

    @property
    def spark_workers(self) -> int:
        return max(self.workers)


def _names(text: str, what: str) -> list[str]:
    items = [x.strip() for x in text.split(",") if x.strip()]
    if not items:
        raise DataError(f"{what}: empty list")
    return items


def plan(
    query: str,
    dataset: str,
    systems: str | None = None,
    semantics: str = "undirected",
    workers: str = "1,2",
    timeout_s: float = 1800.0,
    networkx_max_edges: int | None = None,
) -> Comparison:
    """Check every input; raises DataError with one line on the first bad one."""
    if semantics not in SEMANTICS:
        raise DataError(f"unknown semantics '{semantics}' (expected one of {', '.join(SEMANTICS)})")
    chosen = _names(systems, "--systems") if systems else list(SYSTEMS)
    for name in chosen:
        if name not in SYSTEMS:
            raise DataError(f"--systems: unknown system '{name}' (expected some of {', '.join(SYSTEMS)})")
    try:
        ws = sorted({int(w) for w in _names(workers, "--workers")})
    except ValueError:
        raise DataError(f"--workers: expected whole numbers separated by commas, got '{workers}'") from None
    if ws[0] < 1:
        raise DataError(f"--workers: W must be at least 1, got {ws[0]}")
    if timeout_s <= 0:
        raise DataError(f"--timeout must be positive, got {timeout_s:g}")
    if motifs.parse(query) is not None:
        raise DataError(f"query '{query}': a motif census runs with `run` or `bench`; compare takes one pattern")
    q, options = load_query(query)
    if q.labels:  # the peers see the pattern's edges only
        raise DataError(f"query '{query}': compare does not take vertex labels (the peer systems count unlabelled patterns)")
    spec = make_join_spec(q, semantics, None, **options)
    return Comparison(
        query,
        dataset,
        q,
        spec,
        datasets.resolve(dataset),
        tuple(s for s in SYSTEMS if s in chosen),
        tuple(ws),
        timeout_s,
        NETWORKX_AUTO_MAX_EDGES if networkx_max_edges is None else networkx_max_edges,
    )


# ---------------------------------------------------------------- running


def _project_row(runner, cmp: Comparison, impl: str, workers: int) -> PeerResult:
    from harness.bench.runner import RunRequest

    record = runner.run(
        RunRequest(
            query=cmp.query_arg,
            dataset=cmp.dataset_arg,
            impl=impl,
            workers=workers,
            semantics=cmp.semantics,
            oracle="none",
            timeout_s=cmp.timeout_s,
        )
    )
    m = record.metrics
    status = "OK" if record.status == "UNVERIFIED" else record.status  # completed: the comparison checks it
    return PeerResult(
        impl,
        "1 core" if impl == BASELINE else f"W={workers}",
        str(status),
        record.count,
        record.index_s,
        record.query_s,
        record.error,
        workers,
        {"graph_load_s": m.get("load_s"), "index_reused": m.get("index_reused"), "record": record.to_json()},
    )


def _graphx_row(runner, cmp: Comparison, graph, run_id: str, pattern: Pattern) -> PeerResult:
    deadline = time.perf_counter() + cmp.timeout_s
    group = f"compare-{run_id}"

    def timed(phase: str, fn):  # the Runner's timed thread: cancels the Spark job group at the deadline
        return runner.timed(f"{group}:graphx {phase}", fn, deadline)

    try:
        return peers.graphx_peer(runner.spark, graph, pattern, cmp.spark_workers, timed)
    except HarnessError as exc:
        return PeerResult("graphx", f"W={cmp.spark_workers}", exc.status, error=str(exc), workers=cmp.spark_workers)


def _steps(cmp: Comparison, runner, graph, run_id: str) -> list[tuple[str, Callable[[], PeerResult]]]:
    glob, timeout = graph.parquet_glob(), cmp.timeout_s
    pattern = Pattern.of(cmp.query, cmp.semantics)
    steps: list[tuple[str, Callable[[], PeerResult]]] = []
    if NATIVE in cmp.systems:
        steps.append((NATIVE, lambda: peers.in_memory_peer(NATIVE, glob, pattern, timeout)))
    for impl in (s for s in cmp.systems if s in PROJECT):
        limit = implementations.REGISTRY[impl].max_edges
        if limit is not None and graph.edges > limit:
            steps.append((impl, partial(peers.skipped, impl, "-", f"counts graphs of up to {limit:,} edges")))
            continue
        for w in cmp.workers if impl == SWEPT else (cmp.spark_workers,):
            label = impl if impl == BASELINE else f"{impl} W={w}"
            steps.append((label, partial(_project_row, runner, cmp, impl, w)))
    peer_runs = {
        "duckdb": lambda: peers.duckdb_peer(glob, pattern, timeout),
        "kuzu": lambda: peers.kuzu_peer(glob, pattern, timeout),
        "networkx": lambda: peers.networkx_peer(glob, pattern, graph.edges, cmp.networkx_max_edges, timeout),
        "graphblas": lambda: peers.in_memory_peer("graphblas", glob, pattern, timeout),
        "graphx": lambda: _graphx_row(runner, cmp, graph, run_id, pattern),
        PUBLISHED: lambda: _published_row(graph, cmp.spec),
    }
    steps += [(name, peer_runs[name]) for name in cmp.systems if name in OUTSIDE]
    return steps


def _published_row(graph, spec: JoinSpec) -> PeerResult:
    count = published_count(graph.published, spec)
    if count is None:
        return peers.skipped(PUBLISHED, "-", f"no published {spec.query.name} count for {graph.name}")
    return PeerResult(PUBLISHED, "-", "OK", count, extra={"source": graph.published.get("note") or graph.source})


def execute(
    cmp: Comparison, master: str | None, out_dir: Path, console, run_id: str | None = None, allow_unverified: bool = False
) -> int:
    """Run everything, print the table, write compare.json and compare.md; the exit code: 0 when the
    counts of all completed systems (at least two) agree and one of them is outside the project, 1 when
    they do not agree, 2 when fewer than two completed, 3 when they agree but none is outside the
    project (UNVERIFIED; 0 if allow_unverified)."""
    from harness.bench.runner import Runner

    run_id, timestamp = run_id or results.new_run_id(), results.now_iso()
    runner = Runner(master, cmp.spark_workers)
    graph, graph_load_s, _ = runner.graph(cmp.source, cmp.semantics, cmp.spark_workers)
    console.print(
        f"[bold]compare[/] {cmp.query.name} on {graph.name} ({cmp.semantics}, {graph.vertices:,} vertices, "
        f"{graph.edges:,} edges; canonical load {graph_load_s:.2f} s) -> {out_dir}"
    )
    rows = _run_steps(_steps(cmp, runner, graph, run_id), console)
    labels = _labels(rows)
    base = next((r.total_s for r in rows if r.system == BASELINE and r.total_s is not None), None)
    floor = next((r.total_s for r in rows if r.system == NATIVE and r.total_s is not None), None)
    agreement = agree(rows, labels)
    cost = cost_figure(rows, base)
    exit_code = _exit_code(rows, agreement, allow_unverified)
    title = f"compare: {cmp.query.name} on {graph.name} ({cmp.semantics})"
    table_rows = [_cells(r, labels[id(r)], base, floor) for r in rows]
    console.print(_rich_table(title, table_rows, [r.status for r in rows]))
    colour = (
        "[green]" if exit_code == 0 and agreement["verdict"] == "VERIFIED" else "[yellow]" if exit_code in (0, 3) else "[red]"
    )
    console.print(colour + escape(agreement["line"]) + "[/]", soft_wrap=True)
    console.print(cost["line"], soft_wrap=True)
    record = {
        "schema_version": results.SCHEMA_VERSION,
        "kind": "compare",
        "run_id": run_id,
        "timestamp": timestamp,
        **_what_was_compared(cmp, graph, graph_load_s, runner.spark),
        "rows": [
            {"label": labels[id(r)], **r.to_json(), "over_native": _ratio(r, floor), "over_local_gj": _ratio(r, base)}
            for r in rows
        ],
        "agreement": agreement,
        "verdict": agreement["verdict"],
        "allow_unverified": allow_unverified,
        "cost": cost,
        "exit_code": exit_code,
    }
    markdown = "\n".join([f"# {title}", "", *_markdown_table(table_rows), "", agreement["line"], "", cost["line"], ""])
    results.write_json_atomic(out_dir / "compare.json", record)
    results.write_text_atomic(out_dir / "compare.md", markdown)
    console.print(f"results: {out_dir}")
    return exit_code


def _run_steps(steps: list, console) -> list[PeerResult]:
    """Each system in turn, its line printed as it ends; one system's failure never stops the others."""
    rows: list[PeerResult] = []
    for i, (label, run) in enumerate(steps, start=1):
        try:
            row = run()
        except Exception as exc:
            message = (str(exc).strip().splitlines() or [""])[0][:300]
            row = PeerResult(label.split()[0], "-", "EXE", error=f"{type(exc).__name__}: {message}")
        rows.append(row)
        mark = (
            "[green]OK[/]"
            if row.status == "OK"
            else f"[yellow]{row.status}[/]"
            if row.status == "SKIP"
            else f"[red]{row.status}[/]"
        )
        detail = f"count={fmt_int(row.count)} total_s={_secs(row.total_s)}" if row.status == "OK" else escape(row.error or "")
        console.print(f"[{i}/{len(steps)}] {label}: {mark} {detail}", soft_wrap=True)
    return rows


def _exit_code(rows: list[PeerResult], agreement: dict, allow_unverified: bool) -> int:
    completed = sum(r.status == "OK" for r in rows)
    if agreement["disagreeing"]:
        return 1
    if completed < 2:  # nothing was compared
        return 2
    if agreement["verdict"] == "UNVERIFIED":
        return 0 if allow_unverified else 3
    return 0


def _what_was_compared(cmp: Comparison, graph, graph_load_s: float, spark) -> dict:
    """The record's query, graph, parameters and provenance."""
    return {
        "query": {
            "name": cmp.query.name,
            "pattern": cmp.query.describe(),
            "attributes": list(cmp.query.attributes),
            "attribute_order": list(cmp.spec.attribute_order),
            "less_than": [list(p) for p in cmp.spec.less_than],
        },
        "semantics": cmp.semantics,
        "dataset": graph.describe(),
        "graph_load_s": round(graph_load_s, 4),
        "params": {
            "systems": list(cmp.systems),
            "workers": list(cmp.workers),
            "timeout_s": cmp.timeout_s,
            "networkx_max_edges": cmp.networkx_max_edges,
        },
        "spark": {"master": spark.sparkContext.master, "version": spark.version},
        "git": results.git_info(),
        "machine": results.machine_info(),
    }


# ---------------------------------------------------------------- agreement and COST


def _labels(rows: list[PeerResult]) -> dict[int, str]:
    """A row's name in messages: the system, with W where the system ran at more than one W."""
    per_system: dict[str, int] = {}
    for r in rows:
        per_system[r.system] = per_system.get(r.system, 0) + 1
    return {id(r): f"{r.system} W={r.workers}" if per_system[r.system] > 1 else r.system for r in rows}


def agree(rows: list[PeerResult], labels: dict[int, str]) -> dict:
    """Do the completed systems agree? {identical, count, groups, skipped, failed, disagreeing, line}."""
    groups: dict[int, list[str]] = {}
    for r in rows:
        if r.status == "OK":
            assert r.count is not None  # a completed system has its count
            groups.setdefault(r.count, []).append(labels[id(r)])
    skipped = [labels[id(r)] for r in rows if r.status == "SKIP"]
    failed = [f"{labels[id(r)]} {r.status}" for r in rows if r.status not in ("OK", "SKIP")]
    notes = [
        f"{len(skipped)} skipped: {', '.join(skipped)}" if skipped else "",
        f"{len(failed)} failed: {', '.join(failed)}" if failed else "",
    ]
    tail = f" ({'; '.join(n for n in notes if n)})" if any(notes) else ""
    disagreeing: list[str] = []
    outsiders = sorted({r.system for r in rows if r.status == "OK" and r.system in OUTSIDE})
    verdict = "NONE"
    if not groups:
        line = f"counts: no system completed{tail}"
    elif len(groups) == 1:
        systems = {r.system for r in rows if r.status == "OK"}
        line = f"counts: identical across {len(systems)} systems: {next(iter(groups)):,}{tail}"
        if len(systems) > 1 and outsiders:
            verdict = "VERIFIED"
            line += f"; verified: outside the project, {', '.join(outsiders)} agree"
        elif len(systems) > 1:
            verdict = "UNVERIFIED"
            line += "; UNVERIFIED: no system outside the project completed, so this is agreement, not verification"
    else:
        verdict = "DISAGREE"
        ranked = sorted(groups.items(), key=lambda kv: -len(kv[1]))
        disagreeing = [name for _, names in ranked[1:] for name in names]
        line = "counts DISAGREE: " + "; ".join(f"{count:,} from {', '.join(names)}" for count, names in ranked) + tail
    return {
        "identical": len(groups) == 1,
        "count": next(iter(groups)) if len(groups) == 1 else None,
        "groups": {str(k): v for k, v in groups.items()},
        "skipped": skipped,
        "failed": failed,
        "disagreeing": disagreeing,
        "outside_systems_agreeing": outsiders if verdict == "VERIFIED" else [],
        "verdict": verdict,
        "line": line,
    }


def cost_figure(rows: list[PeerResult], base: float | None) -> dict:
    """COST: the fewest Spark cores (W) at which BiGJoin's index + query time beats local-gj's."""
    swept = sorted(
        (r for r in rows if r.system == SWEPT and r.total_s is not None), key=lambda r: cast(int, r.workers)
    )  # a run at W has its W
    for name, missing in ((BASELINE, base is None), (SWEPT, not swept)):
        if missing:
            why = "did not complete" if any(r.system == name for r in rows) else "was not run"
            return {"cost": None, "line": f"COST: not measured: {name} {why}", "ratios": {}}
    assert base is not None

    def total(r: PeerResult) -> float:  # swept holds the completed runs
        assert r.total_s is not None
        return r.total_s

    ratios = {r.workers: round(total(r) / base, 3) for r in swept}
    out: dict[str, Any] = {"cost": None, "local_gj_s": base, "bigjoin_s": {r.workers: r.total_s for r in swept}, "ratios": ratios}
    win = next((r for r in swept if total(r) < base), None)
    if win is not None:
        out["cost"] = win.workers
        out["line"] = (
            f"COST = {win.workers}: BiGJoin at W={win.workers} takes {win.total_s:.2f} s, "
            f"local-gj {base:.2f} s ({ratios[win.workers]:.2f}×)"
        )
        return out
    top = swept[-1]
    out["cost_above"] = top.workers
    lower = ", ".join(f"W={w}: {x:.2f}×" for w, x in ratios.items() if w != top.workers)
    out["line"] = (
        f"COST > {top.workers} on this machine: BiGJoin at W={top.workers} takes {ratios[top.workers]:.2f}× "
        f"local-gj ({top.total_s:.2f} s vs {base:.2f} s)" + (f"; {lower}" if lower else "")
    )
    return out


# ---------------------------------------------------------------- tables


def _secs(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def _ratio(r: PeerResult, base: float | None) -> float | None:
    return round(r.total_s / base, 3) if r.total_s is not None and base else None


def _cells(r: PeerResult, label: str, base: float | None, floor: float | None) -> list[str]:
    status = f"skipped: {r.error}" if r.status == "SKIP" else r.status
    note = "" if r.status == "SKIP" else (r.error or "")
    if r.extra.get("index_reused"):
        note = "index reused from an earlier run" + (f"; {note}" if note else "")
    if r.system == NATIVE:
        note = "native floor (this project's reference kernel, not an outside check)" + (f"; {note}" if note else "")
    ratios = ["-" if x is None else f"{x:.2f}×" for x in (_ratio(r, floor), _ratio(r, base))]
    return [r.system, r.cores, status, fmt_int(r.count), _secs(r.load_s), _secs(r.query_s), _secs(r.total_s), *ratios, note]


def _rich_table(title: str, rows: list[list[str]], statuses: list[str]) -> Table:
    table = Table(
        title=title,
        caption="load s: the edges into the system (project implementations: index_s); total s = load + query",
        show_lines=False,
    )
    for col in COLUMNS:
        table.add_column(
            col, justify="right" if col in ("count", "load s", "query s", "total s", "× native", "× local-gj") else "left"
        )
    for cells, status in zip(rows, statuses):
        colour = {"OK": "green", "SKIP": "yellow"}.get(status, "red")
        cells = [escape(c) for c in cells]
        table.add_row(*cells[:2], f"[{colour}]{cells[2]}[/]", *cells[3:])
    return table


def _markdown_table(rows: list[list[str]]) -> list[str]:
    right = {"count", "load s", "query s", "total s", "× native", "× local-gj"}
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "|".join("---:" if c in right else "---" for c in COLUMNS) + "|"]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |" for cells in rows]
    return lines
