"""`python -m harness report`: the runs recorded under results/runs as one Markdown page with PNG plots
(and the same page as self-contained HTML, index.html, plots embedded):
time and communication per implementation for each workload, the per-worker load, the batch-size
sweep, the W sweep and delta throughput. For every workload and run (implementation, query, dataset,
semantics, W, parameters), the newest run directory that has it wins."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from harness.bench import html_page, plots
from harness.bench.contest import SHARED_MARK
from harness.bench.record import RunRecord
from harness.bench.tables import delta_rows

PLOT_DPI = 110


def load_runs(runs_dir: Path) -> dict[str, list[RunRecord]]:
    """workload -> the newest records of each of its runs (every trial of that directory), each with
    the directory it was read from."""
    newest: dict[tuple[str, str], tuple[str, list[RunRecord]]] = {}
    for directory in sorted(p for p in Path(runs_dir).iterdir() if p.is_dir()):
        for path in sorted(directory.glob("*.json")):
            if path.name == "gate.json":
                continue
            try:
                data = json.loads(path.read_text())
            except json.JSONDecodeError:
                continue
            if not isinstance(data, dict) or "implementation" not in data or not data.get("workload"):
                continue
            record = RunRecord.from_json(data, read_from=directory.name)
            key = (str(record.workload), record.run_key)
            held = newest.get(key)
            if held is None or held[0] < directory.name:
                newest[key] = (directory.name, [record])
            elif held[0] == directory.name:
                held[1].append(record)
    out: dict[str, list[RunRecord]] = {}
    for (workload, _), (_, records) in sorted(newest.items()):
        out.setdefault(workload, []).extend(records)
    return out


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _short(text: str, width: int = 32) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _label(r: RunRecord) -> str:
    params = ",".join(f"{k}={v}" for k, v in sorted(r.params.items()) if k not in ("workers", "updates"))
    return f"{r.query_name} / {_short(str(r.dataset_name))} / W={r.workers}" + (f" / {params}" if params else "")


def time_and_communication(workload: str, records: list[RunRecord], path: Path) -> Path | None:
    """Grouped bars: median query time and communication of each implementation, per query and dataset."""
    ok = [r for r in records if r.status == "OK" and not r.batches]
    groups = sorted({_label(r) for r in ok})
    impls = sorted({r.implementation for r in ok})
    if not groups or not impls:
        return None
    plt = _plt()
    fig, axes = plt.subplots(2, 1, figsize=(min(24, max(10, 0.9 * len(groups) + 3)), 8.5), sharex=True)
    width = 0.8 / len(impls)
    for i, impl in enumerate(impls):
        times, comms = [], []
        for g in groups:
            rs = [r for r in ok if r.implementation == impl and _label(r) == g]
            times.append(statistics.median([r.metrics.get("query_s") or 0 for r in rs]) if rs else 0)
            c = rs[0].communication if rs else None
            comms.append(c.tuples if c else 0)
        xs = [j + (i - (len(impls) - 1) / 2) * width for j in range(len(groups))]
        axes[0].bar(xs, times, width, label=impl, color=f"C{i}")
        shown = [(x, c) for x, c in zip(xs, comms) if c > 0]  # nothing moved (local-gj): no bar on a log axis
        if shown:
            axes[1].bar(*zip(*shown), width, label=impl, color=f"C{i}")
    axes[0].set_title("query seconds (median of trials)")
    axes[1].set_title("tuples moved between workers (log; no bar: none moved or not run)")
    axes[1].set_yscale("log")
    axes[1].set_xticks(range(len(groups)))
    axes[1].set_xticklabels(groups, rotation=25, ha="right", fontsize=8)
    for ax in axes:
        ax.grid(True, axis="y", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"{workload}: time and communication per implementation")
    fig.tight_layout()
    fig.savefig(path, dpi=PLOT_DPI)
    plt.close(fig)
    return path


def worker_load(workload: str, records: list[RunRecord], path: Path) -> Path | None:
    """Per run of a workload, the distribution over query rounds of the busiest worker's load against
    the mean (Spark's shuffle records per task), as horizontal box plots: 1.0 is a perfect balance."""
    series: dict[str, list[float]] = {}
    for r in records:
        if r.status != "OK":
            continue
        skews = [
            x["skew"]
            for x in r.metrics.get("per_round", [])
            if x.get("phase") == "query" and x.get("skew") and x.get("records", 0) > 0
        ]
        if skews:
            series.setdefault(f"{r.implementation}: {_label(r)}", []).extend(skews)
    if not series:
        return None
    items = sorted(series.items())
    plt = _plt()
    fig, ax = plt.subplots(figsize=(11, max(3, 0.28 * len(items) + 1.5)))
    ax.boxplot([v for _, v in items], orientation="horizontal", whis=(0, 100))
    ax.set_yticks(range(1, len(items) + 1))
    ax.set_yticklabels([label for label, _ in items], fontsize=7)
    ax.axvline(1.0, color="grey", linestyle="--", linewidth=1)
    ax.set_xlabel("busiest worker / mean, per shuffle round of the query (whiskers: min and max)")
    ax.set_title(f"{workload}: per-worker load")
    ax.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=PLOT_DPI)
    plt.close(fig)
    return path


