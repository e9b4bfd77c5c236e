"""Command line: `python -m harness run ...` and `python -m harness bench WORKLOAD`.
Exit 0 only if every run is OK; 2 otherwise (bad input included, with a one-line error)."""
from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from .errors import DataError, HarnessError
from .results import RESULTS_DIR, new_run_id, write_json_atomic

_WIDTH = None if sys.stdout.isatty() else int(os.environ.get("COLUMNS", 200))
console = Console(stderr=False, highlight=False, width=_WIDTH)
errors = Console(stderr=True, highlight=False, width=_WIDTH)


def _fmt_int(v) -> str:
    return f"{v:,}" if isinstance(v, int) else ("-" if v is None else str(v))


def _fmt_bytes(v) -> str:
    if not v:
        return "0" if v == 0 else "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if v < 1024:
            return f"{v:.0f} {unit}"
        v /= 1024
    return f"{v:.1f} TiB"


def _oracle_cell(r: dict) -> str:
    if r.get("status") == "DAT" or not r.get("checks") and not r.get("oracle"):
        return "-"
    parts = []
    for c in r.get("checks", []):
        mark = {True: "[green]✓[/]", False: "[red]✗[/]"}.get(c.get("agrees"), f"[yellow]{c.get('status')}[/]")
        parts.append(f"{c['name']} {mark}")
    if not parts:
        o = r.get("oracle") or {}
        parts.append(f"[yellow]{o.get('name')} {o.get('status')}[/]")
    return ", ".join(parts) + ("" if r.get("verified") else " [yellow](unverified)[/]")


def results_table(records: list[dict], title: str) -> Table:
    table = Table(title=title, show_lines=False)
    for col, justify in [("dataset", "left"), ("query", "left"), ("sem", "left"), ("impl", "left"), ("W", "right"),
                         ("status", "left"), ("count", "right"), ("verified by", "left"), ("load s", "right"),
                         ("index s", "right"), ("query s", "right"), ("shuffle rec", "right"), ("rounds", "right"),
                         ("max/mean load", "right"), ("peak exec mem", "right"), ("spill", "right")]:
        table.add_column(col, justify=justify)
    for r in records:
        m = r.get("metrics", {})
        status = r["status"]
        colour = "green" if status == "OK" else "red"
        skew = m.get("load_skew")
        table.add_row(
            str(r["dataset"].get("name")), str(r["query"].get("name")), r["semantics"][:3], r["implementation"],
            str(r["params"].get("workers")), f"[{colour}]{status}[/]", _fmt_int(r.get("count")), _oracle_cell(r),
            f"{m['load_s']:.2f}" if "load_s" in m else "-", f"{m['index_s']:.2f}" if "index_s" in m else "-",
            f"{m['query_s']:.2f}" if "query_s" in m else "-", _fmt_int(m.get("shuffle_records")), _fmt_int(m.get("rounds")),
            f"{m.get('max_task_records', 0):,} / {m.get('mean_task_records', 0):,.0f} ({skew:.2f}x)" if skew else "-",
            _fmt_bytes(m.get("peak_exec_memory_bytes")), _fmt_bytes(m.get("spill_bytes")),
        )
    return table


def logical_table(records: list[dict], title: str) -> Table | None:
    """The MPC-model counters of the dataflow implementations (§2.3), one row per run."""
    rows = [r for r in records if r.get("logical", {}).get("tuples_exchanged") is not None]
    if not rows:
        return None
    table = Table(title=title)
    for col in ("dataset", "query", "impl", "W", "B'", "prefixes per level", "proposals", "probes",
                "tuples exchanged", "rounds", "batches", "peak in flight", "index"):
        table.add_column(col, justify="left" if col in ("dataset", "query", "impl", "prefixes per level", "index") else "right")
    for r in rows:
        lg = r["logical"]
        levels = " / ".join(_fmt_int(v) for v in lg.get("prefixes_per_level", {}).values())
        index = "reused" if r["metrics"].get("index_reused") else "built"
        table.add_row(str(r["dataset"].get("name")), str(r["query"].get("name")), r["implementation"],
                      str(r["params"].get("workers")), _fmt_int(lg.get("batch_per_worker")), levels,
                      _fmt_int(lg.get("proposals")), _fmt_int(lg.get("intersection_probes")),
                      _fmt_int(lg.get("tuples_exchanged")), _fmt_int(lg.get("rounds")),
                      _fmt_int(sum(lg.get("batches_per_level", []))), _fmt_int(lg.get("peak_prefixes_in_flight")), index)
    return table


