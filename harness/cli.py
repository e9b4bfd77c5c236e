"""Command line (`subgraph-harness`, or `python -m harness`): `run ...`, `bench WORKLOAD`, `baseline`, `gate`,
`report`, `compare`, `history`, `datasets` and `cluster`.
run and bench exit 0 only if every run is OK (UNVERIFIED too with --allow-unverified or the workload's
allow_unverified, TIM or MEM too where the workload's expected_timeouts or expected_mem name the
implementation), 2 otherwise
(bad input included, with a one-line error); gate exits 0 on a pass, 1 on a regression and 2 on a
failure; compare exits 0 when the counts of the systems that completed agree and a system outside the
project agreed, 1 when they differ, 2 on bad input or when fewer than two completed, 3 when they agree
but nothing outside the project checked them (UNVERIFIED; 0 with --allow-unverified)."""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from harness.bench import census, plots, projection
from harness.bench.record import RunRecord
from harness.bench.tables import (
    balance_table,
    capacity_table,
    critical_path_table,
    delta_table,
    fmt_int,
    logical_table,
    memory_grid_table,
    memory_model_table,
    results_table,
    scaling_tables,
    shares_table,
    summary_lines,
    unexpected_capacity_lines,
)
from harness.core.errors import DataError, HarnessError
from harness.core.results import RESULTS_DIR, expected_failure, new_run_id, passes, write_json_atomic
from harness.spark import session as spark

_WIDTH = None if sys.stdout.isatty() else int(os.environ.get("COLUMNS", 200))
console = Console(stderr=False, highlight=False, width=_WIDTH)
errors = Console(stderr=True, highlight=False, width=_WIDTH)


def _report_failures(records: list[RunRecord]) -> None:
    for r in records:
        if r.status == "UNVERIFIED":
            allowed = " (allowed: allow_unverified)" if r.allow_unverified else ""
            errors.print(
                f"[yellow]UNVERIFIED[/] {r.implementation} {r.query_name} on {r.dataset_name}: "
                f"count {r.count:,} not checked by anything independent: {r.unverified_reason}{allowed}",
                soft_wrap=True,
            )
        elif r.status != "OK":
            expected = " (expected by the workload)" if expected_failure(r) else ""
            errors.print(
                f"[red]{r.status}[/] {r.implementation} {r.query_name} on {r.dataset_name}: "
                f"{r.error or 'count disagrees with an oracle'}{expected}",
                soft_wrap=True,
            )
            for c in r.checks:
                for ex in c.get("counterexamples", []):
                    errors.print(f"    {c['name']}: {ex['kind']} x{ex['times']}: {ex['match']}")
    for line in unexpected_capacity_lines(records):
        errors.print(f"[yellow]{line}[/]", soft_wrap=True)


def _query_label(query) -> str:
    if isinstance(query, dict):
        return str(query.get("name") or query.get("edges"))
    text = str(getattr(query, "name", query))
    return Path(text).stem if text.endswith((".yaml", ".yml")) else text


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", text)[:60].strip("_")


def cmd_run(args) -> int:
    from harness.bench.runner import Runner, RunRequest

    params = {p.name: getattr(args, p.name) for p in _declared_params() if getattr(args, p.name) is not None}
    req = RunRequest(
        query=args.query,
        dataset=args.dataset,
        impl=args.impl,
        workers=args.workers,
        semantics=args.semantics,
        oracle=args.oracle,
        timeout_s=args.timeout,
        oracle_timeout_s=args.oracle_timeout,
        params=params,
        attribute_order=tuple(args.order.split(",")) if args.order else None,
        allow_unverified=args.allow_unverified,
        labels=args.labels,
    )
    record = Runner(args.master, args.workers, kernels=frozenset()).run(req)  # warms what the run calls
    path = Path(args.json) if args.json else RESULTS_DIR / "runs" / f"run-{record.run_id}.json"
    write_json_atomic(path, record.to_json())
    if record.status == "DAT":
        errors.print(f"error: {record.error}")
        return 2
    _print_results([record], f"run {record.run_id}", args.wide)
    _report_failures([record])
    console.print(f"result: {path}")
    if record.limit is not None:
        first = record.metrics.get("first_match_s")
        console.print(
            f"limit {record.limit:,}: count {record.count:,} is min({record.limit:,}, matches), verified as such; "
            f"first match after {'(not known)' if first is None else f'{first} s'}"
        )
    if record.output:
        console.print(f"matches: {record.output['path']} ({record.output['rows']:,} rows, Parquet)")
    return 0 if passes(record) else 2


