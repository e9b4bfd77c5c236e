"""Update streams for dynamic workloads: an initial graph plus batches of signed edge updates
(src, dst, diff = +1 | -1, batch), generated from a dataset or read from a file. Within a batch,
updates apply in order (`seq`: the file's line order) to a set of directed edges."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from harness.core import specs
from harness.core.errors import DataError
from harness.data import edgelist
from harness.data.generators import uniform


@dataclass(frozen=True)
class StreamSpec:
    """`holdback` of the edges is left out of the initial graph and inserted later, `batch`
    updates at a time for `batches` batches (or batches of `sizes`, e.g. 1000/10000/100000);
    `deletes` of each batch delete edges that exist."""

    holdback: float = 0.1
    batch: int = 1000
    batches: int = 10
    deletes: float = 0.0
    seed: int = 1
    sizes: str = ""

    def validate(self) -> None:
        if not 0 <= self.holdback < 1 or not 0 <= self.deletes <= 1:
            raise DataError(f"updates: need 0 <= holdback < 1 and 0 <= deletes <= 1, got {self}")
        if self.batch < 1 or self.batches < 1:
            raise DataError(f"updates: 'batch' and 'batches' must be at least 1, got {self}")
        if self.sizes and not all(part.isdigit() and int(part) >= 1 for part in self.sizes.split("/")):
            raise DataError(f"updates: 'sizes' must be positive integers separated by '/', got {self.sizes!r}")

    @property
    def batch_sizes(self) -> list[int]:
        return [int(x) for x in self.sizes.split("/")] if self.sizes else [self.batch] * self.batches

    @property
    def deletes_per_batch(self) -> list[int]:
        return [round(size * self.deletes) for size in self.batch_sizes]

    @property
    def inserts_per_batch(self) -> list[int]:
        return [size - d for size, d in zip(self.batch_sizes, self.deletes_per_batch)]


def parse_spec(text: str | dict) -> StreamSpec:
    """`holdback=0.1,batch=1000,batches=5,deletes=0.2,seed=3` or the same keys as a YAML mapping."""
    return specs.parse(StreamSpec, text, f"updates '{text}'", noun="key")


def make_stream(edges: DataFrame, spec: StreamSpec) -> tuple[DataFrame, DataFrame]:
    """(initial edges, updates) from canonical edges (src, dst). Every choice is a hash of the edge
    and the seed, so the stream does not depend on partitioning."""
    spec.validate()
    key = F.xxhash64("src", "dst")
    ranked = edges.select("src", "dst", uniform(spec.seed, key, 0).alias("u"), uniform(spec.seed, key, 1).alias("v"))
    held = ranked.filter(F.col("u") < spec.holdback)
    initial = ranked.filter(F.col("u") >= spec.holdback)
    by_order = Window.orderBy("v", "src", "dst")
    inserts = (
        held.withColumn("rank", F.row_number().over(by_order) - 1)
        .filter(F.col("rank") < sum(spec.inserts_per_batch))
        .select(
            "src",
            "dst",
            F.lit(1).alias("diff"),
            _batch_of("rank", spec.inserts_per_batch),
            F.col("rank").cast("long").alias("seq"),
        )
    )
    parts = [inserts]
    if sum(spec.deletes_per_batch):
        deletes = (
            initial.withColumn("rank", F.row_number().over(by_order) - 1)
            .filter(F.col("rank") < sum(spec.deletes_per_batch))
            .select(
                "src",
                "dst",
                F.lit(-1).alias("diff"),
                _batch_of("rank", spec.deletes_per_batch),
                (F.col("rank") + F.lit(1 << 40)).cast("long").alias("seq"),
            )
        )
        parts.append(deletes)
    updates = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])
    return initial.select("src", "dst"), updates


def _batch_of(rank: str, counts: list[int]):
    """The batch of the rank-th insert (or delete) when batch i takes counts[i] of them."""
    out: Column | None = None
    end = 0
    for i, n in enumerate(counts):
        end += n
        out = F.when(F.col(rank) < end, i) if out is None else out.when(F.col(rank) < end, i)
    assert out is not None  # counts is never empty
    return out.otherwise(len(counts)).cast("int").alias("batch")


def read_stream(spark: SparkSession, path: Path) -> DataFrame:
    """A whitespace-separated file of `src dst ±1 batch` lines; bad lines name file and line."""
    if not path.is_file():
        raise DataError(f"update file {path}: not found")
    rows = edgelist.read_fields(spark, path, [edgelist.ID_PATTERN, edgelist.ID_PATTERN, r"[+-]?1", r"[0-9]{1,9}"], position=True)
    return rows.select(
        F.col("f0").cast("bigint").alias("src"),
        F.col("f1").cast("bigint").alias("dst"),
        F.regexp_replace("f2", r"^\+", "").cast("int").alias("diff"),
        F.col("f3").cast("int").alias("batch"),
        F.col("pos").cast("long").alias("seq"),
    )


def write_stream(updates: DataFrame, path: Path) -> None:
    """The file form read by `read_stream` (one local text file, ordered by batch)."""
    rows = updates.orderBy("batch", "seq").collect()
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as fh:
        fh.write("# src dst diff batch\n")
        fh.writelines(f"{r['src']} {r['dst']} {r['diff']:+d} {r['batch']}\n" for r in rows)
    tmp.replace(path)


def insert_all(edges: DataFrame, batches: int) -> DataFrame:
    """Every edge as an insert, spread over `batches` batches by a hash of the edge."""
    return edges.select(
        "src",
        "dst",
        F.lit(1).alias("diff"),
        F.pmod(F.xxhash64("src", "dst"), F.lit(batches)).cast("int").alias("batch"),
        F.lit(0).cast("long").alias("seq"),
    )


@dataclass
class UpdateStream:
    """The initial directed edge set and the update batches of a dynamic run, both in Parquet; the
    driver also holds the updates (the stream enters there, as from a file or a queue)."""

    source: str  # the spec or file it came from
    initial: DataFrame  # (src, dst): a set of directed edges
    updates: DataFrame  # (src, dst, diff, batch, seq)
    batches: list[int]  # batch ids in order
    initial_path: Path | None = None
    updates_path: Path | None = None
    local: Any = None  # pyarrow Table of `updates`, ordered by (batch, seq)

    @classmethod
    def of(cls, source: str, initial: DataFrame, updates: DataFrame, **paths) -> UpdateStream:
        local = updates.select("src", "dst", "diff", "batch", "seq").orderBy("batch", "seq").toArrow()
        batches = sorted(set(local.column("batch").to_pylist()))
        return cls(source, initial, updates, batches, local=local, **paths)

    def batch(self, batch: int):
        """One batch as a pyarrow Table (src, dst, diff, batch, seq), in order."""
        import pyarrow.compute as pc

        return self.local.filter(pc.equal(self.local.column("batch"), batch))

    def sizes(self) -> dict[int, int]:
        from collections import Counter

        return dict(Counter(self.local.column("batch").to_pylist()))


def load_stream(spark: SparkSession, text: str, directed_edges: DataFrame, workdir: Path) -> UpdateStream:
    """`text` is a stream spec (`holdback=0.1,batch=1000,...`, applied to the dataset's directed edges)
    or the path of an update file (the whole dataset is the initial graph). Both sides are written to
    `workdir` as Parquet, so the implementation and the reference read the same rows."""
    if "=" in text:
        initial, updates = make_stream(directed_edges, parse_spec(text))
    else:
        initial, updates = directed_edges, read_stream(spark, Path(text))
    workdir.mkdir(parents=True, exist_ok=True)
    initial.select("src", "dst").write.parquet(str(workdir / "initial.parquet"))
    updates.select("src", "dst", "diff", "batch", "seq").write.parquet(str(workdir / "updates.parquet"))
    return UpdateStream.of(
        text,
        spark.read.parquet(str(workdir / "initial.parquet")),
        spark.read.parquet(str(workdir / "updates.parquet")),
        initial_path=workdir / "initial.parquet",
        updates_path=workdir / "updates.parquet",
    )
