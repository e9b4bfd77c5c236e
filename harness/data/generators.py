"""Seeded synthetic graph generators as Spark SQL expressions (R-MAT in numpy, the same draws).

Every random draw is a hash of (seed, edge index, draw number), so the edge multiset is the same
whatever the number of partitions."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from harness.core import specs
from harness.core.errors import DataError
from harness.data import spark_hash

_MASK53 = (1 << 53) - 1
# Odd multipliers give bijections on [0, 2^scale): they scatter hub ids away from 0 (as GAP does).
_SCRAMBLE_MUL = 0x2545F491
_SCRAMBLE_ADD = 0x9E3779B9


def uniform(seed: int, index: Column, draw: int) -> Column:
    """A uniform double in [0, 1) from the hash of (seed, index, draw)."""
    h = F.xxhash64(F.lit(seed), index, F.lit(draw))
    return h.bitwiseAND(F.lit(_MASK53)).cast("double") / float(1 << 53)


def _check_labels(kind: str, labels: int | None) -> None:
    if labels is not None and labels < 1:
        raise DataError(f"{kind}: 'labels' must be at least 1, got {labels}")


def label_count(params: object) -> int | None:
    """K of a generator's `labels=K` option, None when it draws no labels."""
    return getattr(params, "labels", None)


@dataclass(frozen=True)
class RmatParams:
    scale: int
    ef: int = 16
    a: float = 0.57
    b: float = 0.19
    c: float = 0.19
    seed: int = 1
    scramble: bool = True
    labels: int | None = None  # K: vertex labels 0..K-1 (harness/data/labels.py)

    def validate(self) -> None:
        _check_labels("rmat", self.labels)
        if not 1 <= self.scale <= 30:
            raise DataError(f"rmat: 'scale' must be in 1..30, got {self.scale}")
        if self.ef < 1:
            raise DataError(f"rmat: 'ef' must be at least 1, got {self.ef}")
        if min(self.a, self.b, self.c) < 0 or self.a + self.b + self.c > 1:
            raise DataError(f"rmat: need a, b, c >= 0 and a + b + c <= 1, got {self.a}, {self.b}, {self.c}")


def rmat(spark: SparkSession, p: RmatParams, partitions: int) -> DataFrame:
    """R-MAT (Chakrabarti et al.): ef * 2^scale directed edges, each placed by `scale` quadrant draws,
    computed in numpy (`rmat_edges`) in Python tasks: as one Spark expression its 21 levels make a
    method too large for the JVM to compile, and R-MAT 21 took minutes in the interpreter."""
    p.validate()
    edges = p.ef * (1 << p.scale)

    def place(batches):
        for batch in batches:
            src, dst = rmat_edges(p, batch.column(0).to_numpy())
            yield pa.RecordBatch.from_arrays([pa.array(src), pa.array(dst)], names=["src", "dst"])

    return spark.range(0, edges, numPartitions=partitions).mapInArrow(place, "src bigint, dst bigint")