def sweep(records: list[RunRecord], param: str, path: Path, title: str) -> Path | None:
    """Query time and peak prefixes in flight against a swept parameter ('batch' or 'workers'), one
    line per implementation, query and dataset; None unless something ran at two or more values."""
    lines: dict[str, dict] = {}
    for r in records:
        value = r.params.get(param)
        if r.status != "OK" or value is None or r.batches:
            continue
        key = f"{r.implementation}: {r.query_name} on {r.dataset_name}"
        lines.setdefault(key, {}).setdefault(value, []).append(r)
    lines = {k: v for k, v in lines.items() if len(v) > 1}
    if not lines:
        return None
    plt = _plt()
    fig, axes = plt.subplots(1, 3, figsize=(16, 5 + 0.16 * len(lines)))
    for i, (label, by_value) in enumerate(sorted(lines.items())):
        style = {"color": f"C{i % 10}", "linestyle": ("-", "--", ":")[i // 10 % 3], "marker": "o", "label": label}
        xs = sorted(by_value)
        axes[0].plot(xs, [statistics.median([r.metrics.get("query_s") or 0 for r in by_value[x]]) for x in xs], **style)
        for ax, value in (
            (axes[1], lambda r: r.communication and r.communication.tuples),
            (axes[2], lambda r: r.logical.get("peak_prefixes_in_flight")),
        ):
            points = [(x, value(by_value[x][0])) for x in xs]
            points = [(x, y) for x, y in points if y]
            if points:
                ax.plot(*zip(*points), **style)
    for ax, name in zip(axes, ("query seconds", "tuples moved between workers", "peak prefixes in flight")):
        ax.set_xscale("log", base=2 if param == "workers" else 10)
        ax.set_xlabel(param)
        ax.set_title(name)
        ax.grid(True, which="both", alpha=0.3)
    axes[1].set_yscale("log")
    axes[2].set_yscale("log")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=2, fontsize=7)
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.04 + 0.035 * ((len(lines) + 1) // 2), 1, 1))
    fig.savefig(path, dpi=PLOT_DPI)
    plt.close(fig)
    return path


def _md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return out + ["| " + " | ".join(row) + " |" for row in rows]


def newest_run(records: list[RunRecord]) -> list[RunRecord]:
    """The records of the newest directory among `records` (`load_runs`'): one run's picture, where a
    cell's latest record from each of several runs would mix runs made under different settings."""
    newest = max((str(r.read_from) for r in records), default=None)
    return [r for r in records if r.read_from == newest]


def build(runs_dir: Path, out_dir: Path) -> Path:
    """Write out_dir/index.md and its PNGs; returns the page."""
    runs = load_runs(runs_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in out_dir.glob("*.png"):
        stale.unlink()
    everything = [r for rs in runs.values() for r in rs]
    lines = [
        "# Benchmark report",
        "",
        f"Generated by `python -m harness report` from `{runs_dir}`: for each workload and run, the newest recorded directory.",
        "",
    ]
    lines += _overview(runs)
    lines += _per_workload(runs, out_dir)
    lines += _plots(runs, everything, out_dir)
    lines += _projection(runs)
    lines += _peers(runs_dir)
    page = out_dir / "index.md"
    page.write_text("\n".join(lines) + "\n")
    html_page.write(page)  # the same page, self-contained, for a browser
    return page


def _overview(runs: dict[str, list[RunRecord]]) -> list[str]:
    """One row per workload: its runs, how many are OK and verified, the commits and directories."""
    if not runs:
        return ["No recorded runs."]
    overview = []
    for workload, records in runs.items():
        dirs = sorted({str(r.read_from) for r in records})
        commits = sorted({str(r.git.get("commit"))[:7] for r in records})
        overview.append(
            [
                workload,
                str(len(records)),
                str(sum(r.status == "OK" for r in records)),
                str(sum(r.verified for r in records)),
                ", ".join(commits),
                "<br>".join(dirs),
            ]
        )
    return ["## Workloads", ""] + _md_table(["workload", "runs", "OK", "verified", "commits", "directories"], overview) + [""]


def _per_workload(runs: dict[str, list[RunRecord]], out_dir: Path) -> list[str]:
    """Each workload's time-and-communication and worker-load plots, and a row per run."""
    lines = ["## Time and communication per implementation", ""]
    for workload, records in runs.items():
        png = time_and_communication(workload, records, out_dir / f"time-communication-{workload}.png")
        rows = []
        for r in sorted(records, key=lambda r: (_label(r), r.implementation, r.trial)):
            c = r.communication
            rows.append(
                [
                    r.implementation,
                    _label(r),
                    str(r.status),
                    "yes" if r.verified else "no",
                    _index_cell(r),
                    f"{r.metrics.get('query_s') or 0:.2f}",
                    f"{c.tuples:,} {c.unit}" if c else "-",
                    f"{r.count:,}" if r.count is not None else "-",
                ]
            )
        load = worker_load(workload, records, out_dir / f"worker-load-{workload}.png")
        lines += [f"### {workload}", ""]
        lines += [f"![{workload}]({p.name})" for p in (png, load) if p] + [""]
        lines += _md_table(
            ["impl", "query / dataset / W", "status", "verified", "index s", "query s", "communication", "count"], rows
        ) + [""]
        lines += _shared_note(records)
    return lines


def _index_cell(r: RunRecord) -> str:
    """The run's index seconds with the builds it reused from earlier runs charged, marked as the
    contest marks them (`contest.SHARED_MARK`), so every row's index s is its own implementation's."""
    charged, own = r.index_charged_s, r.index_s or 0
    return f"{own + charged:.2f}{SHARED_MARK}" if charged else f"{own:.2f}"


def _shared_note(records: list[RunRecord]) -> list[str]:
    """The line under a table that names, for each marked index time, the runs whose builds it charges."""
    said = sorted({f"{r.implementation}'s from {', '.join(r.index_builders)}" for r in records if r.index_builders})
    if not said:
        return []
    return [
        f"An index s marked {SHARED_MARK} includes a reused index's build, charged at its builder's seconds: {'; '.join(said)}.",
        "",
    ]


def _plots(runs: dict[str, list[RunRecord]], everything: list[RunRecord], out_dir: Path) -> list[str]:
    """The sweeps, Shares over W, Delta's throughput (with its table), the memory wall and scaling with W."""
    sections = [
        (
            "Batch-size sweep (B')",
            sweep(
                everything,
                "batch",
                out_dir / "batch-sweep.png",
                "BiGJoin's batch size B': time, communication and prefixes in flight",
            ),
        ),
        (
            "W sweep",
            sweep(everything, "workers", out_dir / "w-sweep.png", "Time, communication and prefixes in flight against W"),
        ),
        ("Shares over W (Appendix F)", plots.shares_w_sweep(everything, out_dir / "shares-w-sweep.png")),
        ("Delta throughput (Figure 6)", plots.delta_throughput(everything, out_dir / "delta-throughput.png")),
        ("The memory wall (workload memory)", plots.memory_wall(newest_run(runs.get("memory", [])), out_dir / "memory-wall.png")),
        (
            "Capacity: capped workers on a large graph (workload capacity)",
            plots.memory_wall(newest_run(runs.get("capacity", [])), out_dir / "capacity-wall.png"),
        ),
    ]
    lines = []
    for title, png in sections:
        lines += [f"## {title}", ""]
        lines += [f"![{title}]({png.name})", ""] if png else ["No recorded runs for this plot.", ""]
        if title.startswith("Delta") and png:
            lines += _delta_table(everything)
    for title, workload in (
        ("Scaling with W (workload scaling)", "scaling"),
        ("Weak scaling (workload weak-scaling)", "weak-scaling"),
    ):
        lines += [f"## {title}", ""]
        figures = plots.scaling(runs.get(workload, []), out_dir / f"{workload}.png")
        lines += [line for png in figures for line in (f"![{png.stem}]({png.name})", "")] or [
            "No recorded runs for this plot.",
            "",
        ]
    return lines


PROJECTED_FROM = ("weak-scaling", "capacity")  # the workloads whose runs the projection is fitted to


def _projection(runs: dict[str, list[RunRecord]]) -> list[str]:
    """Past this machine: weak-scaling's projection, fitted to the weak-scaling and capacity runs."""
    from harness.bench import projection, workload

    spec = workload.load(PROJECTED_FROM[0]).projection
    found = projection.points([r for name in PROJECTED_FROM for r in runs.get(name, [])])
    fits = projection.fit(found)
    lines = ["## Past this machine, on paper (weak-scaling's projection)", ""]
    if spec is None or not fits:
        return lines + ["No recorded runs to fit it to.", ""]
    lines += [f"Fitted to the runs of {', '.join(PROJECTED_FROM)}, by harness/bench/projection.py:", ""]
    lines += [f"- {line}" for line in projection.fit_lines(fits)] + [""]
    lines += _md_table(projection.PROJECTION_HEADER, projection.projection_rows(fits, spec)) + [""]
    lines += _md_table(projection.CHECK_HEADER, projection.check_rows(found, fits)) + [""]
    return lines


def _delta_table(everything: list[RunRecord]) -> list[str]:
    rows = [
        [
            x["query"],
            x["dataset"],
            f"{x['batch']:,}",
            f"{x['median_s']:.2f}",
            f"{x['updates_per_s']:,.0f}",
            f"{x['changes_per_s']:,.0f}",
            f"{x['recompute_ratio']:.1f}x" if x["recompute_ratio"] else "-",
            f"{x['agree']} / {x['batches']}",
        ]
        for x in delta_rows(everything)
    ]
    header = ["query", "dataset", "batch", "median s", "updates/s", "output changes/s", "recompute / update", "recounts agree"]
    return _md_table(header, rows) + [""]


def _peers(runs_dir: Path) -> list[str]:
    """The newest `compare` of each query, dataset and semantics."""
    lines = ["## Peer systems (`python -m harness compare`)", ""]
    comparisons = load_comparisons(runs_dir)
    for directory, record, table in comparisons:
        lines += [
            f"### {record['query']['name']} on {record['dataset']['name']} ({record['semantics']})",
            "",
            f"`{directory}`, commit {str((record.get('git') or {}).get('commit'))[:7]}",
            "",
            *table,
            "",
        ]
    return lines if comparisons else lines + ["No recorded comparisons.", ""]


def load_comparisons(runs_dir: Path) -> list[tuple[str, dict, list[str]]]:
    """(directory, compare.json, compare.md without its title) of the newest comparison of each query,
    dataset and semantics."""
    newest: dict[tuple, tuple[str, dict, list[str]]] = {}
    for path in sorted(Path(runs_dir).glob("*/compare.json")):
        try:
            record = json.loads(path.read_text())
            table = (path.parent / "compare.md").read_text().splitlines()[1:]
        except (OSError, json.JSONDecodeError):
            continue
        newest[(record["query"]["name"], record["dataset"]["name"], record["semantics"])] = (path.parent.name, record, table)
    return list(newest.values())
