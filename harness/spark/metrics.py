"""Physical counters measured by Spark itself, read from the driver's REST status API
(the data behind the Spark UI), for all jobs run under the given job groups.

A *round* is an executed stage that reads shuffle data: the receiving side of one exchange, where
the MPC model measures load. Its per-task records read are the per-worker loads."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from contextlib import contextmanager

from harness.core.errors import ExecutionError

_EXEC_METRICS = ("JVMHeapMemory", "OnHeapExecutionMemory", "ProcessTreeJVMRSSMemory", "ProcessTreePythonRSSMemory")
# Spark's stage totals behind the time breakdown, with their units: CPU and shuffle-write times are
# nanoseconds, the rest milliseconds. Executor CPU time is the JVM's alone (not the Python worker's).
_STAGE_TIMES = {
    "executor_run_s": ("executorRunTime", 1e-3),
    "executor_cpu_s": ("executorCpuTime", 1e-9),
    "gc_s": ("jvmGcTime", 1e-3),
    "deserialize_s": ("executorDeserializeTime", 1e-3),
    "result_serialize_s": ("resultSerializationTime", 1e-3),
    "shuffle_write_s": ("shuffleWriteTime", 1e-9),
    "shuffle_fetch_wait_s": ("shuffleFetchWaitTime", 1e-3),
}


def _phase_times() -> dict:
    return {**{k: 0.0 for k in _STAGE_TIMES}, "slowest_tasks_s": 0.0, "stages": 0}


# The run's totals summed from each stage attempt's own (Spark's field names).
_STAGE_TOTALS = {
    "shuffle_write_records": "shuffleWriteRecords",
    "shuffle_write_bytes": "shuffleWriteBytes",
    "shuffle_read_records": "shuffleReadRecords",
    "shuffle_read_bytes": "shuffleReadBytes",
    "spill_bytes": "diskBytesSpilled",
    "spill_memory_bytes": "memoryBytesSpilled",
}


def _add_attempt(totals: dict, peaks: dict, attempt: dict) -> None:
    """One completed (or failed) stage attempt's totals and executor memory peaks."""
    totals["stages"] += 1
    totals["failed_tasks"] += attempt.get("numFailedTasks", 0)  # e.g. on a lost executor
    totals["stage_retries"] += attempt["attemptId"] > 0
    for total, name in _STAGE_TOTALS.items():
        totals[total] += attempt.get(name, 0)
    for k in peaks:
        peaks[k] = max(peaks[k], (attempt.get("peakExecutorMetrics") or {}).get(k, 0))


def _round(sid: int, attempt: dict, phase: str, tasks: list[dict], slowest: float) -> dict | None:
    """A stage attempt that read a shuffle, as one round of the MPC model: what its tasks received."""
    reads = [t["taskMetrics"]["shuffleReadMetrics"]["recordsRead"] for t in tasks]
    read_bytes = [
        t["taskMetrics"]["shuffleReadMetrics"].get("localBytesRead", 0)
        + t["taskMetrics"]["shuffleReadMetrics"].get("remoteBytesRead", 0)
        for t in tasks
    ]
    if not (attempt.get("shuffleReadRecords", 0) > 0 and reads):
        return None
    return {
        "stage": sid,
        "attempt": attempt["attemptId"],
        "phase": phase,
        "tasks": len(reads),
        "records": sum(reads),
        "bytes": attempt.get("shuffleReadBytes", 0),
        "max_task_records": max(reads),
        "mean_task_records": sum(reads) / len(reads),
        "skew": (max(reads) / (sum(reads) / len(reads))) if sum(reads) else None,
        # Bytes per task: the load where rows are blobs of many tuples (the BiGJoin family).
        "max_task_bytes": max(read_bytes),
        "mean_task_bytes": sum(read_bytes) / len(read_bytes),
        "bytes_skew": (max(read_bytes) / (sum(read_bytes) / len(read_bytes))) if sum(read_bytes) else None,
        "executor_run_s": round(attempt.get("executorRunTime", 0) / 1e3, 3),
        "executor_cpu_s": round(attempt.get("executorCpuTime", 0) / 1e9, 3),
        "slowest_task_s": round(slowest, 3),
    }


