"""What the cost model says a worker holds at its peak, beside what a capped run measured there.

- BiGJoin family: its index share plus the prefixes it holds in flight at its B' (§3.3);
- Shares: the tuples its cell receives (Appendix F);
- replicated: the whole graph's index, on every worker;
- binary: its largest intermediate result, spread over the W workers.

Measured is the largest resident sample of a worker's cgroup (memory_cap.Cgroup.resident); `idle` is
the same before the run started (the executor JVM and its Python workers, holding nothing of it)."""

from __future__ import annotations

from typing import NamedTuple

from harness.bench.record import RunRecord

TUPLE_BYTES = 16  # an edge tuple as Shares ships it: two int64


class Prediction(NamedTuple):
    bytes_per_worker: int
    made_of: str


def predict(record: RunRecord) -> Prediction | None:
    """The model's bytes per worker for this run's implementation, from its logical counters."""
    logical = record.logical
    index = logical.get("index") or {}
    if index.get("bytes_per_worker") and "peak_bytes_in_flight_per_worker" in logical:
        held = max(index["bytes_per_worker"]) + logical["peak_bytes_in_flight_per_worker"]
        return Prediction(held, "index share + prefixes in flight at B'")
    if "replicated_index_bytes" in logical:
        return Prediction(logical["replicated_index_bytes"], "the whole graph's index on every worker")
    if "max_cell_load" in logical:
        return Prediction(logical["max_cell_load"] * TUPLE_BYTES, "the tuples its cell receives")
    if "largest_intermediate_bytes" in logical:
        workers = max(1, record.params.get("workers", 1))
        return Prediction(-(-logical["largest_intermediate_bytes"] // workers), "largest intermediate / W")
    return None


def beside_model(record: RunRecord, resident_peaks: list[int], idle: list[int]) -> dict:
    """The busiest worker's measured peak beside the prediction: the ratio, and the ratio of what
    the run added above the idle worker (what the model counts)."""
    peak = max(resident_peaks, default=0)
    worker = resident_peaks.index(peak) if resident_peaks else None
    above_idle = peak - idle[worker] if worker is not None and worker < len(idle) else None
    model = predict(record) if record.status in ("OK", "UNVERIFIED", "VAL") else None
    if model is None or model.bytes_per_worker <= 0:
        return {"measured_bytes": peak, "above_idle_bytes": above_idle}
    return {
        "measured_bytes": peak,
        "above_idle_bytes": above_idle,
        "predicted_bytes": model.bytes_per_worker,
        "predicted_from": model.made_of,
        "measured_over_model": round(peak / model.bytes_per_worker, 3),
        "above_idle_over_model": None if above_idle is None else round(above_idle / model.bytes_per_worker, 3),
    }


def index_share_bytes(record: RunRecord) -> int | None:
    """What a worker holds of the input by the run's counters: its index partition (BiGJoin family), the
    whole index (replicated), its cell's tuples (Shares); None where a run recorded none."""
    logical = record.logical
    per_worker = (logical.get("index") or {}).get("bytes_per_worker")
    if per_worker:
        return max(per_worker)
    if "replicated_index_bytes" in logical:
        return logical["replicated_index_bytes"]
    if "max_cell_load" in logical:
        return logical["max_cell_load"] * TUPLE_BYTES
    return None


def largest_intermediate_rows(record: RunRecord) -> int | None:
    """The largest intermediate result in rows: BiGJoin's largest level of prefixes, binary's largest
    join output."""
    logical = record.logical
    levels = logical.get("prefixes_per_level")
    if isinstance(levels, dict) and levels:
        return max(int(v) for v in levels.values())
    return logical.get("largest_intermediate_rows")