def summary_lines(records: list[dict]) -> list[str]:
    """Index sharing across runs, and each implementation's time (index_s + query_s) relative to
    local-gj on the same dataset, query, semantics and parameters, measured in this run."""
    lines = []
    built: dict[tuple, tuple[float, int]] = {}
    for r in records:
        m = r.get("metrics", {})
        if "index_s" not in m or r.get("logical", {}).get("index") is None:
            continue
        key = (r["dataset"].get("name"), r["semantics"], r["implementation"], r["params"].get("workers"))
        if not m.get("index_reused"):
            built[key] = (m["index_s"], built.get(key, (0, 0))[1])
        elif key in built:
            built[key] = (built[key][0], built[key][1] + 1)
    for (dataset, semantics, impl, workers), (seconds, reused) in built.items():
        if reused:
            lines.append(f"{impl} on {dataset} ({semantics}, W={workers}): index built once in {seconds:.2f} s and "
                         f"reused by {reused} more run(s), saving about {seconds * reused:.2f} s")

    def total(r):
        m = r.get("metrics", {})
        return m["index_s"] + m["query_s"] if r["status"] == "OK" and "query_s" in m else None

    def same(r):
        params = {k: v for k, v in r["params"].items() if k != "batch"}
        return (r["dataset"].get("name"), r["query"].get("name"), r["semantics"], str(sorted(params.items())), r["trial"])

    base = {same(r): r for r in records if r["implementation"] == "local-gj" and total(r)}
    for r in records:
        ref = base.get(same(r))
        if ref is None or r is ref or total(r) is None:
            continue
        agree = "same count" if r["count"] == ref["count"] else f"[red]count differs ({r['count']} vs {ref['count']})[/]"
        lines.append(f"{r['implementation']} / local-gj on {r['query'].get('name')} {r['dataset'].get('name')}: "
                     f"{total(r):.2f} s / {total(ref):.2f} s = {total(r) / total(ref):.2f}x ({agree})")
    return lines


def _report_failures(records: list[dict]) -> None:
    for r in records:
        if r["status"] != "OK":
            errors.print(f"[red]{r['status']}[/] {r['implementation']} {r['query'].get('name')} on {r['dataset'].get('name')}: "
                         f"{r.get('error') or 'count disagrees with an oracle'}")
            for c in r.get("checks", []):
                for ex in c.get("counterexamples", []):
                    errors.print(f"    {c['name']}: {ex['kind']} x{ex['times']}: {ex['match']}")


def _query_label(query) -> str:
    if isinstance(query, dict):
        return str(query.get("name") or query.get("edges"))
    text = str(getattr(query, "name", query))
    return Path(text).stem if text.endswith((".yaml", ".yml")) else text


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", text)[:60].strip("_")


def cmd_run(args) -> int:
    from .runner import RunRequest, Runner

    params = {}
    if args.batch is not None:
        params["batch"] = args.batch
    req = RunRequest(
        query=args.query, dataset=args.dataset, impl=args.impl, workers=args.workers, semantics=args.semantics,
        oracle=args.oracle, timeout_s=args.timeout, oracle_timeout_s=args.oracle_timeout, params=params,
        attribute_order=tuple(args.order.split(",")) if args.order else None,
    )
    record = Runner(args.master, args.workers).run(req)
    path = Path(args.json) if args.json else RESULTS_DIR / "runs" / f"run-{record['run_id']}.json"
    write_json_atomic(path, record)
    if record["status"] == "DAT":
        errors.print(f"error: {record['error']}")
        return 2
    console.print(results_table([record], f"run {record['run_id']}"))
    _report_failures([record])
    console.print(f"result: {path}")
    return 0 if record["status"] == "OK" else 2


