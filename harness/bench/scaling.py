"""How one run's load spreads over its W workers, in the same terms for every implementation: the
quantities `workloads/scaling.yaml` plots against W (one value per run; max and mean over workers).

- index: the bytes a worker holds for the run: the BiGJoin family's index partition, Shares' cell;
- in flight: the BiGJoin family's prefixes held at once (its peak, the batch B' bounds);
- received: tuples a worker received, summed over rounds and in the worst round;
- communication: tuples shipped in all; rounds;
- critical path: the MPC model's time, summed over rounds the tuples the busiest worker received.

Binary's loads come from Spark's shuffle: per round (stage), the largest and the mean task's records
read (a task per logical worker), so its busiest worker summed over rounds is not known, only each
round's busiest (whose sum is its critical path)."""

from __future__ import annotations

import math
from collections.abc import Sequence
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


def loads(record: RunRecord) -> Loads | None:
    """The run's loads, or None for a run that did not finish, ran in the driver or ran under a memory
    cap (a memory experiment: its loads are those of the same run uncapped)."""
    if not record.finished or record.params.get("memory_per_worker"):
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