def rmat_edges(p: RmatParams, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The edges numbered `index` (int64): the same as Spark's `uniform` draws placing each, one per
    level (level `l` sets bit `l` of src when u >= a + b, of dst when a <= u < a + b or u >= a + b + c),
    then the scramble, all in int64 as Spark's bigint arithmetic (no product here reaches 2^63)."""
    ab, abc = p.a + p.b, p.a + p.b + p.c
    row_seed = spark_hash.hash_long(
        index.astype(np.int64, copy=False).view(np.uint64), spark_hash.hash_literal(p.seed, spark_hash.SPARK_SEED)
    )
    src = np.zeros(len(index), np.int64)
    dst = np.zeros(len(index), np.int64)
    for level in range(p.scale):
        u = (spark_hash.hash_literal(level, row_seed) & np.uint64(_MASK53)).astype(np.float64) / float(1 << 53)
        bit = np.int64(1 << level)
        src += np.where(u >= ab, bit, 0)
        dst += np.where(((u >= p.a) & (u < ab)) | (u >= abc), bit, 0)
    if p.scramble:
        mask = np.int64((1 << p.scale) - 1)
        src = (src * _SCRAMBLE_MUL + _SCRAMBLE_ADD) & mask
        dst = (dst * _SCRAMBLE_MUL + _SCRAMBLE_ADD) & mask
    return src, dst


def _affine_scramble(v: Column, n: int, seed: int) -> Column:
    """A bijection on [0, n): v -> (v * k + c) mod n with k coprime to n."""
    k = _SCRAMBLE_MUL
    while math.gcd(k, n) != 1:
        k += 2
    return (v * k + (seed * _SCRAMBLE_ADD) % n) % n


def _uniform_vertex(seed: int, index: Column, draw: int, n: int) -> Column:
    return F.least(F.floor(uniform(seed, index, draw) * n).cast("bigint"), F.lit(n - 1).cast("bigint"))


@dataclass(frozen=True)
class ErParams:
    """Erdős–Rényi G(n, m) with replacement: the unskewed control."""

    n: int
    m: int
    seed: int = 1

    def validate(self) -> None:
        if self.n < 1 or self.m < 0:
            raise DataError(f"er: need n >= 1 and m >= 0, got n={self.n}, m={self.m}")


def erdos_renyi(spark: SparkSession, p: ErParams, partitions: int) -> DataFrame:
    p.validate()
    i = F.col("id")
    return spark.range(0, p.m, numPartitions=partitions).select(
        _uniform_vertex(p.seed, i, 0, p.n).alias("src"), _uniform_vertex(p.seed, i, 1, p.n).alias("dst")
    )


@dataclass(frozen=True)
class ChungLuParams:
    """Chung–Lu power law: vertex i has weight (i + offset)^(-1/(gamma-1)), so degrees follow a
    power law with exponent gamma; `offset` caps the largest expected degree."""

    n: int
    m: int
    gamma: float = 2.5
    offset: float = 1.0
    seed: int = 1

    def validate(self) -> None:
        if self.n < 1 or self.m < 0:
            raise DataError(f"chunglu: need n >= 1 and m >= 0, got n={self.n}, m={self.m}")
        if self.gamma <= 2:
            raise DataError(f"chunglu: 'gamma' must be greater than 2, got {self.gamma}")
        if self.offset <= 0:
            raise DataError(f"chunglu: 'offset' must be positive, got {self.offset}")


def chung_lu(spark: SparkSession, p: ChungLuParams, partitions: int) -> DataFrame:
    """Each endpoint is drawn by inverting the continuous CDF of the weights (closed form)."""
    p.validate()
    e = 1.0 - 1.0 / (p.gamma - 1.0)  # in (0, 1) because gamma > 2
    lo, hi = p.offset**e, (p.n + p.offset) ** e
    i = F.col("id")

    def endpoint(draw: int) -> Column:
        x = F.pow(F.lit(lo) + uniform(p.seed, i, draw) * (hi - lo), 1.0 / e) - p.offset
        rank = F.least(F.greatest(F.floor(x).cast("bigint"), F.lit(0).cast("bigint")), F.lit(p.n - 1).cast("bigint"))
        return _affine_scramble(rank, p.n, p.seed)

    return spark.range(0, p.m, numPartitions=partitions).select(endpoint(0).alias("src"), endpoint(1).alias("dst"))


@dataclass(frozen=True)
class HubsParams:
    """Adversarial skew: `hubs` vertices each adjacent to `fraction` of all n vertices, on top of
    m Erdős–Rényi background edges (the case where BiGJoin's balance fails)."""

    n: int
    m: int
    hubs: int = 4
    fraction: float = 0.5
    seed: int = 1
    labels: int | None = None  # K: vertex labels 0..K-1 (harness/data/labels.py)

    def validate(self) -> None:
        _check_labels("hubs", self.labels)
        if self.n < 2 or self.m < 0 or not 1 <= self.hubs <= self.n or not 0 < self.fraction <= 1:
            raise DataError(f"hubs: need n >= 2, m >= 0, 1 <= hubs <= n, 0 < fraction <= 1; got {self}")


def hub_family(spark: SparkSession, p: HubsParams, partitions: int) -> DataFrame:
    p.validate()
    per_hub = int(p.fraction * p.n)
    hub_rows = p.hubs * per_hub
    i = F.col("id")
    hub = F.floor(i / per_hub).cast("bigint") if per_hub else F.lit(0).cast("bigint")
    spoke = (hub * 7919 + (i % max(per_hub, 1)) * 2 + 1) % p.n  # distinct while fraction <= 1/2
    src = F.when(i < hub_rows, hub).otherwise(_uniform_vertex(p.seed, i, 0, p.n))
    dst = F.when(i < hub_rows, spoke).otherwise(_uniform_vertex(p.seed, i, 1, p.n))
    return spark.range(0, hub_rows + p.m, numPartitions=partitions).select(
        _affine_scramble(src, p.n, p.seed).alias("src"), _affine_scramble(dst, p.n, p.seed).alias("dst")
    )


GENERATORS: dict[str, tuple[type, Callable[[SparkSession, Any, int], DataFrame]]] = {
    "rmat": (RmatParams, rmat),
    "er": (ErParams, erdos_renyi),
    "chunglu": (ChungLuParams, chung_lu),
    "hubs": (HubsParams, hub_family),
}


def parse_spec(spec: str) -> tuple[str, object]:
    """`rmat:scale=14,ef=16,a=0.57,b=0.19,c=0.19,seed=1` -> ("rmat", RmatParams(...))."""
    kind, _, body = spec.partition(":")
    if kind not in GENERATORS:
        raise DataError(f"unknown generator '{kind}' (known: {', '.join(GENERATORS)})")
    return kind, specs.parse(GENERATORS[kind][0], body, f"generator '{spec}'")


def canonical_spec(kind: str, params: object) -> str:
    return kind + ":" + specs.to_text(params)


def generate(spark: SparkSession, kind: str, params: object, partitions: int) -> DataFrame:
    return GENERATORS[kind][1](spark, params, partitions)
