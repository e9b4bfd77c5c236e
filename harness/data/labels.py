"""Vertex labels: a label file (text, one `vertex label` per line, `#` comments and blank lines skipped
as in edge lists; or Parquet with integer columns `vertex` and `label`), or the labels a generator
draws (`labels=K`: 0..K-1 from a seeded hash of the vertex id, so the same whatever the partitioning).

A label is a non-negative integer. A vertex the table does not list has no label: it matches no
labelled pattern vertex (and every unlabelled one). A vertex listed twice is an error."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from harness.core.errors import DataError
from harness.data import edgelist

LABEL_SALT = 0x6C6162656C73  # "labels": the hash that draws a label is not the one that drew an edge


class LabelArrays(NamedTuple):
    """The label table on the driver: `vertices` ascending, `labels[i]` the label of `vertices[i]`."""

    vertices: np.ndarray  # int64
    labels: np.ndarray  # int64


def read_label_file(spark, path: Path, scratch: Path) -> DataFrame:
    """(vertex bigint, label bigint), one row per labelled vertex; a bad line or row is a DataError (a
    missing file is datasets.load's, before it hashes the file)."""
    if edgelist.detect_format(path) == "parquet":
        table = _read_parquet(spark, path)
    else:
        fields = edgelist.read_fields(spark, path, [edgelist.ID_PATTERN, edgelist.LABEL_PATTERN], scratch=scratch)
        table = fields.select(F.col("f0").cast("bigint").alias("vertex"), F.col("f1").cast("bigint").alias("label"))
    twice = table.groupBy("vertex").count().filter(F.col("count") > 1).first()
    if twice is not None:
        raise DataError(f"label file {path}: vertex {twice['vertex']} is listed {twice['count']} times")
    return table


def _read_parquet(spark, path: Path) -> DataFrame:
    df = spark.read.parquet(str(path))
    integer = {f.name for f in df.schema.fields if f.dataType.typeName() in ("integer", "long", "short", "byte")}
    if not {"vertex", "label"} <= integer:
        raise DataError(f"label file {path}: needs integer columns vertex and label, has {df.columns}")
    table = df.select(F.col("vertex").cast("bigint"), F.col("label").cast("bigint"))
    bad = table.filter(F.col("vertex").isNull() | F.col("label").isNull() | (F.col("label") < 0)).first()
    if bad is not None:
        raise DataError(f"label file {path}: row {tuple(bad)}: a null vertex or label, or a negative label")
    return table


def hashed_labels(edges: DataFrame, k: int, seed: int) -> DataFrame:
    """Every vertex of the edge relation with label xxhash64(seed, salt, vertex) mod k."""
    vertices = edges.select(F.col("src").alias("vertex")).union(edges.select(F.col("dst"))).distinct()
    return vertices.select("vertex", F.pmod(F.xxhash64(F.lit(seed), F.lit(LABEL_SALT), F.col("vertex")), F.lit(k)).alias("label"))


def read_arrays(parquet: Path) -> LabelArrays:
    """The label table's Parquet as arrays sorted by vertex."""
    import pyarrow.parquet as pq

    table = pq.read_table(parquet, columns=["vertex", "label"])
    vertices = table.column("vertex").to_numpy().astype(np.int64, copy=False)
    labels = table.column("label").to_numpy().astype(np.int64, copy=False)
    order = np.argsort(vertices, kind="stable")
    return LabelArrays(vertices[order], labels[order])
