"""Past this machine, on paper (issue 60, part 4): the busiest worker's memory and the exchange volume
of BiGJoin, replicated and Shares on graphs and clusters too large to run here (a workload's
`projection` key: the paper's LiveJournal, Twitter and Common Crawl on 16 machines x 14 workers),
fitted from the runs measured here, and each prediction set beside every point it was fitted from.

Per implementation, with E the input's edges and W the workers:
- what a worker holds of the input, c x E x share(W): BiGJoin's index partition (share 1/W), replicated's
  whole index (1), Shares' cell (W^(-1/tau*), Appendix F); c is the median over the measured runs of
  the busiest worker's bytes / (E x share), so it carries the skew measured here;
- the cost model's bytes: that, plus BiGJoin's prefixes in flight at its B' (held as measured under a
  cap: B' is set by the memory budget, not by the graph);
- a worker's resident peak: its idle floor + what it holds once + a + r x what it copies, a and r the
  least-squares line over the capped runs (r alone, a = 0, from one): BiGJoin holds its index
  partition once and copies its prefixes in flight (into batches, exchange buffers, kernels'
  outputs), replicated its index (its busiest worker builds it from the whole edge list), Shares its
  cell; a is what a run adds whatever its size (its Python worker). No peak where nothing ran capped;
- tuples shipped: s x E for BiGJoin (s from the largest graph measured: its proposals per edge grow
  with skew, so a more skewed graph ships more), s x E x W^(1 - 1/tau*) for Shares; replicated ships
  its index once to every worker (W x the index's bytes) and nothing after."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import NamedTuple

from harness.bench import memory_model, scaling
from harness.bench.record import RunRecord
from harness.bench.tables import fmt_bytes
from harness.core.errors import DataError
from harness.core.params import parse_size

PROJECTED = ("bigjoin", "replicated", "shares")


class Target(NamedTuple):
    name: str
    edges: int


class ProjectionSpec(NamedTuple):
    workers: int
    workers_per_machine: int
    machine_bytes: int
    graphs: tuple[Target, ...]


def parse_spec(data, where: str) -> ProjectionSpec | None:
    """A workload's `projection` mapping; a DataError naming the key when it is not one."""
    if data is None:
        return None
    if not isinstance(data, dict) or set(data) != {"workers", "workers_per_machine", "machine_memory", "graphs"}:
        raise DataError(f"{where}: key 'projection' needs exactly workers, workers_per_machine, machine_memory and graphs")
    for key in ("workers", "workers_per_machine"):
        if not isinstance(data[key], int) or isinstance(data[key], bool) or data[key] < 1:
            raise DataError(f"{where}: key 'projection.{key}' must be a positive integer, got {data[key]!r}")
    graphs = data["graphs"]
    if not isinstance(graphs, dict) or not graphs:
        raise DataError(f"{where}: key 'projection.graphs' must map each graph's name to its edges")
    for name, edges in graphs.items():
        if not isinstance(edges, (int, float)) or isinstance(edges, bool) or edges < 1:
            raise DataError(f"{where}: key 'projection.graphs.{name}' must be a number of edges, got {edges!r}")
    machine = parse_size(str(data["machine_memory"]), f"{where}: projection.machine_memory")
    targets = tuple(Target(str(name), int(edges)) for name, edges in graphs.items())
    return ProjectionSpec(data["workers"], data["workers_per_machine"], machine, targets)


class Point(NamedTuple):
    """One finished run of a projected implementation, as the projection reads it."""

    implementation: str
    dataset: str  # with BiGJoin's budget where the run set one
    workers: int
    edges: int
    tau: float | None
    index_bytes: int  # the busiest worker's (memory_model.index_share_bytes)
    shipped: int  # tuples
    in_flight_bytes: int  # BiGJoin: its peak per worker; else 0
    above_idle: int | None  # resident peak above idle, busiest worker, under a cap
    idle: int | None
    capped: bool


def points(records: Sequence[RunRecord]) -> list[Point]:
    out = []
    for r in records:
        measured = scaling.loads(r)
        index = memory_model.index_share_bytes(r)
        if r.implementation not in PROJECTED or measured is None or not index or not r.dataset.get("edges"):
            continue
        idle = (r.metrics.get("memory_cap") or {}).get("resident_idle_per_worker_bytes")
        out.append(
            Point(
                r.implementation,
                str(r.dataset_name) + (f", budget {budget}" if (budget := r.params.get("memory_budget")) else ""),
                measured.workers,
                int(r.dataset["edges"]),
                r.logical.get("tau_star"),
                index,
                measured.communication,
                int(r.logical.get("peak_bytes_in_flight_per_worker") or 0),
                None if measured.above_idle is None else int(measured.above_idle.max),
                int(statistics.median(idle)) if idle else None,
                bool(r.params.get("memory_per_worker")),
            )
        )
    return out