def _summary(totals: dict, per_round: list[dict], peaks: dict) -> dict:
    """The totals with the load of the heaviest round and the memory peaks. The load L of the MPC model
    is the largest per-worker receive in any round; the skew is reported for that round (max/mean
    over its tasks)."""
    heaviest = max(per_round, key=lambda r: r["max_task_records"], default=None)
    totals = dict(totals)
    task_peak = totals.pop("peak_exec_memory_bytes")
    return dict(
        totals,
        shuffle_records=totals["shuffle_write_records"],
        shuffle_bytes=totals["shuffle_write_bytes"],
        rounds=len(per_round),
        max_task_records=heaviest["max_task_records"] if heaviest else 0,
        mean_task_records=heaviest["mean_task_records"] if heaviest else 0.0,
        load_skew=heaviest["skew"] if heaviest else None,
        peak_exec_memory_bytes=max(task_peak, peaks["OnHeapExecutionMemory"]),
        task_peak_exec_memory_bytes=task_peak,
        executor_peak_jvm_heap_bytes=peaks["JVMHeapMemory"] or None,
        executor_peak_execution_memory_bytes=peaks["OnHeapExecutionMemory"] or None,
        executor_peak_rss_bytes=peaks["ProcessTreeJVMRSSMemory"] or None,
        executor_peak_python_rss_bytes=peaks["ProcessTreePythonRSSMemory"] or None,
    )