def _checked_workload(name: str, tier: str | None, trials: int | None = None, labels: str | None = None):
    """The workload, with every query, implementation and dataset name checked before Spark starts:
    bad input fails fast and writes nothing."""
    import implementations
    from harness.bench import workload as workloads
    from harness.bench.runner import labelled_source, resolve_query, split_params
    from harness.data import datasets

    wl = workloads.load(name, tier)
    if trials is not None:
        wl.trials = trials
    if labels is not None:
        wl.labels = labels
    for name in wl.named_implementations():
        implementations.get(name)  # a misspelt name would silently expect nothing
    for req in wl.requests():
        impl_cls = implementations.get(req.impl)
        run_params, _ = split_params(impl_cls, req.params)
        labelled_source(req, resolve_query(req, impl_cls, run_params)[0])  # a label file missing or needed
    for dataset in wl.datasets:
        datasets.resolve(dataset)
    return wl


class _LiveColumn(ProgressColumn):
    """The current run's phase, level and batches (BiGJoin family), elapsed time and Spark UI address."""

    def __init__(self, runner):
        super().__init__()
        self.runner = runner

    def render(self, task) -> Text:
        return Text(self.runner.live_status(), style="cyan")


def _execute(wl, master: str | None, out_dir: Path) -> list[RunRecord]:
    """Run every request of a workload, writing each record to out_dir as it completes."""
    from harness.bench.runner import Runner, planned_kernels

    requests = wl.requests()
    runner = Runner(master, wl.workers[0], kernels=planned_kernels(requests))
    records = []
    console.print(f"[bold]{wl.name}[/] ({wl.tier} tier): {len(requests)} runs -> {out_dir}")
    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(bar_width=20),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        _LiveColumn(runner),
    )
    # The live display only on a terminal: a log (CI) gets one line per finished run.
    with Progress(*columns, console=console, transient=True, disable=not console.is_terminal) as progress:
        task = progress.add_task(wl.name, total=len(requests))
        for i, req in enumerate(requests, start=1):
            head = f"[{i}/{len(requests)}] {req.impl} {_query_label(req.query)}"
            label = f"{head} on {req.dataset} ({req.semantics}, W={req.workers}, trial {req.trial + 1})"
            progress.update(task, description=head)
            record = runner.run(req)
            records.append(record)
            name = f"{i:03d}-{_slug(req.impl)}-{_slug(str(record.query_name))}-{_slug(str(record.dataset_name))}-w{req.workers}-t{req.trial}.json"
            write_json_atomic(out_dir / name, record.to_json())
            mark = {"OK": "[green]OK[/]", "UNVERIFIED": "[yellow]UNVERIFIED[/]"}.get(
                str(record.status), f"[red]{record.status}[/]"
            )
            progress.console.print(f"{label}: {mark} count={fmt_int(record.count)} query_s={record.metrics.get('query_s', '-')}")
            progress.advance(task)
    return records


def _swap_in_real_graphs(wl, from_path: Path) -> None:
    """`bench --from FILE`: run on the real graph (read from FILE) in place of its synthetic twin."""
    from harness.data import datasets, fetch

    swapped = []
    for i, name in enumerate(wl.datasets):
        twin = datasets.resolve(name)
        if twin.twin_of is not None:
            real = datasets.resolve(twin.twin_of)
            fetch.fetch(real, from_path)
            wl.datasets[i] = real.name
            swapped.append(f"{name} -> {real.name}")
    if not swapped:
        raise DataError(
            f"--from {from_path}: no dataset of workload '{wl.name}' is the twin of a real graph (registry key twin_of)"
        )
    console.print(f"--from {from_path}: " + ", ".join(swapped))


