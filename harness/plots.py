"""Plots of run records, written as PNG beside the runs (matplotlib, no display needed)."""
from __future__ import annotations

from pathlib import Path


def shares_w_sweep(records: list[dict], path: Path) -> Path | None:
    """Shares over W: total tuples shipped and per-cell load, measured, against Appendix F's
    IN * W^(1 - 1/tau*) and IN / W^(1/tau*). Written only when some query ran at two or more W."""
    runs: dict[str, list[dict]] = {}
    for r in records:
        if r["status"] == "OK" and r.get("logical", {}).get("tuples_shipped_predicted") is not None:
            runs.setdefault(f"{r['query'].get('name')} on {r['dataset'].get('name')}", []).append(r)
    runs = {k: sorted(v, key=lambda r: r["params"]["workers"]) for k, v in runs.items()
            if len({r["params"]["workers"] for r in v}) > 1}
    if not runs:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (shipped_ax, load_ax) = plt.subplots(1, 2, figsize=(12, 4.6))
    for i, (label, rs) in enumerate(sorted(runs.items())):
        colour = f"C{i}"
        w = [r["params"]["workers"] for r in rs]
        lg = [r["logical"] for r in rs]
        size, tau = lg[0]["input_tuples"], lg[0]["tau_star"]
        shipped_ax.plot(w, [r["metrics"]["tuples_shipped"] for r in rs], "o-", color=colour, label=f"{label}: shipped")
        shipped_ax.plot(w, [size * x ** (1 - 1 / tau) for x in w], "--", color=colour, alpha=0.6,
                        label=f"IN·W^(1-1/τ*), τ*={tau:g}")
        load_ax.plot(w, [x["max_cell_load"] for x in lg], "o-", color=colour, label=f"{label}: busiest cell")
        load_ax.plot(w, [x["mean_cell_load"] for x in lg], "s:", color=colour, alpha=0.8, label="mean cell")
        load_ax.plot(w, [size / x ** (1 / tau) for x in w], "--", color=colour, alpha=0.6, label=f"IN/W^(1/τ*)")
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
