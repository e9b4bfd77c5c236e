"""Read edge-list files (SNAP text and `lg`, plain or gzip) into a Spark DataFrame (src, dst),
rejecting the first malformed line with its file and line number."""

from __future__ import annotations

import gzip
import hashlib
import os
import re
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from harness.core.errors import DataError

# Text layouts: field separator, what the first line may be, and whether the columns are (dst, src).
_TEXT = {
    "snap": (r"[ \t]+", None, False),
    "lg": (",", "lg-header", False),  # first line `n,m,u|d,...`, 1-based ids
    "csv": (",", "optional-names", False),
    "tsv": ("\t", "optional-names", False),
    "twitter_rv": (r"[ \t]+", None, True),  # Kwak et al.: `user follower`, i.e. follower -> user
}
FORMATS = (*_TEXT, "parquet")
ID_RANGE = "[-2^63, 2^63-1]"  # vertex ids are signed 64-bit integers: every one of them is accepted
_LG_HEADER = re.compile(r"^\s*\d+\s*,\s*\d+\s*,\s*[ud]\b")


def is_gzip(path: Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(2) == b"\x1f\x8b"


def first_line(path: Path) -> str:
    opener = gzip.open if is_gzip(path) else open
    with opener(path, "rt", errors="replace") as fh:
        return fh.readline()


def detect_format(path: Path) -> str:
    name = path.name.lower().removesuffix(".gz")
    if path.is_dir() or name.endswith(".parquet"):
        return "parquet"
    if name.endswith((".lg", ".jlg")):
        return "lg"
    if name.startswith("twitter_rv"):
        return "twitter_rv"
    if name.endswith(".csv"):
        return "csv"
    if name.endswith(".tsv"):
        return "tsv"
    return "lg" if _LG_HEADER.match(first_line(path)) else "snap"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def spark_readable_path(path: Path, scratch: Path) -> str:
    """Hadoop picks the codec from the file name, so a gzip file without `.gz` gets a `.gz` link."""
    if is_gzip(path) and not path.name.endswith(".gz"):
        scratch.mkdir(parents=True, exist_ok=True)
        link = scratch / (hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:16] + ".gz")
        if not link.exists():
            tmp = link.with_suffix(f".tmp{os.getpid()}")
            tmp.unlink(missing_ok=True)
            tmp.symlink_to(path.resolve())
            os.replace(tmp, link)
        return str(link)
    return str(path)


ID_PATTERN = r"[+-]?[0-9]+"  # and in ID_RANGE, checked by a cast (try_cast: null when it does not fit)
LABEL_PATTERN = r"[0-9]{1,18}"  # a vertex label (harness/data/labels.py): a non-negative integer


def read_edges(spark: SparkSession, path: Path, fmt: str, scratch: Path) -> DataFrame:
    """Parse and validate the whole file; returns (src bigint, dst bigint), one row per edge line."""
    if not path.exists():
        raise DataError(f"edge file {path}: not found")
    if fmt not in FORMATS:
        raise DataError(f"edge file {path}: unknown format '{fmt}' (expected one of {', '.join(FORMATS)})")
    if fmt == "parquet":
        return _read_parquet(spark, path)
    separator, first, swapped = _TEXT[fmt]
    fields = read_fields(spark, path, [ID_PATTERN, ID_PATTERN], separator, first, scratch)
    src, dst = ("f1", "f0") if swapped else ("f0", "f1")
    return fields.select(F.col(src).cast("bigint").alias("src"), F.col(dst).cast("bigint").alias("dst"))


