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

from .errors import DataError

FORMATS = ("snap", "lg")
_MAX_ID_DIGITS = 18  # keeps every id inside a signed 64-bit integer
_LG_HEADER = re.compile(r"^\s*\d+\s*,\s*\d+\s*,\s*[ud]\b")


def is_gzip(path: Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(2) == b"\x1f\x8b"


def first_line(path: Path) -> str:
    opener = gzip.open if is_gzip(path) else open
    with opener(path, "rt", errors="replace") as fh:
        return fh.readline()


def detect_format(path: Path) -> str:
    name = path.name.lower()
    if name.endswith((".lg", ".jlg", ".lg.gz", ".jlg.gz")):
        return "lg"
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


def read_edges(spark: SparkSession, path: Path, fmt: str, scratch: Path) -> DataFrame:
    """Parse and validate the whole file; returns (src bigint, dst bigint), one row per edge line."""
    if not path.is_file():
        raise DataError(f"edge file {path}: not found")
    if fmt not in FORMATS:
        raise DataError(f"edge file {path}: unknown format '{fmt}' (expected one of {', '.join(FORMATS)})")
    lines = spark.read.text(spark_readable_path(path, scratch)).select(
        F.monotonically_increasing_id().alias("pos"), F.spark_partition_id().alias("part"), F.col("value")
    )
    text = F.regexp_replace(F.col("value"), r"^[ \t\r\n]+|[ \t\r\n]+$", "")
    if fmt == "snap":
        skip = (text == "") | text.startswith("#")
        fields = F.split(text, r"[ \t]+")
    else:
        skip = (text == "") | (F.col("pos") == 0)  # the `n,m,u|d,...` header
        fields = F.split(F.regexp_replace(text, r"[ \t]+", ""), ",")
    digits = rf"^[0-9]{{1,{_MAX_ID_DIGITS}}}$"
    ok = (F.size(fields) == 2) & fields[0].rlike(digits) & fields[1].rlike(digits)
    parsed = lines.select(
        "pos", "part", skip.alias("skip"), ok.alias("ok"),
        fields[0].alias("s"), fields[1].alias("d"),
    )
    bad = parsed.filter(~F.col("skip") & ~F.col("ok")).agg(F.min("pos").alias("pos")).first()
    if bad is not None and bad["pos"] is not None:
        _raise_bad_line(lines, path, bad["pos"])
    return parsed.filter(F.col("ok") & ~F.col("skip")).select(
        F.col("s").cast("bigint").alias("src"), F.col("d").cast("bigint").alias("dst")
    )


def _raise_bad_line(lines: DataFrame, path: Path, pos: int) -> None:
    part, index = pos >> 33, pos & ((1 << 33) - 1)
    before = lines.filter(F.col("part") < part).count()
    value = lines.filter(F.col("pos") == pos).first()["value"]
    raise DataError(f"{path}:{before + index + 1}: {_explain(value)}: {value.strip()[:80]!r}")


def _explain(line: str) -> str:
    fields = [f for f in re.split(r"[ \t,]+", line.strip()) if f]
    if len(fields) != 2:
        return f"malformed edge line (expected 2 fields, got {len(fields)})"
    for f in fields:
        if re.fullmatch(r"-\d+", f):
            return f"negative vertex id {f}"
        if not re.fullmatch(r"\d+", f):
            return f"non-integer vertex id {f!r}"
    return f"vertex id out of range (more than {_MAX_ID_DIGITS} digits)"
