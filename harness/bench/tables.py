"""Console tables of run records: results, the MPC-model counters of the dataflow implementations,
Shares' grid, and one-line summaries (index sharing, time and communication side by side)."""

from __future__ import annotations

import statistics

from rich import box
from rich.console import Group, JustifyMethod
from rich.table import Table

from harness.bench.record import RunRecord


def fmt_int(v) -> str:
    return f"{v:,}" if isinstance(v, int) else ("-" if v is None else str(v))


def fmt_bytes(v) -> str:
    if not v:
        return "0" if v == 0 else "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if v < 1024:
            return f"{v:.1f} {unit}" if v < 10 and unit != "B" else f"{v:.0f} {unit}"
        v /= 1024
    return f"{v:.1f} TiB"


def _oracle_cell(r: RunRecord) -> str:
    if r.status == "DAT" or (not r.checks and not r.oracle):
        return "-"
    parts = []
    for c in r.checks:
        marks: dict[bool | None, str] = {True: "[green]✓[/]", False: "[red]✗[/]"}
        mark = marks.get(c.get("agrees"), f"[yellow]{c.get('status')}[/]")
        parts.append(f"{c['name']} {mark}")
    if not parts:
        o = r.oracle or {}
        parts.append(f"[yellow]{o.get('name')} {o.get('status')}[/]")
    return ", ".join(parts) + ("" if r.verified else " [yellow](unverified)[/]")


def _memory_cell(r: RunRecord) -> str:
    """The run's own peaks, sampled in its window: driver Python, driver JVM, the JVM's Python workers."""
    peaks = r.process_peaks
    if not peaks:
        return "-"
    return " / ".join(fmt_bytes(p.peak_bytes) for p in peaks.values())


def results_table(records: list[RunRecord], title: str) -> Table:
    table = Table(title=title, show_lines=False)
    columns: list[tuple[str, JustifyMethod]] = [
        ("dataset", "left"),
        ("query", "left"),
        ("sem", "left"),
        ("impl", "left"),
        ("W", "right"),
        ("status", "left"),
        ("count", "right"),
        ("verified by", "left"),
        ("load s", "right"),
        ("index s", "right"),
        ("query s", "right"),
        ("shuffle rec", "right"),
        ("rounds", "right"),
        ("max/mean load", "right"),
        ("peak exec mem", "right"),
        ("RSS peak py / JVM / workers", "right"),
        ("spill", "right"),
    ]
    for col, justify in columns:
        table.add_column(col, justify=justify)
    for r in records:
        m = r.metrics
        status = r.status
        colour = {"OK": "green", "UNVERIFIED": "yellow"}.get(str(status), "red")
        skew = m.get("load_skew")
        table.add_row(
            str(r.dataset_name),
            str(r.query_name),
            r.semantics[:3],
            r.implementation,
            str(r.workers),
            f"[{colour}]{status}[/]",
            fmt_int(r.count),
            _oracle_cell(r),
            f"{m['load_s']:.2f}" if "load_s" in m else "-",
            f"{m['index_s']:.2f}" if "index_s" in m else "-",
            f"{m['query_s']:.2f}" if "query_s" in m else "-",
            fmt_int(m.get("shuffle_records")),
            fmt_int(m.get("rounds")),
            f"{m.get('max_task_records', 0):,} / {m.get('mean_task_records', 0):,.0f} ({skew:.2f}x)" if skew else "-",
            fmt_bytes(m.get("peak_exec_memory_bytes")),
            _memory_cell(r),
            fmt_bytes(m.get("spill_bytes")),
        )
    return table