def read_fields(
    spark: SparkSession,
    path: Path,
    patterns: list[str],
    separator: str = r"[ \t]+",
    first: str | None = None,
    scratch: Path | None = None,
    position: bool = False,
) -> DataFrame:
    """Lines of exactly len(patterns) fields, each matching its pattern, as string columns f0, f1, ...
    (plus `pos`, increasing in file order, if `position`). Blank and `#` lines are skipped. The first
    bad line raises DataError naming file and line."""
    lines = spark.read.text(spark_readable_path(path, scratch or path.parent)).select(
        F.monotonically_increasing_id().alias("pos"), F.spark_partition_id().alias("part"), F.col("value")
    )
    text = F.regexp_replace(F.col("value"), r"^[ \t\r\n]+|[ \t\r\n]+$", "")
    skip = (text == "") | text.startswith("#")
    if first == "lg-header":
        skip = skip | (F.col("pos") == 0)
    elif first == "optional-names":
        skip = skip | ((F.col("pos") == 0) & text.rlike(r'^["A-Za-z_]'))
    if separator == ",":
        text = F.regexp_replace(text, r"[ \t]+", "")
    fields = F.split(text, separator)
    field = [F.get(fields, i) for i in range(len(patterns))]  # null, not an error, past the end
    ok = F.size(fields) == len(patterns)
    for f, pattern in zip(field, patterns):
        ok = ok & F.coalesce(f.rlike(f"^(?:{pattern})$"), F.lit(False))
        if pattern == ID_PATTERN:
            ok = ok & f.try_cast("bigint").isNotNull()
    parsed = lines.select("pos", "part", skip.alias("skip"), ok.alias("ok"), *[f.alias(f"f{i}") for i, f in enumerate(field)])
    bad = parsed.filter(~F.col("skip") & ~F.col("ok")).agg(F.min("pos").alias("pos")).first()
    if bad is not None and bad["pos"] is not None:
        _raise_bad_line(lines, path, bad["pos"], patterns)
    return parsed.filter(F.col("ok") & ~F.col("skip")).select(
        *(["pos"] if position else []), *[f"f{i}" for i in range(len(patterns))]
    )


def _read_parquet(spark: SparkSession, path: Path) -> DataFrame:
    """Columns `src` and `dst`, or else the first two integer columns."""
    df = spark.read.parquet(str(path))
    integer = [f.name for f in df.schema.fields if f.dataType.typeName() in ("integer", "long", "short", "byte")]
    cols = ["src", "dst"] if {"src", "dst"} <= set(df.columns) else integer[:2]
    if len(cols) < 2:
        raise DataError(f"parquet {path}: needs columns src and dst or two integer columns, has {df.columns}")
    edges = df.select(F.col(cols[0]).cast("bigint").alias("src"), F.col(cols[1]).cast("bigint").alias("dst"))
    bad = edges.filter(F.col("src").isNull() | F.col("dst").isNull()).first()
    if bad is not None:
        raise DataError(f"parquet {path}: columns {cols[0]}, {cols[1]}: null vertex id in row {tuple(bad)}")
    return edges


def _raise_bad_line(lines: DataFrame, path: Path, pos: int, patterns: list[str]) -> None:
    part, index = pos >> 33, pos & ((1 << 33) - 1)
    before = lines.filter(F.col("part") < part).count()
    row = lines.filter(F.col("pos") == pos).first()
    assert row is not None  # pos is the position of a line in `lines`
    value = row["value"]
    raise DataError(f"{path}:{before + index + 1}: {_explain(value, patterns)}: {value.strip()[:80]!r}")


def _explain(line: str, patterns: list[str]) -> str:
    fields = [f for f in re.split(r"[ \t,]+", line.strip()) if f]
    if len(fields) != len(patterns):
        what = "edge line" if patterns == [ID_PATTERN, ID_PATTERN] else "label line" if LABEL_PATTERN in patterns else "line"
        return f"malformed {what} (expected {len(patterns)} fields, got {len(fields)})"
    for f, pattern in zip(fields, patterns):
        if pattern == LABEL_PATTERN:
            if not re.fullmatch(LABEL_PATTERN, f):
                return f"non-integer label {f!r}" if not re.fullmatch(ID_PATTERN, f) else f"label {f} is not in 0..10^18-1"
        elif pattern != ID_PATTERN:
            if not re.fullmatch(pattern, f):
                return f"bad field {f!r} (expected {pattern})"
        elif not re.fullmatch(ID_PATTERN, f):
            return f"non-integer vertex id {f!r}"
        elif not -(2**63) <= int(f) <= 2**63 - 1:
            return f"vertex id {f} out of range {ID_RANGE}"
    return "malformed line"