def _print_results(records: list[RunRecord], title: str, wide: bool) -> None:
    """What run and bench print: the contest tables (100 columns), with `wide` every column of every
    run and the detail tables first."""
    if wide:
        console.print(results_table(records, title))
        _print_present(
            logical_table(records, "logical counters (MPC model)"),
            shares_table(records, "Shares grid"),
            balance_table(records, "per-worker balance (BiGJoin family)"),
        )
        for line in summary_lines(records):
            console.print(line)
    for table in census.tables(records):  # one per census case, at most 100 columns as the contest's
        console.print(table, width=min(console.width, CENSUS_WIDTH))
    _print_present(  # a table, or a group of them (the delta table: one per case)
        critical_path_table(records, "critical path, MPC model (busiest worker's tuples, summed over rounds)"),
        delta_table(records, "delta throughput by batch size (Figure 6)"),
        memory_model_table(records, "busiest worker's resident peak beside the cost model (docs/memory-cap.md)"),
        memory_grid_table(records, "who finishes under a memory cap per worker (status, resident peak)"),
        capacity_table(records, "resources under a memory cap: busiest worker, beside what the workload expects (! where not)"),
        *scaling_tables(records),
    )
    _print_contests(records, wide)


CENSUS_WIDTH = 100


def _print_present(*tables) -> None:
    """Print each table (or group of tables) a bench's records have: None where they have none."""
    for table in tables:
        if table is not None:
            console.print(table)


def _print_contests(records: list[RunRecord], wide: bool) -> None:
    """The bench's last word: per case, the implementations side by side (at most 100 columns unless
    wide) and who won, in lines that fit the terminal."""
    from harness.bench import contest

    for case in contest.cases(records):
        console.print(contest.table(case, wide), width=None if wide else min(console.width, contest.WIDTH))
        for line in contest.winner_lines(case, console.width):
            console.print(line, soft_wrap=True, markup=False)


def cmd_bench(args) -> int:
    wl = _checked_workload(args.workload, args.tier, args.trials, args.labels)
    wl.allow_unverified = wl.allow_unverified or args.allow_unverified
    if args.from_path:
        _swap_in_real_graphs(wl, Path(args.from_path))
    out_dir = Path(args.results) if args.results else RESULTS_DIR / "runs" / f"{new_run_id()}-{_slug(wl.name)}"
    records = _execute(wl, args.master, out_dir)
    _print_results(records, f"{wl.name} ({wl.tier} tier)", args.wide)
    if wl.projection:
        _print_present(*projection.tables(records, wl.projection))
    for plot in (
        plots.shares_w_sweep(records, out_dir / "shares-w-sweep.png"),
        plots.skew_crossover(records, out_dir / "skew-crossover.png"),
        plots.delta_throughput(records, out_dir / "delta-throughput.png"),
        plots.memory_wall(records, out_dir / "memory-wall.png"),
        *plots.scaling(records, out_dir / "scaling.png"),
    ):
        if plot is not None:
            console.print(f"plot: {plot}")
    _report_failures(records)
    console.print(f"results: {out_dir}")
    return 0 if all(passes(r) for r in records) else 2


def _time_limits(args, wl) -> tuple[float, float]:
    """The time threshold and the least slowdown that counts: the flags', else the workload's, else the gate's defaults."""
    from harness.bench import gate

    threshold = next(v for v in (args.threshold, wl.time_threshold, gate.DEFAULT_TIME_THRESHOLD) if v is not None)
    min_seconds = next(v for v in (args.min_seconds, wl.min_seconds, gate.DEFAULT_MIN_SECONDS) if v is not None)
    return threshold, min_seconds


