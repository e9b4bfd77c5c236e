"""Spark's floor: the wall time of a chain of empty jobs with the same shape as a run's phase (its
jobs, the stages of each and W tasks per stage), built the way the BiGJoin family and Shares build
theirs (a DataFrame of W partitions through mapInArrow, repartitioned between stages). What a phase
spends beyond it is work; what it spends at it is what two cores cannot do faster with Spark."""

from __future__ import annotations

import time

import pyarrow as pa

_SCHEMA = "token long, payload binary"


def _pass_on(iterator):
    """Read nothing of note; emit one small row keyed by this task's partition."""
    from pyspark import TaskContext

    for _ in iterator:
        pass
    context = TaskContext.get()
    assert context is not None  # code that runs in a task
    token = context.partitionId()
    yield pa.RecordBatch.from_pydict({"token": pa.array([token], pa.int64()), "payload": pa.array([b"x"], pa.binary())})


def floor_seconds(spark, stages_per_job: list[int], tasks: int) -> float:
    """Wall seconds of one empty job per entry, each with that many stages of `tasks` tasks."""
    started = time.perf_counter()
    for stages in stages_per_job:
        df = spark.range(0, tasks, 1, tasks).mapInArrow(_pass_on, _SCHEMA)
        for _ in range(max(0, stages - 1)):
            df = df.repartition(tasks, "token").mapInArrow(_pass_on, _SCHEMA)
        df.collect()
    return time.perf_counter() - started
