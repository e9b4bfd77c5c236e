"""The typed run record and its file: every recorded run under results/runs reads, loses no key and reads
back equal; a record writes its fields in the file's order, the sometimes-written ones only when present."""

import json
from pathlib import Path

from harness.bench.record import RunRecord
from harness.bench.runner import RunRequest, _new_record

RUNS = Path(__file__).resolve().parent.parent / "results" / "runs"
# Every record's keys in the order `run` writes them; a run adds the sometimes-written ones in this order.
ALWAYS = [
    "schema_version",
    "run_id",
    "timestamp",
    "git",
    "machine",
    "workload",
    "trial",
    "semantics",
    "query",
    "dataset",
    "implementation",
    "params",
    "timeout_s",
    "status",
    "error",
    "allow_unverified",
    "timeout_expected",
    "mem_expected",
    "count",
    "limit",
    "output",
    "verified",
    "unverified_reason",
    "oracle",
    "checks",
    "metrics",
    "logical",
]


def _recorded_runs() -> list[tuple[Path, dict]]:
    """Every run record under results/runs (not a gate's findings or a comparison)."""
    files = [(p, json.loads(p.read_text())) for p in sorted(RUNS.rglob("*.json"))]
    return [(p, data) for p, data in files if p.name not in ("gate.json", "compare.json")]


def test_every_recorded_run_reads_keeps_every_key_and_reads_back_equal():
    runs = _recorded_runs()
    assert len(runs) > 1000
    for path, data in runs:
        record = RunRecord.from_json(data)
        written = record.to_json()
        assert {k: written[k] for k in data} == data, path  # nothing lost or changed; an older file gains defaults
        assert set(written) - set(data) <= {"allow_unverified", "timeout_expected", "mem_expected", "unverified_reason"} | {
            "timeout_s",
            "limit",
            "output",
            "agreement",
        }, path
        assert RunRecord.from_json(written) == record, path


def test_a_new_record_writes_the_file_s_fields_in_order_and_the_sometimes_ones_only_when_present():
    record = _new_record(RunRequest("triangle", "rmat:scale=8", "local-gj", params={"limit": 3}))
    assert list(record.to_json()) == ALWAYS
    assert record.params == {"workers": 2, "limit": 3} and record.query == {"name": "triangle"}
    record.spark, record.traceback, record.memory_cap_hit = {"master": "local[2]"}, "Traceback ...", {"phase": "query"}
    assert list(record.to_json()) == [*ALWAYS, "spark", "traceback", "memory_cap_hit"]
    record.traceback = record.memory_cap_hit = None
    record.initial, record.batches = {"count": 1}, []  # a dynamic run: its agreement is written, null without a recompute
    assert list(record.to_json())[len(ALWAYS) :] == ["spark", "initial", "batches", "agreement"]
    assert record.to_json()["agreement"] is None
    assert RunRecord.from_json(json.loads(json.dumps(record.to_json()))) == record


def test_unknown_keys_are_kept_and_written_last():
    record = RunRecord.from_json({"implementation": "bigjoin", "status": "OK", "from_the_future": [1, 2]})
    assert record.unknown == {"from_the_future": [1, 2]} and record.count is None and record.checks == []
    assert list(record.to_json())[-1] == "from_the_future"
    assert "unknown" not in record.to_json() and "read_from" not in record.to_json()


def test_the_names_readers_use():
    record = RunRecord.from_json(
        {
            "query": {"name": "triangle"},
            "dataset": {"name": "g", "vertices": 3},
            "params": {"workers": 4},
            "status": "UNVERIFIED",
            "metrics": {
                "index_s": 1.5,
                "query_s": 2.0,
                "shuffle_records": 9,
                "memory": {"driver_python_rss_start_bytes": 100, "driver_python_rss_peak_bytes": 150},
            },
        }
    )
    assert (record.query_name, record.dataset_name, record.workers, record.case_name) == ("triangle", "g", 4, "triangle on g")
    assert record.finished and record.processing_s == 3.5 and record.communication == (9, "Spark shuffle records")
    assert record.added_peak_memory_bytes == 50 and list(record.process_peaks) == [
        "driver_python_rss",
        "driver_jvm_rss",
        "jvm_child_python_rss",
    ]
    assert RunRecord.from_json({"metrics": {"query_s": 1.0}}).processing_s is None  # stopped before its index was timed