def cmd_baseline(args) -> int:
    from harness.bench import gate
    from harness.core.results import git_info

    if git_info().get("dirty") is not False:
        raise DataError("baseline: refusing to record from a dirty (or unknown) tree: commit or stash your changes first")
    trials = max(args.trials, gate.MIN_TRIALS)
    wl = _checked_workload(args.workload, args.tier, trials)
    name = args.name or _slug(wl.name if wl.tier == "default" else f"{wl.name}-{wl.tier}")
    path = gate.BASELINE_DIR / f"{name}.json"
    records = _execute(wl, args.master, RESULTS_DIR / "runs" / f"{new_run_id()}-baseline-{name}")
    threshold, min_seconds = _time_limits(args, wl)
    baseline = gate.make_baseline(name, args.workload, args.tier, records, threshold, min_seconds)
    write_json_atomic(path, baseline)
    console.print(
        f"baseline: {path} ({len(baseline['runs'])} runs x {trials} trials, commit {str(baseline['git']['commit'])[:7]})"
    )
    return 0


def _gate_against(args) -> tuple[dict, list[RunRecord], Path, Path]:
    """`gate --against REV`: REV and this tree run a workload alternating; (baseline, this tree's
    records, the name the findings give the baseline, the results directory)."""
    from harness.bench import gate

    if not args.paired:
        raise DataError("gate --against: compares paired runs only; drop --unpaired")
    commit = gate.commit_of(args.against)
    trials = max(args.trials, gate.MIN_TRIALS)
    wl = _checked_workload(args.workload, args.tier, trials)
    threshold, min_seconds = _time_limits(args, wl)
    name = _slug(f"{wl.name if wl.tier == 'default' else f'{wl.name}-{wl.tier}'}-against-{commit[:7]}")
    out_dir = Path(args.results) if args.results else RESULTS_DIR / "runs" / f"{new_run_id()}-gate-{name}"
    baseline, records = gate.paired_against(
        commit, args.workload, args.tier, trials, out_dir, (threshold, min_seconds), args.master, console.print
    )
    return baseline, records, Path(f"--against {args.against}"), out_dir


def cmd_gate(args) -> int:
    from harness.bench import gate
    from harness.core.results import machine_info

    if args.against:
        baseline, records, path, out_dir = _gate_against(args)
    else:
        path = Path(args.baseline)
        baseline = gate.load_baseline(path)
        trials = max(int(baseline["trials"]), gate.MIN_TRIALS)
        wl = _checked_workload(baseline["workload"], baseline.get("tier"), trials)
        out_dir = Path(args.results) if args.results else RESULTS_DIR / "runs" / f"{new_run_id()}-gate-{_slug(path.stem)}"
        if args.paired:
            old, records = gate.run_paired(baseline, trials, out_dir, args.master, console.print)
            baseline = gate.with_paired_times(baseline, old, machine_info())
        else:
            records = _execute(wl, args.master, out_dir)
    timing = args.timing or ("binding" if args.paired else "advisory")
    comparison = gate.compare(baseline, gate.summarize(records), machine_info(), args.threshold, timing, args.min_seconds)
    lines = gate.render(comparison, baseline, path, args.verbose, timing)
    write_json_atomic(
        out_dir / "gate.json",
        {
            "baseline": str(path),
            "exit_code": comparison.exit_code,
            "timing": timing,
            "paired": args.paired,
            "same_machine": comparison.same_machine,
            "findings": [vars(f) for f in comparison.findings],
        },
    )
    for line in lines:
        console.print(line, markup=False, highlight=False)
    return comparison.exit_code


def cmd_report(args) -> int:
    from harness.bench import report

    page = report.build(Path(args.runs), Path(args.out))
    pngs = sorted(p.name for p in page.parent.glob("*.png"))
    console.print(f"report: {page} ({len(pngs)} plots: {', '.join(pngs)}); open {page.with_suffix('.html')} in a browser")
    return 0


def cmd_history(args) -> int:
    from harness.spark import history

    directory = Path(args.dir).resolve() if args.dir else history.log_dir()
    if directory is None:
        raise DataError(f"history: {history.SETTING} is set empty, so no event logs are written; pass --dir")
    return history.serve(directory, args.port, console.print)


