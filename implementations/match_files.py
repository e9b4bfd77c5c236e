"""Matches as Arrow tables for Parquet files (`--output`): one int64 column per pattern vertex, named
after the query's attributes in its order, holding the graph's own vertex ids."""

from __future__ import annotations

import glob
import os
import shutil
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from harness.query import JoinSpec


def schema(spec: JoinSpec) -> pa.Schema:
    return pa.schema([(a, pa.int64()) for a in spec.query.attributes])


def columns_of(spec: JoinSpec) -> tuple[tuple[str, int], ...]:
    """(attribute, its position in the attribute order), in the query's order."""
    order = list(spec.attribute_order)
    return tuple((a, order.index(a)) for a in spec.query.attributes)


def table(spec: JoinSpec, ids: np.ndarray, rows: np.ndarray) -> pa.Table:
    """Rows of ranks in attribute order (n, m) as a table of original ids (`ids[rank]`) in the query's order."""
    return _id_table(columns_of(spec), ids, rows)


def _id_table(columns: tuple[tuple[str, int], ...], ids: np.ndarray, rows: np.ndarray) -> pa.Table:
    return pa.Table.from_arrays(
        [pa.array(np.asarray(ids[rows[:, at]], dtype=np.int64)) for _, at in columns],
        schema=pa.schema([(a, pa.int64()) for a, _ in columns]),
    )


class MatchSink(NamedTuple):
    """Where the tasks of a distributed listing write the matches they find (pickled into every task):
    one Parquet file per task attempt that found some, named by its job, stage, worker and attempt, so
    the driver keeps the attempts whose results it received (`accepted`) and removes the others."""

    directory: str
    ids: str  # a store file (.npy): original vertex id by rank
    columns: tuple[tuple[str, int], ...]  # (attribute, its position in the attribute order), in the query's order
    limit: int  # the most rows one task writes (the run's limit; unlimited: every match)

    @classmethod
    def of(cls, spec: JoinSpec, directory: str, ids: str, limit: int | None) -> MatchSink:
        return cls(directory, ids, columns_of(spec), limit or (1 << 62))

    def write(self, name: str, ranks: np.ndarray) -> None:
        """Rows of ranks (attribute order) as original ids in a Parquet file of their own, complete or absent."""
        from .distributed_index import mapped

        path = os.path.join(self.directory, name)
        os.makedirs(self.directory, exist_ok=True)
        pq.write_table(_id_table(self.columns, mapped(self.ids), ranks), f"{path}.{os.getpid()}.tmp")
        os.replace(f"{path}.{os.getpid()}.tmp", path)


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
