"""Spark SQL's xxhash64 (org.apache.spark.sql.catalyst.expressions.XXH64) in numpy, bit for bit: what
the canonical files' fingerprint sums and what the generators draw their randomness from, computed
without a Spark expression (which a long one, like R-MAT's 21 levels, leaves to the JVM's interpreter)."""

from __future__ import annotations

import numpy as np

_P1, _P2, _P3 = np.uint64(0x9E3779B185EBCA87), np.uint64(0xC2B2AE3D27D4EB4F), np.uint64(0x165667B19E3779F9)
_P4, _P5 = np.uint64(0x85EBCA77C2B2AE63), np.uint64(0x27D4EB2F165667C5)
SPARK_SEED = np.uint64(42)  # xxhash64's seed; each column's hash seeds the next
_INT = range(-(1 << 31), 1 << 31)  # F.lit of a Python int in this range is an IntegerType, hashed as 4 bytes


def hash_long(value: np.ndarray, seed: np.ndarray | np.uint64) -> np.ndarray:
    """XXH64.hashLong of uint64 `value` (a long's bits) under uint64 `seed`."""
    with np.errstate(over="ignore"):
        h = np.asarray(seed, np.uint64) + _P5 + np.uint64(8)
        h = h ^ (_rotl(value * _P2, 31) * _P1)
        h = _rotl(h, 27) * _P1 + _P4
        return _fmix(h)


def hash_int(value: int, seed: np.ndarray | np.uint64) -> np.ndarray:
    """XXH64.hashInt of the int `value` under uint64 `seed` (one, or an array of one per row)."""
    with np.errstate(over="ignore"):
        h = np.asarray(seed, np.uint64) + (_P5 + np.uint64(4))
        h = h ^ (np.uint64(value & 0xFFFFFFFF) * _P1)
        h = _rotl(h, 23) * _P2 + _P3
        return _fmix(h)


def hash_literal(value: int, seed: np.ndarray | np.uint64) -> np.ndarray:
    """The hash of `F.lit(value)` (an int, or a long outside the int range) under `seed`."""
    if value in _INT:
        return hash_int(value, seed)
    return hash_long(np.full(np.shape(seed), value, np.int64).view(np.uint64), seed)


def xxhash64_longs(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Spark SQL's xxhash64(src, dst) of int64 columns, as int64."""
    first = hash_long(src.astype(np.int64, copy=False).view(np.uint64), SPARK_SEED)
    return hash_long(dst.astype(np.int64, copy=False).view(np.uint64), first).view(np.int64)


def _fmix(h: np.ndarray) -> np.ndarray:
    h ^= h >> np.uint64(33)
    h *= _P2
    h ^= h >> np.uint64(29)
    h *= _P3
    h ^= h >> np.uint64(32)
    return h


def _rotl(x: np.ndarray, bits: int) -> np.ndarray:
    return (x << np.uint64(bits)) | (x >> np.uint64(64 - bits))
