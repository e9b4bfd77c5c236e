"""Update streams for dynamic workloads: an initial graph plus batches of signed edge updates
(src, dst, diff = +1 | -1, batch), generated from a dataset or read from a file."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from . import edgelist, specs
from .errors import DataError
from .generators import uniform


@dataclass(frozen=True)
class StreamSpec:
    """`holdback` of the edges is left out of the initial graph and inserted later, `batch`
    updates at a time for `batches` batches; `deletes` of each batch delete edges that exist."""

    holdback: float = 0.1
    batch: int = 1000
    batches: int = 10
    deletes: float = 0.0
    seed: int = 1

    def validate(self) -> None:
        if not 0 <= self.holdback < 1 or not 0 <= self.deletes <= 1:
            raise DataError(f"updates: need 0 <= holdback < 1 and 0 <= deletes <= 1, got {self}")
        if self.batch < 1 or self.batches < 1:
            raise DataError(f"updates: 'batch' and 'batches' must be at least 1, got {self}")

    @property
    def deletes_per_batch(self) -> int:
        return round(self.batch * self.deletes)

    @property
    def inserts_per_batch(self) -> int:
        return self.batch - self.deletes_per_batch


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
    inserts = (held.withColumn("rank", F.row_number().over(by_order) - 1)
               .filter(F.col("rank") < spec.inserts_per_batch * spec.batches)
               .select("src", "dst", F.lit(1).alias("diff"), F.floor(F.col("rank") / spec.inserts_per_batch).cast("int").alias("batch")))
    parts = [inserts]
    if spec.deletes_per_batch:
        deletes = (initial.withColumn("rank", F.row_number().over(by_order) - 1)
                   .filter(F.col("rank") < spec.deletes_per_batch * spec.batches)
                   .select("src", "dst", F.lit(-1).alias("diff"), F.floor(F.col("rank") / spec.deletes_per_batch).cast("int").alias("batch")))
        parts.append(deletes)
    updates = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])
    return initial.select("src", "dst"), updates


def read_stream(spark: SparkSession, path: Path) -> DataFrame:
    """A whitespace-separated file of `src dst ±1 batch` lines; bad lines name file and line."""
    if not path.is_file():
        raise DataError(f"update file {path}: not found")
    rows = edgelist.read_fields(spark, path, [edgelist.ID_PATTERN, edgelist.ID_PATTERN, r"[+-]?1", r"[0-9]{1,9}"])
    return rows.select(F.col("f0").cast("bigint").alias("src"), F.col("f1").cast("bigint").alias("dst"),
                       F.regexp_replace("f2", r"^\+", "").cast("int").alias("diff"), F.col("f3").cast("int").alias("batch"))


def write_stream(updates: DataFrame, path: Path) -> None:
    """The file form read by `read_stream` (one local text file, ordered by batch)."""
    rows = updates.orderBy("batch", "diff", "src", "dst").collect()
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as fh:
        fh.write("# src dst diff batch\n")
        fh.writelines(f"{r['src']} {r['dst']} {r['diff']:+d} {r['batch']}\n" for r in rows)
    tmp.replace(path)