def _share(impl: str, workers: int, tau: float | None) -> float:
    """What a worker holds of the input, as the scaling model's slope says it falls with W."""
    return float(workers ** scaling.per_worker_slope(impl, tau))


def _shipped_share(impl: str, workers: int, tau: float | None) -> float:
    if impl != "shares" and workers == 1:
        return 0.0  # BiGJoin on one worker exchanges nothing
    return float(workers ** scaling.communication_slope(impl, tau))


class Fit(NamedTuple):
    implementation: str
    tau: float | None
    index_per_edge: float  # c
    shipped_per_edge: float  # s (tuples)
    in_flight_bytes: int
    copies: float | None  # r: resident bytes per byte of what the model says is copied
    fixed: float  # a: resident bytes a run adds whatever its size
    idle: float | None
    fitted_from: int  # points


def _held_and_copied(impl: str, index: float, in_flight: float) -> tuple[float, float]:
    """The model's bytes as (held once, copied r times)."""
    return (index, in_flight) if impl == "bigjoin" else (0.0, index)


def fit(found: Sequence[Point]) -> dict[str, Fit]:
    fits = {}
    for impl in PROJECTED:
        mine = [p for p in found if p.implementation == impl]
        if not mine:
            continue
        tau = next((p.tau for p in mine if p.tau), None)
        c = statistics.median(p.index_bytes / (p.edges * _share(impl, p.workers, tau)) for p in mine)
        largest = max(mine, key=lambda p: (p.workers > 1, p.edges, p.workers))  # one worker ships nothing
        shipped_share = largest.edges * _shipped_share(impl, largest.workers, tau)
        s = largest.shipped / shipped_share if shipped_share else 0.0
        capped = [p for p in mine if p.capped]
        in_flight = max((p.in_flight_bytes for p in capped or mine), default=0)
        pairs = []
        for p in capped:
            held, copied = _held_and_copied(impl, p.index_bytes, p.in_flight_bytes)
            if p.above_idle is not None and copied:
                pairs.append((copied, p.above_idle - held))
        idle = [p.idle for p in capped if p.idle]
        a, r = _line(pairs)
        fits[impl] = Fit(impl, tau, c, s, in_flight, r, a, statistics.median(idle) if idle else None, len(mine))
    return fits


def _line(pairs: Sequence[tuple[float, float]]) -> tuple[float, float | None]:
    """(a, r) of y = a + r x by least squares; from one distinct x, a = 0 and r its ratio."""
    if not pairs:
        return 0.0, None
    xs = [x for x, _ in pairs]
    if len(set(xs)) < 2:
        return 0.0, statistics.median(y / x for x, y in pairs)
    r, a = statistics.linear_regression(xs, [y for _, y in pairs])
    return a, r


class Predicted(NamedTuple):
    index_bytes: float  # busiest worker
    model_bytes: float
    resident_bytes: float | None  # idle + held + r x copied
    shipped_bytes: float


def _above_idle(f: Fit, index: float, in_flight: float) -> float | None:
    """The fitted resident bytes above idle: what the worker holds once, a, and r per copied byte."""
    if f.copies is None:
        return None
    held, copied = _held_and_copied(f.implementation, index, in_flight)
    return held + max(0.0, f.fixed + f.copies * copied)


def _shipped_bytes(impl: str, workers: int, index: float, tuples: float) -> float:
    """Bytes exchanged: replicated's index once to every worker, else the tuples shipped."""
    return workers * index if impl == "replicated" else tuples * memory_model.TUPLE_BYTES


def predict(f: Fit, edges: int, workers: int) -> Predicted:
    index = f.index_per_edge * edges * _share(f.implementation, workers, f.tau)
    above = _above_idle(f, index, f.in_flight_bytes)
    resident = None if above is None or f.idle is None else f.idle + above
    tuples = f.shipped_per_edge * edges * _shipped_share(f.implementation, workers, f.tau)
    return Predicted(index, index + f.in_flight_bytes, resident, _shipped_bytes(f.implementation, workers, index, tuples))


def _gib(n: float | None) -> str:
    return "-" if n is None else fmt_bytes(n)


def _tb(n: float) -> str:
    return f"{n / 1e12:,.2f} TB"


