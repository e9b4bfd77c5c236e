"""`python -m harness datasets list | fetch | verify | convert | stream`."""

from __future__ import annotations

import re
import time
from pathlib import Path

from rich.table import Table

from harness.core import results
from harness.core.errors import DataError
from harness.core.query import BUILTINS
from harness.data import datasets, updates
from harness.data import fetch as fetcher
from harness.spark.session import get_session


def _fmt(v) -> str:
    return f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else ("-" if v is None else str(v))


def _size(source: datasets.Source) -> str:
    if source.kind == "generator":
        return "generated"
    path = Path(source.location)
    if path.is_file():
        return f"{path.stat().st_size / 2**20:,.1f} MiB"
    if source.bytes:
        return f"{source.bytes / 2**20:,.1f} MiB (not fetched)"
    return "not fetched"


def list_table(registry: dict[str, datasets.Source]) -> Table:
    table = Table(title="datasets")
    for col in ("name", "kind", "format", "size", "cached", "published nodes", "published edges", "published triangles"):
        table.add_column(col, justify="right" if col.startswith("published") else "left")
    for name, s in sorted(registry.items()):
        kind = "download" if s.urls else s.kind
        tri = (s.published.get("undirected") or {}).get("triangle")
        table.add_row(
            name,
            kind,
            s.fmt or ("-" if s.kind == "generator" else "auto"),
            _size(s),
            ", ".join(datasets.cached_semantics(s)) or "no",
            _fmt(s.published.get("nodes")),
            _fmt(s.published.get("edges", s.published.get("undirected_edges"))),
            _fmt(tri),
        )
    return table


def _number_in(note: str, value: int) -> bool:
    return bool(note) and (str(value) in re.sub(r"[,\s]", "", note) or f"{value:,}" in note)


def verify(spark, source: datasets.Source) -> dict:
    """Compare converted node, edge and undirected triangle counts with the published figures."""
    from harness.verify.oracles import Pattern, native
    from harness.verify.oracles import edges as edge_arrays

    start = time.perf_counter()
    und = datasets.load(spark, source, "undirected")
    dirg = datasets.load(spark, source, "directed")
    loops = dirg.df.filter("src = dst").count()
    # The independent native counter (it shares no code with the implementations).
    triangles, _ = native.count(*edge_arrays.read(und.parquet_glob()), Pattern.of(BUILTINS["triangle"], "undirected"))
    measured = {
        "nodes": und.vertices,
        "edge lines": und.cleaning["input_rows"],
        "undirected edges": und.edges,
        "undirected edges incl. self-loops": und.edges + loops,
        "2 x undirected edges": 2 * und.edges,
        "distinct directed edges": dirg.edges,
        "distinct directed edges without self-loops": dirg.edges - loops,
        "undirected triangles": triangles,
    }
    pub, note = source.published, source.published.get("note", "")
    checks = []

    def add(name, published, value, verdict, detail=""):
        checks.append({"check": name, "published": published, "measured": value, "verdict": verdict, "detail": detail})

    if "nodes" in pub:
        if pub["nodes"] == measured["nodes"]:
            add("nodes", pub["nodes"], measured["nodes"], "match")
        elif _number_in(note, measured["nodes"]):
            add("nodes", pub["nodes"], measured["nodes"], "explained", f"published note: {note}")
        else:
            add("nodes", pub["nodes"], measured["nodes"], "MISMATCH")
    if "edges" in pub:
        matched = [k for k in measured if "edge" in k and measured[k] == pub["edges"]]
        if matched:
            add("edges", pub["edges"], measured[matched[0]], "match", f"as {matched[0]}")
        elif "not comparable" in note:
            add("edges", pub["edges"], measured["undirected edges"], "not comparable", f"published note: {note}")
        else:
            add(
                "edges",
                pub["edges"],
                None,
                "MISMATCH",
                "no interpretation matches: " + ", ".join(f"{k} {v:,}" for k, v in measured.items() if "edge" in k),
            )
    if "undirected_edges" in pub:
        same = pub["undirected_edges"] == measured["undirected edges"]
        add("undirected edges", pub["undirected_edges"], measured["undirected edges"], "match" if same else "MISMATCH")
    published_tri = (pub.get("undirected") or {}).get("triangle")
    if published_tri is not None:
        add("undirected triangles", published_tri, triangles, "match" if published_tri == triangles else "MISMATCH")
    passed = bool(checks) and all(c["verdict"] != "MISMATCH" for c in checks) and published_tri is not None
    return {
        "dataset": source.name,
        "source": und.source,
        "sha256": und.sha256,
        "passed": passed,
        "checks": checks,
        "measured": measured,
        "cleaning": {"undirected": und.cleaning, "directed": dirg.cleaning},
        "degrees": und.degrees,
        "seconds": round(time.perf_counter() - start, 2),
        "timestamp": results.now_iso(),
        "git": results.git_info(),
    }


