"""Plots of run records, written as PNG beside the runs (matplotlib, no display needed)."""

from __future__ import annotations

from pathlib import Path

from harness.bench.record import RunRecord


def shares_w_sweep(records: list[RunRecord], path: Path) -> Path | None:
    """Shares over W: total tuples shipped and per-cell load, measured, against Appendix F's
    IN * W^(1 - 1/tau*) and IN / W^(1/tau*). Written only when some query ran at two or more W."""
    runs: dict[str, list[RunRecord]] = {}
    for r in records:
        if r.status == "OK" and r.logical.get("tuples_shipped_predicted") is not None:
            runs.setdefault(r.case_name, []).append(r)
    runs = {k: sorted(v, key=lambda r: r.params["workers"]) for k, v in runs.items() if len({r.params["workers"] for r in v}) > 1}
    if not runs:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (shipped_ax, load_ax) = plt.subplots(1, 2, figsize=(12, 4.6))
    for i, (label, rs) in enumerate(sorted(runs.items())):
        colour = f"C{i}"
        w = [r.params["workers"] for r in rs]
        lg = [r.logical for r in rs]
        size, tau = lg[0]["input_tuples"], lg[0]["tau_star"]
        shipped_ax.plot(w, [r.metrics["tuples_shipped"] for r in rs], "o-", color=colour, label=f"{label}: shipped")
        shipped_ax.plot(
            w, [size * x ** (1 - 1 / tau) for x in w], "--", color=colour, alpha=0.6, label=f"IN·W^(1-1/τ*), τ*={tau:g}"
        )
        load_ax.plot(w, [x["max_cell_load"] for x in lg], "o-", color=colour, label=f"{label}: busiest cell")
        load_ax.plot(w, [x["mean_cell_load"] for x in lg], "s:", color=colour, alpha=0.8, label="mean cell")
        load_ax.plot(w, [size / x ** (1 / tau) for x in w], "--", color=colour, alpha=0.6, label="IN/W^(1/τ*)")
    for ax, title in ((shipped_ax, "total tuples shipped (cluster memory)"), (load_ax, "tuples received per cell")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("W (logical workers)")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("Shares/HyperCube: replication grows with W, per-cell load falls sub-linearly")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def critical_path(record: RunRecord) -> int:
    """The cost model's time: summed over rounds, the tuples received by the busiest worker."""
    return sum(max(r) for r in record.logical.get("worker_load_per_round", []) if r)


def skew_crossover(records: list[RunRecord], path: Path) -> Path | None:
    """BiGJoin-S against BiGJoin as skew and W grow: measured time ratio, the cost model's
    critical-path ratio, and the worst busy round of each. Written only when some graph and query
    ran with both at two or more W."""
    pairs: dict[tuple, dict] = {}
    for r in records:
        if r.status == "OK" and r.implementation in ("bigjoin", "bigjoin-s"):
            key = (r.dataset_name, r.query_name, r.params["workers"])
            pairs.setdefault(key, {})[r.implementation] = r
    series: dict[tuple, list] = {}
    for (graph, query, w), both in sorted(pairs.items(), key=lambda kv: kv[0][2]):
        if len(both) == 2:
            series.setdefault((graph, query), []).append((w, both["bigjoin"], both["bigjoin-s"]))
    series = {k: v for k, v in series.items() if len(v) > 1}
    if not series:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8))
    for i, ((graph, query), runs) in enumerate(sorted(series.items())):
        colour = f"C{i}"
        deg = runs[0][1].dataset.get("degrees") or {}
        short = ",".join(part for part in str(graph).split(",") if not part.startswith(("seed=", "scramble=")))
        label = f"{query} on {short} (max/median degree {deg.get('max_degree', 0) / max(deg.get('median_degree') or 1, 1):.0f})"
        w = [x[0] for x in runs]
        axes[0].plot(w, [s.metrics["query_s"] / b.metrics["query_s"] for _, b, s in runs], "o-", color=colour, label=label)
        axes[1].plot(w, [critical_path(s) / max(critical_path(b), 1) for _, b, s in runs], "o-", color=colour, label=label)
        axes[2].plot(w, [b.logical.get("max_round_load_skew") or 1 for _, b, _ in runs], "o-", color=colour)
        axes[2].plot(w, [s.logical.get("max_round_load_skew") or 1 for _, _, s in runs], "s:", color=colour)
    titles = (
        "measured query time, bigjoin-s / bigjoin (2 cores)",
        "critical path Σ max worker load, bigjoin-s / bigjoin",
        "worst busy round max/mean: bigjoin (solid), bigjoin-s (dotted)",
    )
    for ax, title in zip(axes, titles):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("W (logical workers)")
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
    for ax in axes[:2]:
        ax.axhline(1.0, color="black", lw=1)
        ax.text(ax.get_xlim()[0], 1.0, " below: bigjoin-s wins", va="top", fontsize=7)
    axes[2].axhline(1.25, color="grey", lw=1, ls="--")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=8)
    fig.suptitle("Where BiGJoin-S's balance pays: as skew and W grow")
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def delta_throughput(records: list[RunRecord], path: Path) -> Path | None:
    """The paper's Figure 6 for Delta-BiGJoin: input updates/s and output changes/s against batch
    size, and how many times faster than a BiGJoin recompute each batch was maintained."""
    from harness.bench.tables import delta_rows

    rows = delta_rows(records)
    if len({x["batch"] for x in rows}) < 2:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series: dict[str, list[dict]] = {}
    for x in rows:
        series.setdefault(f"{x['query']} on {x['dataset']} ({x['semantics'][:3]})", []).append(x)
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6))
    for i, (label, xs) in enumerate(sorted(series.items())):
        size = [x["batch"] for x in xs]
        axes[0].plot(size, [x["updates_per_s"] for x in xs], "o-", color=f"C{i}", label=label)
        axes[1].plot(size, [x["changes_per_s"] for x in xs], "o-", color=f"C{i}", label=label)
        ratio = [(x["batch"], x["recompute_ratio"]) for x in xs if x["recompute_ratio"]]
        if ratio:
            axes[2].plot(*zip(*ratio), "o-", color=f"C{i}", label=label)
    axes[2].axhline(20, color="grey", linestyle="--", linewidth=1, label="20x target")
    titles = ("input updates per second", "output changes per second", "BiGJoin recompute time / update time")
    for ax, title in zip(axes, titles):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("batch size (updates)")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
    handles, labels = axes[2].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(4, len(labels)), fontsize=8)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def memory_wall(records: list[RunRecord], path: Path) -> Path | None:
    """Who finishes under a memory cap per worker: per W, each implementation's busiest worker's
    resident peak against the cap (a cross at the cap where it ended MEM, a triangle TIM), the model's
    prediction dotted, and the cap itself as the diagonal no run may cross. Written when capped runs
    exist."""
    runs = [r for r in records if r.memory_cap.get("cap_bytes")]
    if not runs:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    widths = sorted({r.params.get("workers", 2) for r in runs})
    impls = sorted({r.implementation for r in runs})
    fig, axes = plt.subplots(1, len(widths), figsize=(5.2 * len(widths), 4.6), squeeze=False, sharey=True)
    mib = 1 << 20
    for ax, w in zip(axes[0], widths):
        caps = sorted({r.memory_cap["cap_bytes"] for r in runs})
        ax.plot([c / mib for c in caps], [c / mib for c in caps], color="black", lw=1, label="the cap")
        for i, impl in enumerate(impls):
            mine = sorted(
                (r for r in runs if r.implementation == impl and r.params.get("workers", 2) == w),
                key=lambda r: r.memory_cap["cap_bytes"],
            )
            ok = [r for r in mine if r.finished]
            cap_of = [r.memory_cap["cap_bytes"] / mib for r in ok]
            ax.plot(
                cap_of,
                [(r.memory_cap["model"] or {}).get("measured_bytes", 0) / mib for r in ok],
                "o-",
                color=f"C{i}",
                label=impl,
            )
            model = [((r.memory_cap["model"] or {}).get("predicted_bytes") or 0) / mib for r in ok]
            ax.plot(cap_of, model, ":", color=f"C{i}", alpha=0.7)
            for status, marker in (("MEM", "x"), ("TIM", "^")):
                ended = [r.memory_cap["cap_bytes"] / mib for r in mine if r.status == status]
                ax.plot(ended, ended, marker, color=f"C{i}", ms=11, mew=2, ls="none")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        ax.set_xlabel("memory cap per worker (MiB)")
        ax.set_title(f"W = {w}", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("busiest worker's resident peak (MiB)")
    axes[0][0].legend(fontsize=7, title="solid: measured, dotted: model\nx: MEM at the cap", title_fontsize=7)
    case = runs[0].case_name
    fig.suptitle(f"The memory wall: {case}, every implementation under the same cap per worker")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def scaling(records: list[RunRecord], path: Path) -> list[Path]:
    """Per query and graph, one panel per quantity against W (log-log): each implementation measured
    (solid, with its fitted slope) beside the model's slope from its smallest W (dashed). Written where some implementation
    ran at three or more W; returns the figures written (path with the case in its name)."""
    from harness.bench import scaling as scaling_loads

    cases = scaling_loads.cases(records)
    if not cases:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for case in cases:
        capped = any(m.above_idle for runs in case.runs.values() for m, _ in runs)
        fig, axes = plt.subplots(2, 4, figsize=(19, 8.5))
        for ax, quantity in zip(axes.flat, scaling_loads.QUANTITIES):  # eight panels, the last empty if uncapped
            for line in scaling_loads.slopes(case, quantity):
                w, y = zip(*line.points)
                color = f"C{sorted(case.runs).index(line.implementation)}"
                fitted = "" if line.fitted is None else f": slope {line.fitted:+.2f}"
                ax.plot(w, y, "o-", color=color, label=f"{line.implementation}{fitted}")
                if line.model is not None:
                    model = [y[0] * (x / w[0]) ** line.model for x in w]
                    ax.plot(w, model, "--", color=color, alpha=0.5, label=f"model: slope {line.model:+.2f}")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("W (capped workers)" if capped else "W (logical workers)")
            ax.set_title(quantity.title, fontsize=9)
            ax.grid(True, which="both", alpha=0.3)
            if ax.has_data():
                ax.legend(fontsize=6)
        if not axes.flat[-1].has_data():
            axes.flat[-1].axis("off")
        kind = "Weak scaling (the graph grows with W)" if case.grown else "Scaling with W"
        fig.suptitle(f"{kind}, measured (solid) and modelled (dashed): {case.name}")
        fig.tight_layout()
        out = path.with_name(f"{path.stem}-{_file_part(case.name)}{path.suffix}")
        out.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(out, dpi=100)
        plt.close(fig)
        written.append(out)
    return written


def _file_part(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-." else "-" for c in text).strip("-")[:60]