def logical_table(records: list[RunRecord], title: str) -> Table | None:
    """The MPC-model counters of the dataflow implementations (§2.3), one row per run."""
    rows = [r for r in records if r.logical.get("tuples_exchanged") is not None]
    if not rows:
        return None
    table = Table(title=title)
    for col in (
        "dataset",
        "query",
        "impl",
        "W",
        "B'",
        "prefixes per level",
        "proposals",
        "probes",
        "tuples exchanged",
        "rounds",
        "batches",
        "peak in flight",
        "index",
    ):
        table.add_column(col, justify="left" if col in ("dataset", "query", "impl", "prefixes per level", "index") else "right")
    for r in rows:
        lg = r.logical
        levels = " / ".join(fmt_int(v) for v in lg.get("prefixes_per_level", {}).values())
        index = "reused" if r.metrics.get("index_reused") else "built"
        table.add_row(
            str(r.dataset_name),
            str(r.query_name),
            r.implementation,
            str(r.workers),
            fmt_int(lg.get("batch_per_worker")),
            levels,
            fmt_int(lg.get("proposals")),
            fmt_int(lg.get("intersection_probes")),
            fmt_int(lg.get("tuples_exchanged")),
            fmt_int(lg.get("rounds")),
            fmt_int(sum(lg.get("batches_per_level", []))),
            fmt_int(lg.get("peak_prefixes_in_flight")),
            index,
        )
    return table


def summary_lines(records: list[RunRecord]) -> list[str]:
    """Index sharing across runs, and each implementation's time (index_s + query_s) relative to the
    native floor (when the native counter checked the run) and to local-gj on the same dataset,
    query, semantics and parameters, measured in this run."""
    lines = []
    built: dict[tuple, tuple[float, int]] = {}
    for r in records:
        m = r.metrics
        if "index_s" not in m or r.logical.get("index") is None:
            continue
        key = (r.dataset_name, r.semantics, r.implementation, r.workers)
        if not m.get("index_reused"):
            built[key] = (m["index_s"], built.get(key, (0, 0))[1])
        elif key in built:
            built[key] = (built[key][0], built[key][1] + 1)
    for (dataset, semantics, impl, workers), (seconds, reused) in built.items():
        if reused:
            lines.append(
                f"{impl} on {dataset} ({semantics}, W={workers}): index built once in {seconds:.2f} s and "
                f"reused by {reused} more run(s), saving about {seconds * reused:.2f} s"
            )

    def total(r: RunRecord) -> float | None:
        return r.charged_s if r.status == "OK" else None  # a reused index charged at its build

    def same(r: RunRecord) -> tuple:
        params = {k: v for k, v in r.params.items() if k != "batch"}
        return (r.dataset_name, r.query_name, r.semantics, str(sorted(params.items())), r.trial)

    for r in records:  # the native floor: the independent native counter's own time (lists + count) for this check
        floor = next(
            (c["count_s"] for c in r.checks if c.get("name") == "native" and c.get("status") == "ok" and c.get("count_s")),
            None,
        )
        took = total(r)
        if floor and took:
            lines.append(
                f"{r.implementation} / native floor on {r.query_name} {r.dataset_name}: "
                f"{took:.2f} s / {floor:.2f} s = {took / floor:.2f}x"
            )
    for r in records:
        for phase, t in (r.metrics.get("time_breakdown") or {}).items():
            lines.append(time_line(r, phase, t))
    base = {same(r): (r, t) for r in records if r.implementation == "local-gj" and (t := total(r))}
    for r in records:
        ref, ref_s = base.get(same(r), (None, None))
        took = total(r)
        if ref is None or ref_s is None or r is ref or took is None:
            continue
        agree = "same count" if r.count == ref.count else f"[red]count differs ({r.count} vs {ref.count})[/]"
        lines.append(
            f"{r.implementation} / local-gj on {r.query_name} {r.dataset_name}: "
            f"{took:.2f} s / {ref_s:.2f} s = {took / ref_s:.2f}x ({agree})"
        )
    groups: dict[tuple, list[RunRecord]] = {}
    for r in records:
        if r.status == "OK" and r.implementation != "local-gj" and r.communication:
            groups.setdefault((same(r), r.workers), []).append(r)
    for group in groups.values():
        if len(group) > 1:
            r = group[0]
            parts = [
                f"{g.implementation} {fmt_int(c.tuples)} {c.unit} in {total(g):.2f} s" for g in group if (c := g.communication)
            ]
            lines.append(f"communication on {r.query_name} {r.dataset_name} W={r.workers}: " + "; ".join(parts))
    return lines