def _peak_rss(pid: int) -> int | None:
    """Peak resident set size (VmHWM) of a local process, in bytes."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def convert(spark, source: datasets.Source, semantics: str) -> dict:
    """Generate or read, then canonicalise to the Parquet cache, measuring time and peak memory."""
    import os
    import resource

    from harness.spark.metrics import SparkCounters

    counters = SparkCounters(spark)
    start = time.perf_counter()
    with counters.job_group("convert"):
        graph = datasets.load(spark, source, semantics, partitions=max(2, os.cpu_count() or 2))
    seconds = time.perf_counter() - start
    spark_metrics = counters.collect(["convert"])
    jvm_pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    graph.df.unpersist()
    return {
        "dataset": source.name,
        "semantics": semantics,
        "source": graph.source,
        "cache_hit": graph.cache_hit,
        "seconds": round(seconds, 2),
        "vertices": graph.vertices,
        "edges": graph.edges,
        "cleaning": graph.cleaning,
        "degrees": graph.degrees,
        "parquet": str(graph.path),
        "jvm_peak_rss_bytes": _peak_rss(jvm_pid),
        "python_peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "spill_bytes": spark_metrics["spill_bytes"],
        "shuffle_bytes": spark_metrics["shuffle_bytes"],
        "driver_memory": spark.conf.get("spark.driver.memory"),
        "machine": results.machine_info(),
        "timestamp": results.now_iso(),
        "git": results.git_info(),
    }


def verify_table(reports: list[dict]) -> Table:
    table = Table(title="dataset verification against published figures")
    for col in ("dataset", "check", "published", "measured", "verdict", "detail"):
        table.add_column(col, justify="right" if col in ("published", "measured") else "left", overflow="fold")
    for r in reports:
        for c in r["checks"]:
            colour = "red" if c["verdict"] == "MISMATCH" else ("green" if c["verdict"] == "match" else "yellow")
            table.add_row(
                r["dataset"], c["check"], _fmt(c["published"]), _fmt(c["measured"]), f"[{colour}]{c['verdict']}[/]", c["detail"]
            )
    return table


def cmd_datasets(args, console) -> int:
    registry = datasets.load_registry()
    if args.action == "list":
        console.print(list_table(registry))
        return 0
    if args.action == "fetch":
        names = args.names or []
        if len(names) != 1:
            raise DataError("datasets fetch takes exactly one dataset name")
        source = _lookup(registry, names[0])
        path = fetcher.fetch(source, Path(args.from_path) if args.from_path else None)
        console.print(f"{source.name}: {path}")
        if not args.no_convert:
            graph = datasets.load(get_session(args.master, kernels=()), source, "undirected")
            console.print(f"converted: {graph.vertices:,} vertices, {graph.edges:,} undirected edges -> {graph.path}")
        return 0
    if args.action == "verify":
        names = [n for n, s in registry.items() if s.kind == "file" and "shared" in s.location] if args.all else args.names
        if not names:
            raise DataError("datasets verify needs dataset names or --all")
        sources = [_lookup(registry, n) for n in names]
        spark = get_session(args.master, kernels=())
        reports = []
        for source in sources:
            with console.status(f"verifying {source.name}"):
                reports.append(verify(spark, source))
            results.write_json_atomic(results.RESULTS_DIR / "datasets" / f"verify-{source.name}.json", reports[-1])
        console.print(verify_table(reports))
        bad = [r["dataset"] for r in reports if not r["passed"]]
        console.print(
            f"{len(reports) - len(bad)} of {len(reports)} datasets pass" + (f"; failing: {', '.join(bad)}" if bad else "")
        )
        return 2 if bad else 0
    if args.action == "convert":
        if not args.names:
            raise DataError("datasets convert needs dataset names")
        spark = get_session(args.master, kernels=())
        for name in args.names:
            report = convert(spark, _lookup(registry, name), args.semantics)
            results.write_json_atomic(results.RESULTS_DIR / "datasets" / f"convert-{name}-{args.semantics}.json", report)
            console.print(
                f"{name} ({args.semantics}): {report['vertices']:,} vertices, {report['edges']:,} edges in "
                f"{report['seconds']:.1f} s; peak RSS JVM {report['jvm_peak_rss_bytes'] / 2**30:.2f} GiB, "
                f"Python {report['python_peak_rss_bytes'] / 2**30:.2f} GiB; degrees {report['degrees']}"
            )
        return 0
    if args.action == "stream":
        if len(args.names or []) != 1 or not args.out:
            raise DataError("datasets stream takes one dataset name, --updates SPEC and --out FILE")
        spec = updates.parse_spec(args.updates or "")
        graph = datasets.load(get_session(args.master, kernels=()), datasets.resolve(args.names[0]), args.semantics)
        initial, stream = updates.make_stream(graph.df, spec)
        updates.write_stream(stream, Path(args.out))
        console.print(
            f"{args.out}: {stream.count():,} updates in {spec.batches} batches; initial graph {initial.count():,} edges"
        )
        return 0
    raise DataError(f"unknown datasets action '{args.action}'")


def _lookup(registry: dict, name: str) -> datasets.Source:
    if name not in registry:
        raise DataError(f"unknown dataset '{name}' (see `python -m harness datasets list`)")
    return registry[name]