def cmd_cluster(args) -> int:
    from harness.spark import cluster, memory_cap

    directory = Path(args.dir) if args.dir else cluster.state_dir()
    if args.action == "up":
        isolated = not args.shared_tmp
        cap = None if args.memory_per_worker is None else memory_cap.parse_cap(args.memory_per_worker)
        c = cluster.up(
            directory, args.hosts, args.cores, args.memory, args.port, args.webui_port, isolated=isolated, cap_bytes=cap
        )
        if cap is not None:
            console.print(
                f"cluster: each worker's executor and its Python workers capped at {args.memory_per_worker} (a cgroup each)"
            )
        if isolated:
            console.print(
                f"cluster: master {c.url} (UI {c.webui}), {args.hosts} hosts ({', '.join(c.worker_hosts)}) x "
                f"{args.cores} cores, each with a private /tmp, sharing the store {c.store} and the input datasets; run with "
                f"SPARK_MASTER={c.url} HARNESS_STORE={c.store}; stop with `make cluster-down`"
            )
        else:
            console.print(
                f"cluster: master {c.url} (UI {c.webui}), {args.hosts} workers on {cluster.HOST} x {args.cores} "
                f"cores sharing every file; run with SPARK_MASTER={c.url} HARNESS_STORE=<a directory>; "
                f"stop with `make cluster-down`"
            )
    elif args.action == "down":
        stopped = cluster.down(directory)
        console.print(f"cluster: stopped {len(stopped)} processes" if stopped else "cluster: not running")
    else:
        console.print(cluster.status(directory))
    return 0


def cmd_compare(args) -> int:
    from harness.bench import compare

    cmp = compare.plan(
        args.query, args.dataset, args.systems, args.semantics, args.workers, args.timeout, args.networkx_max_edges
    )
    run_id = new_run_id()
    out_dir = (
        Path(args.results)
        if args.results
        else (RESULTS_DIR / "runs" / f"{run_id}-compare-{_slug(_query_label(args.query))}-{_slug(cmp.source.name)}")
    )
    return compare.execute(cmp, args.master, out_dir, console, run_id, args.allow_unverified)


def _declared_params() -> list:
    """The harness's run parameters, then every parameter an implementation declares (first declaration wins)."""
    from harness.bench.runner import RUN_PARAMS
    from implementations import REGISTRY

    seen: dict[str, object] = {p.name: p for p in RUN_PARAMS}
    for cls in REGISTRY.values():
        for p in cls.params:
            seen.setdefault(p.name, p)
    return list(seen.values())


def _add_param_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per declared parameter, its help from the declaration and the implementations that read it."""
    from harness.bench.runner import RUN_PARAMS
    from implementations import REGISTRY

    run_readers = {
        "updates": [name for name, cls in REGISTRY.items() if cls.maintains_updates],
        "recompute": [name for name, cls in REGISTRY.items() if cls.maintains_updates],
        "memory_per_worker": [name for name, cls in REGISTRY.items() if not cls.runs_in_driver],
        "output": [name for name, cls in REGISTRY.items() if cls.writes_matches],
        "limit": [name for name, cls in REGISTRY.items() if cls.writes_matches],
        "census_method": [
            "every implementation; induced: " + (", ".join(n for n, c in REGISTRY.items() if c.anti_edges) or "none yet")
        ],
    }
    for p in _declared_params():
        readers = (
            run_readers[p.name]
            if p in RUN_PARAMS
            else [name for name, cls in REGISTRY.items() if p.name in {q.name for q in cls.params}]
        )
        default = (
            "" if p.default is None else f"; default {p.default:,}" if isinstance(p.default, int) else f"; default {p.default}"
        )
        kind = {"action": argparse.BooleanOptionalAction} if p.type is bool else {"type": p.type}
        parser.add_argument(
            p.flag, dest=p.name, default=None, **kind, help=f"{p.help} ({', '.join(readers)}{default})".replace("%", "%%")
        )


def _add_verbose_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="also what Spark's JVM prints on stderr as it starts (Java's incubator-module warning), dropped otherwise",
    )


class Flag(NamedTuple):
    """One argument of a command, as argparse's add_argument takes it."""

    names: tuple[str, ...]
    options: dict


