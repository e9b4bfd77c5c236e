"""How one run's load spreads over its W workers, in the same terms for every implementation: the
quantities `workloads/scaling.yaml` plots against W (one value per run; max and mean over workers).

- index: the bytes a worker holds for the run: the BiGJoin family's index partition, Shares' cell;
- in flight: the BiGJoin family's prefixes held at once (its peak, the batch B' bounds);
- received: tuples a worker received, summed over rounds and in the worst round;
- communication: tuples shipped in all; rounds;
- critical path: the MPC model's time, summed over rounds the tuples the busiest worker received;
- resident above idle: under a cap, the busiest worker's resident peak less its idle resident size.

Binary's loads come from Spark's shuffle: per round (stage), the largest and the mean task's records
read (a task per logical worker), so its busiest worker summed over rounds is not known, only each
round's busiest (whose sum is its critical path)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

from harness.bench.memory_model import TUPLE_BYTES
from harness.bench.record import RunRecord


class Spread(NamedTuple):
    max: float
    mean: float


class Loads(NamedTuple):
    workers: int
    index_bytes: Spread | None
    in_flight: Spread | None
    received_total: Spread | None  # per worker, summed over rounds
    received_worst_round: Spread  # the round with the busiest worker
    communication: int
    rounds: int
    critical_path: int
    above_idle: Spread | None = None  # resident peak less idle, under a cap (the worker's own memory)


def _spread(values: Sequence[float], workers: int) -> Spread:
    return Spread(max(values, default=0), sum(values) / workers)


def _per_worker_rounds(record: RunRecord) -> list[list[int]] | None:
    """Tuples each worker received, per round, where the run knows them per worker."""
    logical = record.logical
    if "worker_load_per_round" in logical:  # the BiGJoin family; none at W = 1, where nothing is exchanged
        return logical["worker_load_per_round"]
    if "load_per_cell" in logical:
        return [logical["load_per_cell"]]  # Shares: one round, a cell per worker (some may idle)
    return None


def _above_idle(record: RunRecord, workers: int) -> Spread | None:
    cap = record.metrics.get("memory_cap") or {}
    peaks, idle = cap.get("resident_peak_per_worker_bytes"), cap.get("resident_idle_per_worker_bytes")
    if not peaks or not idle:
        return None
    return _spread([max(0, p - i) for p, i in zip(peaks, idle)], workers)


def loads(record: RunRecord) -> Loads | None:
    """The run's loads, or None for a run that did not finish or ran in the driver."""
    loads_ = _counted_loads(record)
    return loads_ and loads_._replace(above_idle=_above_idle(record, loads_.workers))


def _counted_loads(record: RunRecord) -> Loads | None:
    if not record.finished:
        return None
    logical, metrics = record.logical, record.metrics
    workers = record.params.get("workers", 1)
    rounds = _per_worker_rounds(record)
    index = (logical.get("index") or {}).get("bytes_per_worker")
    if "replicated_index_bytes" in logical:  # the whole graph on every worker, which exchanges nothing
        index = [logical["replicated_index_bytes"]] * workers
    in_flight = None
    if "peak_prefixes_in_flight_per_worker" in logical:
        in_flight = Spread(logical["peak_prefixes_in_flight_per_worker"], logical["peak_prefixes_in_flight"] / workers)
    if rounds is not None:
        if "load_per_cell" in logical:
            index = [cell * TUPLE_BYTES for cell in logical["load_per_cell"]]
        totals = [sum(r[i] for r in rounds if i < len(r)) for i in range(workers)]
        worst = max(rounds, key=lambda r: max(r, default=0), default=[])
        return Loads(
            workers,
            None if index is None else _spread(index, workers),
            in_flight,
            _spread(totals, workers),
            _spread(worst, workers),
            sum(map(sum, rounds)),
            len(rounds),
            sum(max(r, default=0) for r in rounds),
        )
    stages = [s for s in metrics.get("per_round") or [] if s.get("phase") in ("index", "query")]
    if not stages:
        if index is None or "replicated_index_bytes" not in logical:
            return None
        return Loads(workers, _spread(index, workers), None, None, Spread(0, 0), 0, 0, 0)  # nothing exchanged
    busiest = max(stages, key=lambda s: s["max_task_records"])
    return Loads(
        workers,
        None if index is None else _spread(index, workers),
        None,
        None,
        Spread(busiest["max_task_records"], busiest["records"] / workers),
        sum(s["records"] for s in stages),
        len(stages),
        sum(s["max_task_records"] for s in stages),
    )


