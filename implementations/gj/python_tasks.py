"""Python functions run as Spark tasks, one argument a task, through Spark SQL's Arrow path
(`mapInArrow`), whose Python workers are those the session started and warmed before any run
(harness.spark.session). An RDD job's Python workers come from a daemon of their own, which the first
RDD job in a process starts, and warms, inside its timed phase: 4.2 s of `replicated`'s first index_s
on rmat-small against 0.4 s in its second trial, when its index task was an RDD job."""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from implementations.gj.exchange import current_partition

RESULT_SCHEMA = "result binary"


def run_tasks(spark, arguments: Sequence[Any], task: Callable[[Any], Iterable[Any]]) -> list[Any]:
    """Everything `task(argument)` yields, for each argument in a Spark task of its own (partition i
    runs arguments[i], so a re-executed task runs the same one), in the order of `arguments`."""
    if not arguments:
        return []

    def each(batches):
        import pyarrow as pa

        for _ in batches:  # one row per partition, its index: the partition id says which argument
            pass
        found = [pickle.dumps(r, protocol=pickle.HIGHEST_PROTOCOL) for r in task(arguments[current_partition()])]
        yield pa.RecordBatch.from_pydict({"result": found}, schema=pa.schema([("result", pa.binary())]))

    n = len(arguments)
    rows = spark.range(0, n, 1, n).mapInArrow(each, RESULT_SCHEMA).collect()
    return [pickle.loads(row.result) for row in rows]