def flag(*names: str, **options) -> Flag:
    return Flag(names, options)


class Command(NamedTuple):
    """One subcommand: its flags in order (a Flag, or a function that adds some to the parser:
    declared parameters, a group), and the function it runs."""

    name: str
    help: str
    fn: Callable
    flags: list
    common: bool = True  # takes --master


UNVERIFIED_HELP = "exit 0 even if nothing independent checked the count (the result still says UNVERIFIED)"
QUERY_HELP = "built-in name, pattern string (a-b,b-c,a-c) or YAML path"
DATASET_HELP = "registry name, generator spec (rmat:scale=12) or edge-list path"
LABELS_HELP = "(`vertex label` lines, or Parquet columns vertex, label)"
SEMANTICS = flag("--semantics", default="undirected", choices=["undirected", "directed"])


def _run_flags() -> list:
    from implementations import REGISTRY

    return [
        flag(
            "--query",
            required=True,
            help="built-in name, pattern string (a-b,b-c,a-c), YAML path, or motifs:3 / motifs:4 (the induced motif census)",
        ),
        flag("--dataset", required=True, help=DATASET_HELP),
        flag("--impl", required=True, help=f"implementation: {', '.join(REGISTRY)}"),
        flag("--workers", type=int, default=2, help="logical workers = partitions of every exchange"),
        SEMANTICS,
        flag("--oracle", default="auto", help="auto | networkx | duckdb | graphblas | native | published | none"),
        flag("--allow-unverified", action="store_true", help=UNVERIFIED_HELP),
        flag(
            "--oracle-timeout",
            type=float,
            default=600.0,
            help="seconds each oracle may take; one that runs longer is killed and the count stays unverified by it",
        ),
        flag("--timeout", type=float, default=None, help="seconds for index + query before TIM"),
        flag("--order", default=None, help="attribute order, e.g. a1,a2,a3"),
        flag("--labels", default=None, help=f"vertex label file for the dataset {LABELS_HELP}"),
        _add_param_flags,
        flag("--json", default=None, help="result file (default: results/runs/run-<id>.json)"),
        flag("--wide", action="store_true", help="also every column of the run and its detail tables"),
        _add_verbose_flag,
    ]


def _bench_flags() -> list:
    return [
        flag("workload", help="name under workloads/ or a YAML path"),
        flag("--tier", default=None, help="a tier defined in the workload (default: its base settings)"),
        flag("--results", default=None, help="directory for the run files"),
        flag("--trials", type=int, default=None, help="override the workload's trials"),
        flag(
            "--wide",
            action="store_true",
            help="also every column of every run, the logical counters, Shares' grid, per-worker balance and time breakdowns",
        ),
        flag(
            "--allow-unverified",
            action="store_true",
            help="exit 0 even if nothing independent checked some count (they still say UNVERIFIED)",
        ),
        flag(
            "--from",
            dest="from_path",
            default=None,
            help="the real graph's file (e.g. soc-LiveJournal1.txt.gz): run on it instead of its twin",
        ),
        flag(
            "--labels", default=None, help=f"vertex label file for the workload's datasets (over its key 'labels') {LABELS_HELP}"
        ),
        _add_verbose_flag,
    ]


def _baseline_flags() -> list:
    return [
        flag("--workload", default="gate", help="workload name or YAML path (default: gate)"),
        flag("--tier", default=None),
        flag("--name", default=None, help="baseline name (default: the workload's): results/baselines/NAME.json"),
        flag("--trials", type=int, default=3, help="trials per run (at least 3)"),
        flag(
            "--threshold",
            type=float,
            default=None,
            help="time regression threshold stored with it (default: the workload's time_threshold, else 0.25 = 25%%)",
        ),
        flag(
            "--min-seconds",
            type=float,
            default=None,
            help="and the least slowdown in seconds that counts (default: the workload's min_seconds, else 0.5)",
        ),
    ]