def fitted_slope(points: Sequence[tuple[float, float]]) -> float | None:
    """The least-squares slope of log y against log W over (W, y) points with y > 0; None for fewer
    than two distinct W."""
    logs = [(math.log(w), math.log(y)) for w, y in points if y > 0]
    if len({x for x, _ in logs}) < 2:
        return None
    mx, my = sum(x for x, _ in logs) / len(logs), sum(y for _, y in logs) / len(logs)
    return sum((x - mx) * (y - my) for x, y in logs) / sum((x - mx) ** 2 for x, _ in logs)


# The model's slope (log-log, against W at a fixed input) of a per-worker quantity for an implementation
# (None: no prediction). Shares' slopes use Appendix F's tau*: per-cell load IN / W^(1/tau*),
# communication IN * W^(1 - 1/tau*).
def per_worker_slope(impl: str, tau: float | None) -> float:
    if impl == "replicated":
        return 0.0  # the whole graph on every worker
    return -1 / tau if impl == "shares" and tau else -1.0


def communication_slope(impl: str, tau: float | None) -> float:
    return 1 - 1 / tau if impl == "shares" and tau else 0.0


class Quantity(NamedTuple):
    title: str
    read: Callable[[Loads], float | None]
    model_slope: Callable[[str, float | None], float | None]  # impl, tau*: at a fixed input
    grows_with_input: bool = True  # in weak scaling the input grows as W: its slope is one more


QUANTITIES = (
    Quantity("index bytes, busiest worker", lambda x: x.index_bytes and x.index_bytes.max, per_worker_slope),
    Quantity("prefixes in flight, busiest worker", lambda x: x.in_flight and x.in_flight.max, lambda i, t: -1.0),
    Quantity(
        "tuples received over all rounds, busiest worker",
        lambda x: x.received_total and x.received_total.max,
        per_worker_slope,
    ),
    Quantity("tuples received in the worst round, busiest worker", lambda x: x.received_worst_round.max, per_worker_slope),
    Quantity(
        "communication: tuples shipped in all",
        lambda x: x.communication,
        communication_slope,
    ),
    Quantity("critical path (MPC): Σ rounds, busiest worker", lambda x: x.critical_path, per_worker_slope),
    Quantity("rounds", lambda x: x.rounds, lambda i, t: 0.0, grows_with_input=False),
    Quantity("resident peak above idle, busiest worker", lambda x: x.above_idle and x.above_idle.max, per_worker_slope),
)


def model_slope(quantity: Quantity, impl: str, tau: float | None, grown: bool) -> float | None:
    """The model's slope for the quantity against W; in a weak-scaling series (grown) the input grows as W."""
    slope = quantity.model_slope(impl, tau)
    return slope + 1.0 if slope is not None and grown and quantity.grows_with_input else slope


class Case(NamedTuple):
    """One query and graph (or weak-scaling series) run at several W: each implementation's loads with its tau*."""

    name: str
    grown: bool
    runs: dict[str, list[tuple[Loads, float | None]]]


def cases(records: Sequence[RunRecord], min_workers: int = 3) -> list[Case]:
    """The cases some implementation ran at min_workers or more W, by name."""
    found: dict[str, Case] = {}
    for r in records:
        measured = loads(r)
        if measured is not None:
            case = found.setdefault(r.scaling_case, Case(r.scaling_case, False, {}))
            if r.series:
                found[r.scaling_case] = case = case._replace(grown=True)
            case.runs.setdefault(r.implementation, []).append((measured, r.logical.get("tau_star")))
    return sorted(
        (c for c in found.values() if any(len({m.workers for m, _ in v}) >= min_workers for v in c.runs.values())),
        key=lambda c: c.name,
    )


class Slope(NamedTuple):
    implementation: str
    quantity: str
    points: list[tuple[int, float]]  # (W, value), by W
    fitted: float | None
    model: float | None


def slopes(case: Case, quantity: Quantity) -> list[Slope]:
    """Per implementation of the case, the quantity's points against W, its fitted slope and the model's."""
    out = []
    for impl, runs in sorted(case.runs.items()):
        points = sorted((m.workers, value) for m, _ in runs if (value := quantity.read(m)))
        if points:
            model = model_slope(quantity, impl, runs[0][1], case.grown)
            out.append(Slope(impl, quantity.title, points, fitted_slope(points), model))
    return out