def time_line(r: RunRecord, phase: str, t: dict) -> str:
    """One run phase's time breakdown (runner.time_breakdown) on one line."""
    wall = t["wall_s"] or 1e-9
    return (
        f"time {r.implementation} {r.query_name} {r.dataset_name} {phase} {t['wall_s']:.2f} s: "
        f"tasks' critical path {t['critical_path_s']:.2f} s ({t['critical_path_s'] / wall:.0%}), "
        f"scheduling {t['scheduling_s']:.2f} s ({t['scheduling_s'] / wall:.0%}) over {t['stages']} stages; "
        f"all tasks: run {t['executor_run_s']:.2f} s, JVM CPU {t['executor_cpu_s']:.2f}, GC {t['gc_s']:.2f}, "
        f"deserialise {t['deserialize_s']:.2f}, shuffle write {t['shuffle_write_s']:.2f}, fetch wait {t['shuffle_fetch_wait_s']:.2f}"
        + ("; Python: " + ", ".join(f"{k} {v:.2f}" for k, v in t["python_task_s"].items()) if t.get("python_task_s") else "")
        + (f"; Spark's floor (empty jobs of this shape) {t['spark_floor_s']:.2f} s" if "spark_floor_s" in t else "")
    )


def shares_table(records: list[RunRecord], title: str) -> Table | None:
    """Shares/HyperCube runs: the grid, what it shipped against the formula, and the per-cell load."""
    rows = [r for r in records if r.logical.get("tuples_shipped_predicted") is not None]
    if not rows:
        return None
    table = Table(title=title)
    for col in (
        "dataset",
        "query",
        "W",
        "shares",
        "cells",
        "input",
        "shipped",
        "= formula",
        "replication",
        "cell load max / mean",
        "predicted",
        "cell work max / mean",
        "join s max",
    ):
        table.add_column(col, justify="left" if col in ("dataset", "query", "shares") else "right")
    for r in rows:
        lg, m = r.logical, r.metrics
        exact = "[green]yes[/]" if m.get("tuples_shipped") == lg["tuples_shipped_predicted"] else "[red]no[/]"
        table.add_row(
            str(r.dataset_name),
            str(r.query_name),
            str(r.workers),
            " ".join(f"{a}={s}" for a, s in lg["shares"].items()),
            str(lg["cells"]),
            fmt_int(lg["input_tuples"]),
            fmt_int(m.get("tuples_shipped")),
            exact,
            f"{lg['replication_factor']:.2f}",
            f"{fmt_int(lg['max_cell_load'])} / {lg['mean_cell_load']:,.0f}",
            f"{lg['predicted_cell_load']:,.0f}",
            f"{fmt_int(lg['max_cell_work'])} / {lg['mean_cell_work']:,.0f}",
            f"{max(lg['join_seconds_per_cell'], default=0):.2f}",
        )
    return table