def cmd_bench(args) -> int:
    from . import datasets, workload as workloads
    from .query import load_query, make_join_spec
    from .runner import Runner
    import implementations

    wl = workloads.load(args.workload, args.tier)
    requests = wl.requests()
    # Check every name before starting Spark: bad input fails fast and writes nothing.
    for req in requests:
        implementations.get(req.impl)
        query, options = load_query(req.query)
        make_join_spec(query, req.semantics, req.attribute_order, **options)
    for name in wl.datasets:
        datasets.resolve(name)
    out_dir = Path(args.results) if args.results else RESULTS_DIR / "runs" / f"{new_run_id()}-{_slug(wl.name)}"
    runner = Runner(args.master, wl.workers[0])
    records = []
    console.print(f"[bold]{wl.name}[/] ({wl.tier} tier): {len(requests)} runs -> {out_dir}")
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task(wl.name, total=len(requests))
        for i, req in enumerate(requests, start=1):
            label = f"[{i}/{len(requests)}] {req.impl} {_query_label(req.query)} on {req.dataset} ({req.semantics}, W={req.workers}, trial {req.trial + 1})"
            progress.update(task, description=label)
            record = runner.run(req)
            records.append(record)
            name = f"{i:03d}-{_slug(req.impl)}-{_slug(str(record['query'].get('name')))}-{_slug(str(record['dataset'].get('name')))}-w{req.workers}-t{req.trial}.json"
            write_json_atomic(out_dir / name, record)
            mark = "[green]OK[/]" if record["status"] == "OK" else f"[red]{record['status']}[/]"
            progress.console.print(f"{label}: {mark} count={_fmt_int(record.get('count'))} query_s={record['metrics'].get('query_s', '-')}")
            progress.advance(task)
    console.print(results_table(records, f"{wl.name} ({wl.tier} tier)"))
    logical = logical_table(records, "logical counters (MPC model)")
    if logical is not None:
        console.print(logical)
    for line in summary_lines(records):
        console.print(line)
    _report_failures(records)
    console.print(f"results: {out_dir}")
    return 0 if all(r["status"] == "OK" for r in records) else 2


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m harness", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--master", default=None, help="Spark master URL (default: $SPARK_MASTER or local[*])")

    run = sub.add_parser("run", parents=[common], help="run one query on one dataset with one implementation")
    run.add_argument("--query", required=True, help="built-in name, pattern string (a-b,b-c,a-c) or YAML path")
    run.add_argument("--dataset", required=True, help="registry name, generator spec (rmat:scale=12) or edge-list path")
    run.add_argument("--impl", required=True, help="implementation name")
    run.add_argument("--workers", type=int, default=2, help="logical workers = partitions of every exchange")
    run.add_argument("--semantics", default="undirected", choices=["undirected", "directed"])
    run.add_argument("--oracle", default="auto", help="auto | duckdb | networkx | none")
    run.add_argument("--oracle-timeout", type=float, default=600.0)
    run.add_argument("--timeout", type=float, default=None, help="seconds for index + query before TIM")
    run.add_argument("--batch", type=int, default=None, help="batch size parameter passed to the implementation")
    run.add_argument("--order", default=None, help="attribute order, e.g. a1,a2,a3")
    run.add_argument("--json", default=None, help="result file (default: results/runs/run-<id>.json)")
    run.set_defaults(fn=cmd_run)

    bench = sub.add_parser("bench", parents=[common], help="run workloads/WORKLOAD.yaml")
    bench.add_argument("workload", help="name under workloads/ or a YAML path")
    bench.add_argument("--tier", default=None, help="a tier defined in the workload (default: its base settings)")
    bench.add_argument("--results", default=None, help="directory for the run files")
    bench.set_defaults(fn=cmd_bench)

    ds = sub.add_parser("datasets", parents=[common], help="list, fetch, verify datasets; make update streams")
    ds.add_argument("action", choices=["list", "fetch", "verify", "convert", "stream"])
    ds.add_argument("names", nargs="*", help="dataset names")
    ds.add_argument("--all", action="store_true", help="verify: every shared SNAP graph")
    ds.add_argument("--from", dest="from_path", default=None, help="fetch: use this local copy instead of downloading")
    ds.add_argument("--no-convert", action="store_true", help="fetch: skip the conversion to Parquet")
    ds.add_argument("--updates", default=None, help="stream: e.g. holdback=0.1,batch=1000,batches=5,deletes=0.2,seed=1")
    ds.add_argument("--semantics", default="undirected", choices=["undirected", "directed"])
    ds.add_argument("--out", default=None, help="stream: output file of `src dst ±1 batch` lines")
    ds.set_defaults(fn=lambda args: __import__("harness.dataset_cli", fromlist=["cmd_datasets"]).cmd_datasets(args, console))
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "master", None) is None and os.environ.get("SPARK_MASTER"):
        args.master = os.environ["SPARK_MASTER"]
    try:
        return args.fn(args)
    except DataError as exc:
        errors.print(f"error: {exc}", soft_wrap=True)
        return 2
    except HarnessError as exc:
        errors.print(f"error ({exc.status}): {exc}", soft_wrap=True)
        return 2
    except KeyboardInterrupt:
        errors.print("interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
