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

from . import plots
from .errors import DataError, HarnessError
from .results import RESULTS_DIR, new_run_id, write_json_atomic
from .tables import balance_table, delta_table, fmt_int, logical_table, results_table, shares_table, summary_lines

_WIDTH = None if sys.stdout.isatty() else int(os.environ.get("COLUMNS", 200))
console = Console(stderr=False, highlight=False, width=_WIDTH)
errors = Console(stderr=True, highlight=False, width=_WIDTH)


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
    if args.updates is not None:
        params["updates"] = args.updates
    if args.changes:
        params["changes"] = args.changes
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
            progress.console.print(f"{label}: {mark} count={fmt_int(record.get('count'))} query_s={record['metrics'].get('query_s', '-')}")
            progress.advance(task)
    console.print(results_table(records, f"{wl.name} ({wl.tier} tier)"))
    for extra in (logical_table(records, "logical counters (MPC model)"), shares_table(records, "Shares grid"),
                  balance_table(records, "per-worker balance (BiGJoin family)"),
                  delta_table(records, "delta throughput by batch size (Figure 6)")):
        if extra is not None:
            console.print(extra)
    for line in summary_lines(records):
        console.print(line)
    for plot in (plots.shares_w_sweep(records, out_dir / "shares-w-sweep.png"),
                 plots.skew_crossover(records, out_dir / "skew-crossover.png"),
                 plots.delta_throughput(records, out_dir / "delta-throughput.png")):
        if plot is not None:
            console.print(f"plot: {plot}")
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
    run.add_argument("--oracle", default="auto", help="auto | duckdb | networkx | none (with --updates also bigjoin: a recompute)")
    run.add_argument("--oracle-timeout", type=float, default=600.0)
    run.add_argument("--timeout", type=float, default=None, help="seconds for index + query before TIM")
    run.add_argument("--batch", type=int, default=None, help="batch size parameter passed to the implementation")
    run.add_argument("--order", default=None, help="attribute order, e.g. a1,a2,a3")
    run.add_argument("--updates", default=None,
                     help="update stream for delta-bigjoin: a spec (holdback=0.1,batch=1000,batches=5,deletes=0.2,seed=1) "
                          "or a file of `src dst ±1 batch` lines (then the dataset is the initial graph)")
    run.add_argument("--changes", type=int, default=0, help="with --updates: record up to N changed matches per batch")
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