def balance_table(records: list[RunRecord], title: str) -> Table | None:
    """The BiGJoin family's per-worker balance: the worst round with enough work to share (tuples
    received per worker, and Spark's shuffle bytes read per task), index entries per worker, and
    communication, each run beside the others on the same graph."""
    rows = [r for r in records if r.logical.get("round_load_skew") is not None]
    if not rows:
        return None
    table = Table(title=title)
    for col in (
        "dataset",
        "query",
        "W",
        "impl",
        "rounds busy / all",
        "worst round max/mean",
        "Spark bytes max/mean",
        "index max/mean",
        "tuples exchanged",
        "query shuffle bytes",
        "time s",
    ):
        table.add_column(col, justify="left" if col in ("dataset", "query", "impl") else "right")
    for r in rows:
        lg, m = r.logical, r.metrics
        # Spark sees bytes, not tuples: a busy round is taken as one of at least 8 bytes per tuple of work.
        busy = [
            x
            for x in m.get("per_round", [])
            if x.get("phase") == "query" and x.get("mean_task_bytes", 0) >= 8 * lg["enough_work_per_worker"]
        ]
        spark_skew = max((x["bytes_skew"] for x in busy if x.get("bytes_skew")), default=None)
        worst = lg.get("max_round_load_skew")
        table.add_row(
            str(r.dataset_name),
            str(r.query_name),
            str(r.workers),
            r.implementation,
            f"{lg['rounds_with_enough_work']} / {len(lg['round_load_skew'])}",
            f"{worst:.2f}" if worst else "-",
            f"{spark_skew:.2f}" if spark_skew else "-",
            f"{lg['index'].get('entries_max_over_mean') or 0:.2f}",
            fmt_int(lg["tuples_exchanged"]),
            fmt_bytes(sum(x["bytes"] for x in m.get("per_round", []) if x.get("phase") == "query")),
            f"{(m.get('index_s') or 0) + (m.get('query_s') or 0):.2f}",
        )
    return table


def critical_path_table(records: list[RunRecord], title: str) -> Table | None:
    """BiGJoin-S against BiGJoin in the cost model's time (§2.3), where both ran the same query on the
    same graph and W: summed over rounds, the tuples the busiest worker received, against a perfectly
    balanced run's (the total over W) and against bigjoin's (below 1, BiGJoin-S wins)."""

    def key(r: RunRecord) -> tuple:
        return (str(r.dataset_name), str(r.query_name), r.semantics, r.workers)

    measured = [
        r
        for r in records
        if r.status == "OK"
        and r.implementation in ("bigjoin", "bigjoin-s", "bigjoin-s-paper")
        and r.logical.get("critical_path_tuples") is not None
    ]
    plain = {key(r): r.logical["critical_path_tuples"] for r in measured if r.implementation == "bigjoin"}
    rows = [r for r in measured if key(r) in plain and any(key(o) == key(r) and o is not r for o in measured)]
    if not rows:
        return None
    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("dataset", "query", "W", "impl", "worst round", "crit. path", "/ balanced", "/ bigjoin's"):
        table.add_column(col, justify="left" if col in ("dataset", "query", "impl") else "right")
    for r in rows:
        lg = r.logical
        worst, bigjoin_path = lg.get("max_round_load_skew"), plain[key(r)]  # bigjoin's; 0 at W = 1: nothing exchanged
        table.add_row(
            key(r)[0][:24],
            key(r)[1],
            str(key(r)[3]),
            r.implementation,
            f"{worst:.2f}" if worst else "-",
            fmt_int(lg["critical_path_tuples"]),
            f"{lg['critical_path_over_balanced']:.2f}" if lg.get("critical_path_over_balanced") else "-",
            f"{lg['critical_path_tuples'] / bigjoin_path:.2f}" if bigjoin_path else "-",
        )
    return table


def delta_rows(records: list[RunRecord]) -> list[dict]:
    """Per (dataset, query, semantics, batch size): the batches of dynamic runs, summarised."""
    groups: dict[tuple, list[dict]] = {}
    for r in records:
        for b in r.batches or []:
            key = (str(r.dataset_name), str(r.query_name), r.semantics, b["updates"])
            groups.setdefault(key, []).append(b)
    rows = []
    for (dataset, query, semantics, size), bs in sorted(groups.items()):
        secs = sorted(b["seconds"] for b in bs)
        ratios = sorted(b["recompute_over_update"] for b in bs if b.get("recompute_over_update"))
        applied = [b["applied"] for b in bs if b.get("applied")]  # the versioned index's own report
        compactions = [a.get("compaction_s", 0.0) for a in applied if a.get("compacted")]
        timed = [a["update_s"] for a in applied if "update_s" in a]  # runs recorded before 26 Nov lack it
        recomputed = [b["recompute_s"] for b in bs if b.get("recompute_s") is not None]
        rows.append(
            {
                "dataset": dataset,
                "query": query,
                "semantics": semantics,
                "batch": size,
                "batches": len(bs),
                "median_s": statistics.median(secs),
                "updates_per_s": size * len(bs) / sum(secs),
                "changes_per_s": sum(b["output_changes"] for b in bs) / sum(secs),
                "output_changes": sum(b["output_changes"] for b in bs) / len(bs),
                "recompute_s": statistics.median(recomputed) if recomputed else None,
                "recompute_ratio": statistics.median(ratios) if ratios else None,
                "update_s": statistics.median(timed) if timed else None,
                "compactions": len(compactions),
                "compaction_s": max(compactions, default=None),
                "agree": sum(1 for b in bs if b["agrees"]),
                "checked": sum(1 for b in bs if b["agrees"] is not None),
            }
        )
    return rows