def _gate_flags() -> list:
    return [
        flag(
            "--baseline",
            default=str(Path("results") / "baselines" / "gate.json"),
            help="a baseline written by `baseline` (default: results/baselines/gate.json)",
        ),
        flag(
            "--timing",
            choices=["binding", "advisory"],
            default=None,
            help="binding: a slower run fails the gate; advisory: reported, never failing "
            "(default: binding when paired, advisory when unpaired)",
        ),
        flag("--threshold", type=float, default=None, help="override the baseline's time threshold"),
        flag("--min-seconds", type=float, default=None, help="override the baseline's least slowdown that counts"),
        flag("--verbose", action="store_true", help="show every check, not only the flagged ones"),
        flag("--results", default=None, help="directory for the run files and gate.json"),
        flag(
            "--against",
            default=None,
            metavar="REV",
            help="instead of a baseline: this commit and this tree run --workload (--tier) --trials times each, "
            "alternating, and this tree is held to the commit's counts, counters and times",
        ),
        flag("--workload", default="gate", help="with --against: workload name or YAML path (default: gate)"),
        flag("--tier", default=None, help="with --against: the workload's tier"),
        flag("--trials", type=int, default=5, help="with --against: trials per side (default 5, at least 3)"),
        _add_pairing_flags,
    ]


def _add_pairing_flags(parser: argparse.ArgumentParser) -> None:
    pairing = parser.add_mutually_exclusive_group()
    pairing.add_argument(
        "--paired",
        dest="paired",
        action="store_true",
        default=True,
        help="(the default) rerun the baseline's commit here too, alternating trials, and compare times with those",
    )
    pairing.add_argument(
        "--unpaired",
        dest="paired",
        action="store_false",
        help="compare with the baseline's stored times instead: quicker, and advisory unless --timing binding",
    )


def _report_flags() -> list:
    return [
        flag("--runs", default=str(RESULTS_DIR / "runs"), help="directory of run directories"),
        flag("--out", default=str(RESULTS_DIR / "report"), help="where index.md, index.html and the plots go"),
    ]


def _history_flags() -> list:
    from harness.spark import history

    return [
        flag("--dir", default=None, help="event log directory (default: $HARNESS_EVENTLOG_DIR, else results/eventlogs)"),
        flag("--port", type=int, default=history.DEFAULT_PORT, help="the History Server's port on 127.0.0.1"),
    ]


def _cluster_flags() -> list:
    return [
        flag("action", choices=["up", "down", "status"]),
        flag("--dir", default=None, help="state, logs and the hosts' private directories (default: .cluster/)"),
        flag(
            "--hosts",
            "--workers",
            type=int,
            default=2,
            dest="hosts",
            help="workers, on 127.0.0.2, 127.0.0.3, ... (the store: HARNESS_STORE, else <dir>-store)",
        ),
        flag(
            "--shared-tmp",
            action="store_true",
            help="the old single-machine cluster: every worker on 127.0.0.1, sharing /tmp and the checkout",
        ),
        flag("--cores", type=int, default=1, help="cores each worker offers"),
        flag("--memory", default="6g", help="memory each worker offers to executors"),
        flag(
            "--memory-per-worker",
            default=None,
            help="cap each worker's executor and its Python workers at SIZE (a cgroup each, root); runs then "
            "pass the same --memory-per-worker (docs/memory-cap.md)",
        ),
        flag("--port", type=int, default=7077),
        flag("--webui-port", type=int, default=8080, help="the master's UI; workers use the next ports"),
    ]


def _compare_flags() -> list:
    from harness.bench import compare

    return [
        flag("--query", required=True, help=QUERY_HELP),
        flag("--dataset", required=True, help=DATASET_HELP),
        flag("--systems", default=None, help=f"comma list to restrict to (default: all: {', '.join(compare.SYSTEMS)})"),
        SEMANTICS,
        flag(
            "--workers", default="1,2", help="W values for bigjoin (the COST sweep); the other Spark systems run at the largest"
        ),
        flag("--timeout", type=float, default=1800.0, help="seconds per system before TIM"),
        flag(
            "--networkx-max-edges",
            type=int,
            default=None,
            help="skip networkx above this many edges (default: the oracles' auto limit)",
        ),
        flag("--results", default=None, help="directory for compare.json and compare.md"),
        flag(
            "--allow-unverified",
            action="store_true",
            help="exit 0 when the counts agree but no system outside the project took part (still UNVERIFIED)",
        ),
    ]