class SparkCounters:
    def __init__(self, spark):
        self.sc = spark.sparkContext
        url = self.sc.uiWebUrl
        if not url:
            raise ExecutionError("Spark UI is disabled; the harness needs it (spark.ui.enabled=true) to read task metrics")
        port = url.rsplit(":", 1)[1]
        host = "127.0.0.1" if self.sc.master.startswith("local") else url.split("//", 1)[1].rsplit(":", 1)[0]
        self.base = f"http://{host}:{port}/api/v1/applications/{self.sc.applicationId}"

    @contextmanager
    def job_group(self, group: str, description: str = ""):
        """Tag every Spark job started by this thread inside the block."""
        self.sc.setJobGroup(group, description or group, interruptOnCancel=True)
        try:
            yield
        finally:
            self.sc.setLocalProperty("spark.jobGroup.id", None)
            self.sc.setLocalProperty("spark.job.description", None)

    def cancel(self, group: str) -> None:
        self.sc.cancelJobGroup(group)

    def _get(self, path: str):
        with urllib.request.urlopen(self.base + path, timeout=30) as resp:
            return json.load(resp)

    def _jobs(self, groups: set[str], settle_s: float) -> list[dict]:
        """Jobs of the groups, once the status store has seen all of them finish."""
        deadline = time.monotonic() + settle_s
        while True:
            jobs = [j for j in self._get("/jobs") if j.get("jobGroup") in groups]
            if all(j["status"] in ("SUCCEEDED", "FAILED") for j in jobs):
                stages = {s for j in jobs for s in j["stageIds"]}
                # Only the active ones: the whole listing grows with the session (0.5 s at 6,000 stages).
                pending = [s for s in self._get("/stages?status=active") if s["stageId"] in stages]
                if not pending:
                    return jobs
            if time.monotonic() > deadline:
                return jobs
            time.sleep(0.05)

    def collect(self, groups: list[str], settle_s: float = 15.0, since: float | None = None) -> dict:
        """Totals and per-round loads over the stages of the jobs of `groups`; executor memory peaks
        are Spark's per-stage peaks over those stages (the run's own window, on a cluster too);
        `since` (epoch seconds, the run's start) picks the executors lost during the run."""
        jobs = self._jobs(set(groups), settle_s)
        stage_ids = sorted({s for j in jobs for s in j["stageIds"]})
        phase_of = {s: (j.get("jobGroup") or "").rsplit(":", 1)[-1] for j in jobs for s in j["stageIds"]}
        totals = dict.fromkeys([*_STAGE_TOTALS, "peak_exec_memory_bytes", "tasks", "stages", "failed_tasks", "stage_retries"], 0)
        per_round: list[dict] = []
        times: dict[str, dict] = {}  # phase -> Spark's time totals over its stages
        peaks = dict.fromkeys(_EXEC_METRICS, 0)
        evicted = 0
        for sid in stage_ids:
            try:
                attempts = self._get(f"/stages/{sid}")
            except urllib.error.HTTPError as exc:
                if exc.code != 404:
                    raise
                evicted += 1  # dropped from the status store (spark.ui.retainedStages): totals are incomplete
                continue
            for attempt in attempts:
                if attempt["status"] not in ("COMPLETE", "FAILED"):
                    continue  # skipped: its shuffle output was reused
                _add_attempt(totals, peaks, attempt)
                tasks = self._get(f"/stages/{sid}/{attempt['attemptId']}/taskList?length={attempt['numTasks'] + 100}")
                tasks = [t for t in tasks if t.get("status") == "SUCCESS" and "taskMetrics" in t]
                totals["tasks"] += len(tasks)
                phase = phase_of.get(sid, "")
                slowest = max((t.get("duration", 0) for t in tasks), default=0) / 1e3
                spent = times.setdefault(phase, _phase_times())
                for key, (name, unit) in _STAGE_TIMES.items():
                    spent[key] += attempt.get(name, 0) * unit
                spent["slowest_tasks_s"] += slowest  # the stage's critical path: stages of one run follow each other
                spent["stages"] += 1
                for t in tasks:
                    totals["peak_exec_memory_bytes"] = max(
                        totals["peak_exec_memory_bytes"], t["taskMetrics"].get("peakExecutionMemory", 0)
                    )
                received = _round(sid, attempt, phase, tasks, slowest)
                if received is not None:
                    per_round.append(received)
        return dict(
            _summary(totals, per_round, peaks),
            **self._executor_summary(since),
            jobs=len(jobs),
            stages_evicted=evicted,
            per_round=per_round,
            spark_time_by_phase={phase: {k: round(v, 4) for k, v in spent.items()} for phase, spent in times.items()},
            # Each phase's shape, the stages each of its jobs ran: what spark_floor reproduces empty.
            spark_stages_per_job={
                phase: [
                    j.get("numCompletedStages", 0)
                    for j in sorted(jobs, key=lambda j: j["jobId"])
                    if (j.get("jobGroup") or "").rsplit(":", 1)[-1] == phase
                ]
                for phase in times
            },
        )

    def _executor_summary(self, since: float | None) -> dict:
        """From one read of /allexecutors: the executors removed (killed, crashed) since the run
        started, with Spark's reason, and the driver's peak heap over the whole application (labelled
        so: it is not the run's)."""
        executors = self._get("/allexecutors")
        driver: dict = next((ex for ex in executors if ex.get("id") == "driver"), {})
        return {
            "application_driver_peak_jvm_heap_bytes": (driver.get("peakMemoryMetrics") or {}).get("JVMHeapMemory") or None,
            "executors_lost": [
                f"{ex['id']}: {ex.get('removeReason') or 'removed'}"
                for ex in executors
                if ex.get("id") != "driver"
                and not ex.get("isActive", True)
                and (since is None or _epoch(ex.get("removeTime")) >= since)
            ],
        }


def _epoch(stamp: str | None) -> float:
    """Spark's REST dates ("2026-11-23T00:25:05.123GMT") as epoch seconds; unknown: +inf (kept)."""
    import datetime as dt

    if not stamp:
        return float("inf")
    try:
        return dt.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fGMT").replace(tzinfo=dt.UTC).timestamp()
    except ValueError:
        return float("inf")