def fmt_si(v: float | None) -> str:
    """A rate or count in three figures and an SI prefix (999, 12.3 K, 4.45 M): narrow columns."""
    if v is None:
        return "-"
    for prefix, scale in (("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(v) >= scale:
            return f"{v / scale:.3g} {prefix}"
    return f"{v:.3g}"


def delta_table(records: list[RunRecord], title: str) -> Group | None:
    """Delta throughput by batch size (the paper's Figure 6), beside the recompute it saves; the index
    update's median time per batch (slowest worker) and the compactions among those batches. One table
    per case (its query, dataset and semantics in the title), two-line headers and rates in SI
    prefixes: it fits 100 columns."""
    rows = delta_rows(records)
    if not rows:
        return None
    cases: dict[tuple, list[dict]] = {}
    for x in rows:
        cases.setdefault((x["query"], x["dataset"], x["semantics"]), []).append(x)
    return Group(*(_delta_case_table(f"{title}: {q} on {d} ({sem})", xs) for (q, d, sem), xs in cases.items()))


def _delta_case_table(title: str, rows: list[dict]) -> Table:
    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for col in (
        "batch",
        "median\ns",
        "updates\n/s",
        "output\nchanges/s",
        "changes\n/ batch",
        "index\nupdate s",
        "compactions\n(slowest s)",
        "recompute\ns (/ update)",
        "recounts\nagree",
    ):
        table.add_column(col, justify="right")
    for x in rows:
        table.add_row(
            fmt_int(x["batch"]),
            f"{x['median_s']:.2f}",
            fmt_si(x["updates_per_s"]),
            fmt_si(x["changes_per_s"]),
            fmt_si(x["output_changes"]),
            f"{x['update_s']:.3f}" if x["update_s"] is not None else "-",
            f"{x['compactions']} ({x['compaction_s']:.2f})" if x["compactions"] else "0",
            f"{x['recompute_s']:.1f} ({x['recompute_ratio']:.1f}x)" if x["recompute_ratio"] else "-",
            f"{x['agree']} / {x['batches']}",
        )
    return table


def memory_grid(records: list[RunRecord]) -> tuple[list[str], dict[tuple[str, str, int], dict[str, str]]]:
    """(caps, largest first; {(case, implementation, W): {cap: cell}}) of the capped runs: each cell the
    status and the busiest worker's resident peak (`metrics.memory_cap`)."""
    capped = [r for r in records if r.params.get("memory_per_worker")]
    sizes = {r.params["memory_per_worker"]: r.memory_cap.get("cap_bytes", 0) for r in capped}
    caps = sorted(sizes, key=lambda c: -sizes[c])
    grid: dict[tuple[str, str, int], dict[str, str]] = {}
    for r in capped:
        case = r.case_name
        measured = r.memory_cap
        peaks = measured.get("resident_peak_per_worker_bytes") or measured.get("peak_per_worker_bytes") or []
        peak = f" {fmt_bytes(max(peaks))}" if peaks and r.status in ("OK", "UNVERIFIED", "VAL") else ""
        grid.setdefault((case, r.implementation, r.params.get("workers", 2)), {})[r.params["memory_per_worker"]] = (
            f"{r.status}{peak}"
        )
    return caps, grid


def memory_grid_table(records: list[RunRecord], title: str) -> Table | None:
    """Who finishes under which memory cap per worker: OK (with the peak per worker), MEM or TIM."""
    caps, grid = memory_grid(records)
    if not grid:
        return None
    table = Table(title=title, box=box.SIMPLE)
    for col in ("case", "implementation", "W", *caps):
        table.add_column(col, justify="right" if col == "W" else "left")
    for (case, impl, workers), cells in sorted(grid.items()):
        table.add_row(case, impl, str(workers), *(cells.get(c, "-") for c in caps))
    return table


def capacity_rows(records: list[RunRecord]) -> list[dict]:
    """Each capped run's resources beside what the workload expects of it (MEM where `expected_mem`
    names it under this cap, else OK): the busiest worker's resident peak and the model's prediction,
    its share of the index (or cell, or the whole graph), bytes shuffled and spilled, and the largest
    intermediate result over the output (rows)."""
    from harness.bench.memory_model import index_share_bytes, largest_intermediate_rows

    rows = []
    for r in records:
        if not r.params.get("memory_per_worker"):
            continue
        model = r.memory_cap.get("model") or {}
        peaks = r.memory_cap.get("resident_peak_per_worker_bytes") or []
        largest = largest_intermediate_rows(r)
        expected = ("MEM or TIM" if r.timeout_expected else "MEM") if r.mem_expected else "OK"
        rows.append(
            {
                "case": r.case_name,
                "implementation": r.implementation,
                "workers": r.params.get("workers", 2),
                "cap": r.params["memory_per_worker"],
                "status": r.status,
                "expected": expected,
                "as_expected": r.finished if expected == "OK" else r.status in expected.split(" or "),
                "peak_bytes": max(peaks) if peaks else None,
                "predicted_bytes": model.get("predicted_bytes"),
                "index_share_bytes": index_share_bytes(r),
                "shuffle_bytes": r.metrics.get("shuffle_bytes"),
                "spill_bytes": r.metrics.get("spill_bytes"),
                "largest_over_output": round(largest / r.count, 2) if largest is not None and r.count else None,
            }
        )
    return rows


def capacity_table(records: list[RunRecord], title: str) -> Table | None:
    """capacity_rows as a table: a run that did not end as the workload expects is marked `!`."""
    rows = capacity_rows(records)
    if not rows:
        return None
    table = Table(title=title, box=box.SIMPLE)
    for col in (
        "case",
        "impl",
        "W",
        "cap",
        "status",
        "expected",
        "peak",
        "model",
        "index/worker",
        "shuffled",
        "spilled",
        "largest÷out",
    ):
        table.add_column(col, justify="left" if col in ("case", "impl", "status", "expected") else "right")
    for x in sorted(rows, key=lambda x: (x["case"], x["workers"], x["implementation"])):
        table.add_row(
            x["case"],
            x["implementation"],
            str(x["workers"]),
            x["cap"],
            x["status"] + ("" if x["as_expected"] else " !"),
            x["expected"],
            *(fmt_bytes(x[k]) if x[k] is not None else "-" for k in ("peak_bytes", "predicted_bytes", "index_share_bytes")),
            *(fmt_bytes(x[k]) if x[k] is not None else "-" for k in ("shuffle_bytes", "spill_bytes")),
            "-" if x["largest_over_output"] is None else f"{x['largest_over_output']:g}",
        )
    return table


def unexpected_capacity_lines(records: list[RunRecord]) -> list[str]:
    """One line per capped run that did not end as the workload expects."""
    return [
        f"not as expected: {x['implementation']} ended {x['status']} on {x['case']} at W={x['workers']} under "
        f"{x['cap']} per worker, where the workload expects {x['expected']}"
        for x in capacity_rows(records)
        if not x["as_expected"]
    ]


def memory_model_table(records: list[RunRecord], title: str) -> Table | None:
    """Each finished capped run's busiest worker: measured peak, its idle before the run, what its executor
    JVM grew (part of the peak the model does not count: Spark's shuffle and cache heap), the model and
    the ratios."""
    rows = [r for r in records if (r.memory_cap.get("model") or {}).get("predicted_bytes")]
    if not rows:
        return None
    table = Table(title=title, box=box.SIMPLE)
    for col in ("case", "impl", "W", "cap", "peak", "idle", "JVM grew", "model", "÷model", "added÷model"):
        table.add_column(col, justify="left" if col in ("case", "impl") else "right")
    for r in sorted(rows, key=lambda r: (r.query_name, r.implementation, r.params.get("workers", 2))):
        model = r.memory_cap["model"]
        added = model.get("above_idle_over_model")
        peaks, grown = (
            r.memory_cap.get("resident_peak_per_worker_bytes") or [],
            r.memory_cap.get("executor_jvm_growth_per_worker_bytes"),
        )
        busiest = peaks.index(max(peaks)) if peaks else None
        table.add_row(
            r.case_name,
            r.implementation,
            str(r.params.get("workers", 2)),
            r.params["memory_per_worker"],
            fmt_bytes(model["measured_bytes"]),
            "-" if model.get("above_idle_bytes") is None else fmt_bytes(model["measured_bytes"] - model["above_idle_bytes"]),
            "-" if not grown or busiest is None or busiest >= len(grown) else fmt_bytes(grown[busiest]),
            fmt_bytes(model["predicted_bytes"]),
            f"{model['measured_over_model']:.1f}",
            "-" if added is None else f"{added:.2f}",
        )
    return table


def scaling_tables(records: list[RunRecord]) -> list[Table]:
    """Per query and graph run at several W: each implementation's loads per W (the busiest worker's;
    harness/bench/scaling.py), the numbers behind the scaling plots, then each quantity's fitted slope
    against W beside the model's."""
    from harness.bench import scaling

    tables = []
    for case in scaling.cases(records):
        table = Table(title=f"loads against W: {case.name} (busiest worker)", box=box.SIMPLE_HEAD, pad_edge=False)
        rows = [(impl, m) for impl, runs in case.runs.items() for m, _ in runs]
        capped = any(m.above_idle for _, m in rows)
        columns = ("impl", "W", "index", "in flight", "received", "worst round", "shipped", "rounds", "crit. path")
        for col in columns + (("above idle",) if capped else ()):
            table.add_column(col, justify="left" if col == "impl" else "right")
        for impl, m in sorted(rows, key=lambda row: (row[0], row[1].workers)):
            table.add_row(
                impl,
                str(m.workers),
                fmt_bytes(m.index_bytes.max) if m.index_bytes else "-",
                fmt_int(m.in_flight.max) if m.in_flight else "-",
                fmt_int(m.received_total.max) if m.received_total else "-",
                fmt_int(m.received_worst_round.max),
                fmt_int(m.communication),
                str(m.rounds),
                fmt_int(m.critical_path),
                *((fmt_bytes(m.above_idle.max) if m.above_idle else "-",) if capped else ()),
            )
        tables.append(table)
        tables.append(slopes_table(case))
    return tables


def slopes_table(case) -> Table:
    """A scaling case's fitted log-log slopes against W, each beside the model's (fitted / model)."""
    from harness.bench import scaling

    table = Table(title=f"slopes against W: {case.name} (fitted / model)", box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("quantity")
    impls = sorted(case.runs)
    for impl in impls:
        table.add_column(impl, justify="right")
    for quantity in scaling.QUANTITIES:
        by_impl = {s.implementation: s for s in scaling.slopes(case, quantity)}
        cells = [_slope_cell(by_impl.get(impl)) for impl in impls]
        if any(cell != "-" for cell in cells):
            table.add_row(quantity.title, *cells)
    return table


def _slope_cell(slope) -> str:
    if slope is None or slope.fitted is None:
        return "-"
    return f"{slope.fitted:+.2f} / " + ("?" if slope.model is None else f"{slope.model:+.2f}")
