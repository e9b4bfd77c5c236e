"""Matches as Arrow tables for Parquet files (`--output`): one int64 column per pattern vertex, named
after the query's attributes in its order, holding the graph's own vertex ids."""

from __future__ import annotations

import glob
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from harness.core import store
from harness.core.query import JoinSpec
from implementations.gj.arrays import mapped


def schema(spec: JoinSpec) -> pa.Schema:
    return pa.schema([(a, pa.int64()) for a in spec.query.attributes])


def columns_of(spec: JoinSpec) -> tuple[tuple[str, int], ...]:
    """(attribute, its position in the attribute order), in the query's order."""
    order = list(spec.attribute_order)
    return tuple((a, order.index(a)) for a in spec.query.attributes)


def table(spec: JoinSpec, ids: np.ndarray, rows: np.ndarray) -> pa.Table:
    """Rows of ranks in attribute order (n, m) as a table of original ids (`ids[rank]`) in the query's order."""
    return _id_table(columns_of(spec), ids, rows)


def _id_table(columns: tuple[tuple[str, int], ...], ids: np.ndarray | None, rows: np.ndarray) -> pa.Table:
    """ids None: the rows hold the graph's own ids already."""
    return pa.Table.from_arrays(
        [pa.array(np.asarray(rows[:, at] if ids is None else ids[rows[:, at]], dtype=np.int64)) for _, at in columns],
        schema=_columns_schema(columns),
    )


def _columns_schema(columns: tuple[tuple[str, int], ...]) -> pa.Schema:
    return pa.schema([(a, pa.int64()) for a, _ in columns])


class MatchSink(NamedTuple):
    """Where the tasks of a distributed listing write the matches they find (pickled into every task):
    one Parquet file per task attempt that found some, named by its job, stage, worker and attempt, so
    the driver keeps the attempts whose results it received (`accepted`) and removes the others."""

    directory: str
    ids: str | None  # a store file (.npy): original vertex id by rank (None: the rows hold original ids)
    columns: tuple[tuple[str, int], ...]  # (attribute, its position in the attribute order), in the query's order
    limit: int  # the most rows one task writes (the run's limit; unlimited: every match)

    @classmethod
    def of(cls, spec: JoinSpec, directory: str, ids: str | None, limit: int | None) -> MatchSink:
        return cls(directory, ids, columns_of(spec), limit or (1 << 62))

    def room(self, listed: list[np.ndarray]) -> int:
        """How many more matches a task that has `listed` these may write (at most the limit in all)."""
        return max(0, self.limit - sum(len(rows) for rows in listed))

    def write_task(self, job: int, stage: int, worker: int, attempt: int, listed: list[np.ndarray]) -> None:
        """One task attempt's listed matches, in its own file (`part_name`)."""
        self.write(part_name(job, stage, worker, attempt), np.concatenate(listed))

    def write(self, name: str, ranks: np.ndarray) -> None:
        """Rows of ranks (attribute order) as original ids in a Parquet file of their own, complete or absent."""
        with self.part(name) as part:
            part.append(ranks)

    def part(self, name: str) -> PartFile:
        """A Parquet file of its own, appended to batch by batch (`PartFile`)."""
        return PartFile(self, os.path.join(self.directory, name), None if self.ids is None else mapped(self.ids))


class PartFile:
    """One task's Parquet file, written under a temporary name and moved into place when the `with`
    block ends without an error: complete or absent, and absent when no rows were appended."""

    def __init__(self, sink: MatchSink, path: str, ids: np.ndarray | None):
        self.sink, self.path, self.ids = sink, path, ids
        self.staging = f"{path}.{os.getpid()}.tmp"
        self.writer: pq.ParquetWriter | None = None
        self.rows = 0

    def append(self, ranks: np.ndarray) -> None:
        if self.writer is None:
            os.makedirs(self.sink.directory, exist_ok=True)
            self.writer = pq.ParquetWriter(self.staging, _columns_schema(self.sink.columns))
        self.writer.write_table(_id_table(self.sink.columns, self.ids, ranks))
        self.rows += len(ranks)

    def __enter__(self) -> PartFile:
        return self

    def __exit__(self, error_type, error, traceback) -> None:
        if self.writer is None:
            return
        self.writer.close()
        if error_type is None:
            os.replace(self.staging, self.path)
        else:
            os.remove(self.staging)


@contextmanager
def sink_for(spec: JoinSpec, path: str | None, ids: np.ndarray | None, limit: int | None) -> Iterator[MatchSink | None]:
    """The sink a distributed listing's tasks write to (None without a path), with the rank -> id map
    saved in the store for them (`ids` None: the rows hold the graph's own ids), removed when the
    listing ends."""
    if path is None:
        yield None
        return
    scratch = None if ids is None else store.new_scratch("ids")
    try:
        if scratch is not None:
            store.save_to_store(str(scratch / "ids.npy"), ids)
        yield MatchSink.of(spec, path, None if scratch is None else str(scratch / "ids.npy"), limit)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def finish(spark, directory: str, accepted: set[str], limit: int | None) -> None:
    """After a distributed listing: the files of the attempts the driver received (`keep_accepted`),
    the last cut to the limit (`trim`)."""
    keep_accepted(directory, accepted)
    if limit is not None:
        trim(spark, directory, limit)


def part_name(job: int, stage: int, worker: int, attempt: int) -> str:
    return f"part-j{job:06d}-s{stage:03d}-p{worker:04d}-a{attempt}.parquet"


def keep_accepted(directory: str, accepted: set[str]) -> None:
    """Remove the files of task attempts whose results the driver did not receive (a retried task's)."""
    for path in glob.glob(os.path.join(directory, "part-*")):
        if os.path.basename(path) not in accepted:
            os.remove(path)


def trim(spark, directory: str, limit: int) -> None:
    """Keep the first `limit` rows (files in name order: job by job): later files go, and the file that
    crosses the limit is cut by a Spark job (read, limit, written back), never read on the driver."""
    kept = 0
    for path in sorted(glob.glob(os.path.join(directory, "part-*.parquet"))):
        rows = pq.ParquetFile(path).metadata.num_rows
        if kept >= limit:
            os.remove(path)
        elif kept + rows > limit:
            cut = f"{path}.cut"
            spark.read.parquet(path).limit(limit - kept).coalesce(1).write.parquet(cut)
            (written,) = glob.glob(os.path.join(cut, "*.parquet"))
            os.replace(written, path)
            shutil.rmtree(cut)
        kept += rows
