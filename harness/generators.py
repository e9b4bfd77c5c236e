"""Seeded synthetic graph generators as Spark SQL expressions.

Every random draw is a hash of (seed, edge index, draw number), so the edge multiset is the same
whatever the number of partitions."""
from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from .errors import DataError

_MASK53 = (1 << 53) - 1
# Odd multipliers give bijections on [0, 2^scale): they scatter hub ids away from 0 (as GAP does).
_SCRAMBLE_MUL = 0x2545F491
_SCRAMBLE_ADD = 0x9E3779B9


def uniform(seed: int, index: Column, draw: int) -> Column:
    """A uniform double in [0, 1) from the hash of (seed, index, draw)."""
    h = F.xxhash64(F.lit(seed), index, F.lit(draw))
    return h.bitwiseAND(F.lit(_MASK53)).cast("double") / float(1 << 53)


@dataclass(frozen=True)
class RmatParams:
    scale: int
    ef: int = 16
    a: float = 0.57
    b: float = 0.19
    c: float = 0.19
    seed: int = 1
    scramble: bool = True

    def validate(self) -> None:
        if not 1 <= self.scale <= 30:
            raise DataError(f"rmat: 'scale' must be in 1..30, got {self.scale}")
        if self.ef < 1:
            raise DataError(f"rmat: 'ef' must be at least 1, got {self.ef}")
        if min(self.a, self.b, self.c) < 0 or self.a + self.b + self.c > 1:
            raise DataError(f"rmat: need a, b, c >= 0 and a + b + c <= 1, got {self.a}, {self.b}, {self.c}")


def rmat(spark: SparkSession, p: RmatParams, partitions: int) -> DataFrame:
    """R-MAT (Chakrabarti et al.): ef * 2^scale directed edges, each placed by `scale` quadrant draws."""
    p.validate()
    index = F.col("id")
    src = F.lit(0).cast("bigint")
    dst = F.lit(0).cast("bigint")
    ab, abc = p.a + p.b, p.a + p.b + p.c
    for level in range(p.scale):
        u = uniform(p.seed, index, level)
        bit = F.lit(1 << level).cast("bigint")
        src = src + F.when(u >= ab, bit).otherwise(0)
        dst = dst + F.when(((u >= p.a) & (u < ab)) | (u >= abc), bit).otherwise(0)
    if p.scramble:
        mask = (1 << p.scale) - 1
        src = (src * _SCRAMBLE_MUL + _SCRAMBLE_ADD).bitwiseAND(F.lit(mask))
        dst = (dst * _SCRAMBLE_MUL + _SCRAMBLE_ADD).bitwiseAND(F.lit(mask))
    edges = p.ef * (1 << p.scale)
    return spark.range(0, edges, numPartitions=partitions).select(src.alias("src"), dst.alias("dst"))


GENERATORS = {"rmat": (RmatParams, rmat)}


def parse_spec(spec: str) -> tuple[str, object]:
    """`rmat:scale=14,ef=16,a=0.57,b=0.19,c=0.19,seed=1` -> ("rmat", RmatParams(...))."""
    kind, _, body = spec.partition(":")
    if kind not in GENERATORS:
        raise DataError(f"unknown generator '{kind}' (known: {', '.join(GENERATORS)})")
    cls, _ = GENERATORS[kind]
    fields = cls.__dataclass_fields__
    values: dict[str, object] = {}
    for item in filter(None, (s.strip() for s in body.split(","))):
        key, eq, raw = item.partition("=")
        if not eq or key not in fields:
            raise DataError(f"generator '{spec}': unknown parameter '{key}' (known: {', '.join(fields)})")
        typ = fields[key].type
        try:
            if typ in ("bool", bool):
                values[key] = raw.lower() in ("1", "true", "yes")
            elif typ in ("int", int):
                values[key] = int(raw)
            else:
                values[key] = float(raw)
        except ValueError:
            raise DataError(f"generator '{spec}': parameter '{key}' has bad value {raw!r}") from None
    if "scale" not in values:
        raise DataError(f"generator '{spec}': parameter 'scale' is required")
    params = cls(**values)
    params.validate()
    return kind, params


def canonical_spec(kind: str, params: object) -> str:
    fields = params.__dataclass_fields__
    return kind + ":" + ",".join(f"{k}={getattr(params, k)}" for k in fields)


def generate(spark: SparkSession, kind: str, params: object, partitions: int) -> DataFrame:
    return GENERATORS[kind][1](spark, params, partitions)