def _datasets_flags() -> list:
    return [
        flag("action", choices=["list", "fetch", "verify", "convert", "stream"]),
        flag("names", nargs="*", help="dataset names"),
        flag("--all", action="store_true", help="verify: every shared SNAP graph"),
        flag("--from", dest="from_path", default=None, help="fetch: use this local copy instead of downloading"),
        flag("--no-convert", action="store_true", help="fetch: skip the conversion to Parquet"),
        flag("--updates", default=None, help="stream: e.g. holdback=0.1,batch=1000,batches=5,deletes=0.2,seed=1"),
        SEMANTICS,
        flag("--out", default=None, help="stream: output file of `src dst ±1 batch` lines"),
    ]


def _cmd_datasets(args) -> int:
    from harness.dataset_cli import cmd_datasets

    return cmd_datasets(args, console)


def commands() -> list[Command]:
    """Every subcommand, in the order `--help` lists them."""
    return [
        Command("run", "run one query on one dataset with one implementation", cmd_run, _run_flags()),
        Command("bench", "run workloads/WORKLOAD.yaml", cmd_bench, _bench_flags()),
        Command("baseline", "record a regression baseline (clean tree only)", cmd_baseline, _baseline_flags()),
        Command(
            "gate", "rerun a baseline's workload and compare (exit 0 pass, 1 regression, 2 failure)", cmd_gate, _gate_flags()
        ),
        Command(
            "report",
            "tables and plots of the recorded runs (Markdown page + PNG, and one self-contained HTML page)",
            cmd_report,
            _report_flags(),
            common=False,
        ),
        Command(
            "history",
            "Spark's History Server on 127.0.0.1 over the runs' event logs (until Ctrl-C)",
            cmd_history,
            _history_flags(),
            common=False,
        ),
        Command(
            "cluster",
            "start/stop a Spark standalone master (127.0.0.1) and workers, each on a "
            "loopback address of its own with a private /tmp (unshare -m)",
            cmd_cluster,
            _cluster_flags(),
            common=False,
        ),
        Command(
            "compare",
            "every implementation and the peer systems (DuckDB, Kuzu, networkx, GraphX) on one graph "
            "(exit 0 counts agree and an outside system agreed, 1 they differ, 2 bad input, 3 unverified)",
            cmd_compare,
            _compare_flags(),
        ),
        Command("datasets", "list, fetch, verify datasets; make update streams", _cmd_datasets, _datasets_flags()),
    ]


def build_parser() -> argparse.ArgumentParser:
    """The parser, built from `commands()`."""
    parser = argparse.ArgumentParser(prog="subgraph-harness", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--master", default=None, help="Spark master URL (default: $SPARK_MASTER or local[*])")
    for command in commands():
        one = sub.add_parser(command.name, parents=[common] if command.common else [], help=command.help)
        for item in command.flags:
            if isinstance(item, Flag):
                one.add_argument(*item.names, **item.options)
            else:
                item(one)
        one.set_defaults(fn=command.fn)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "master", None) is None and os.environ.get("SPARK_MASTER"):
        args.master = os.environ["SPARK_MASTER"]
    if args.command in ("run", "bench"):  # gate's --verbose is its own: every check
        spark.set_verbose(args.verbose)
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


def entry_point() -> int:
    """`subgraph-harness` and `python -m harness`: main, then stop the Spark session, so its event log
    is complete (not left .inprogress) for the History Server."""
    from harness.spark.session import stop_session

    try:
        return main()
    finally:
        stop_session()


if __name__ == "__main__":
    sys.exit(entry_point())