PROJECTION_HEADER = [
    "graph",
    "edges",
    "impl",
    "index/worker",
    "model/worker",
    "resident/worker",
    "per machine",
    "fits",
    "shipped",
]


def projection_rows(fits: dict[str, Fit], spec: ProjectionSpec) -> list[list[str]]:
    """Per target graph and implementation, at spec.workers: the busiest worker's index, model bytes
    and resident peak, a machine's (workers_per_machine of them) and whether it fits, bytes shipped."""
    rows = []
    for target in spec.graphs:
        for impl, f in fits.items():
            p = predict(f, target.edges, spec.workers)
            machine = None if p.resident_bytes is None else p.resident_bytes * spec.workers_per_machine
            rows.append(_row(target, impl, p, machine, spec))
            if impl == "replicated" and p.resident_bytes is not None and f.idle is not None:
                shared = f.idle * spec.workers_per_machine + (p.resident_bytes - f.idle)  # its workers share one copy
                rows.append(_row(target, "replicated, one copy per machine", p, shared, spec))
    return rows


def _row(target: Target, impl: str, p: Predicted, machine: float | None, spec: ProjectionSpec) -> list[str]:
    fits = "?" if machine is None else ("yes" if machine <= spec.machine_bytes else "no")
    cells = [_gib(p.index_bytes), _gib(p.model_bytes), _gib(p.resident_bytes), _gib(machine), fits, _tb(p.shipped_bytes)]
    return [target.name, f"{target.edges:,}", impl, *cells]


CHECK_HEADER = [
    "impl",
    "graph",
    "W",
    "capped",
    "index: measured / predicted",
    "shipped: measured / predicted",
    "above idle: measured / predicted",
]


def check_rows(found: Sequence[Point], fits: dict[str, Fit]) -> list[list[str]]:
    """Every measured point beside what the fitted projection says of it (ratio measured / predicted)."""
    rows = []
    for p in sorted(found, key=lambda p: (p.implementation, p.capped, p.edges, p.workers)):
        f = fits[p.implementation]
        predicted = predict(f, p.edges, p.workers)
        shipped = _shipped_bytes(p.implementation, p.workers, p.index_bytes, p.shipped)
        fitted = _above_idle(f, p.index_bytes, p.in_flight_bytes)
        above = "-" if p.above_idle is None or fitted is None else _ratio(p.above_idle, fitted)
        rows.append(
            [
                p.implementation,
                p.dataset,
                str(p.workers),
                "yes" if p.capped else "",
                _ratio(p.index_bytes, predicted.index_bytes),
                _ratio(shipped, predicted.shipped_bytes),
                above,
            ]
        )
    return rows


def _ratio(measured: float, predicted: float) -> str:
    return "-" if not predicted else f"{measured / predicted:.2f}"


def fit_lines(fits: dict[str, Fit]) -> list[str]:
    """The fitted constants, one line per implementation."""
    lines = []
    for f in fits.values():
        if f.implementation == "replicated":
            shipped = "ships its index to every worker"
        else:
            shipped = f"s = {f.shipped_per_edge:.2f} tuples/edge"
        in_flight = f", in flight {_gib(f.in_flight_bytes)}" if f.implementation == "bigjoin" else ""
        r = "no capped run" if f.copies is None else f"a = {f.fixed / 2**20:+.0f} MiB, r = {f.copies:.2f}, idle {_gib(f.idle)}"
        lines.append(f"{f.implementation}: c = {f.index_per_edge:.2f} B/edge, {shipped}{in_flight}, {r} ({f.fitted_from} runs)")
    return lines


def tables(records: Sequence[RunRecord], spec: ProjectionSpec):
    """The projection and its check as rich tables, with the fitted constants as the caption."""
    found = points(records)
    fits = fit(found)
    if not fits:
        return []
    machine = f"the busiest worker at W = {spec.workers} ({spec.workers_per_machine} a machine, {_gib(spec.machine_bytes)} each)"
    out = [
        _table(f"past this machine: {machine}", PROJECTION_HEADER, projection_rows(fits, spec), "; ".join(fit_lines(fits))),
        _table(
            "the projection beside every point it was fitted from (measured / predicted)", CHECK_HEADER, check_rows(found, fits)
        ),
    ]
    return out


def _table(title: str, header: list[str], rows: list[list[str]], caption: str | None = None):
    from rich import box
    from rich.table import Table

    table = Table(title=title, caption=caption, box=box.SIMPLE_HEAD, pad_edge=False)
    for col in header:
        table.add_column(col, justify="left" if col in ("graph", "impl") else "right")
    for row in rows:
        table.add_row(*row)
    return table
