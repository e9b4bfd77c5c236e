"""Matches listed, not only counted (`--output PATH`, `--limit N`): the checks before Spark starts, the
staging directory the implementation writes into, and the written file's own row count.

The implementation writes Parquet into a staging directory beside PATH (`.NAME.part-<run id>`); only a
run that finished its listing is moved to PATH, so a failed or refused run leaves no partial file."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import NamedTuple

from harness.core.errors import DataError, ExecutionError


class Listing(NamedTuple):
    """What a run lists: where its matches go (None: counted only) and after how many it stops."""

    output: Path | None
    limit: int | None


def check(run_params: dict, impl_cls, census: bool) -> Listing | None:
    """The run's listing, checked (None: a plain count): a one-line DataError for a limit below 1, an
    output that exists and is not empty, a census or an update stream, an implementation that cannot list."""
    output, limit = run_params.get("output"), run_params.get("limit")
    if output is None and limit is None:
        return None
    flag = "--output" if output is not None else "--limit"
    if limit is not None and limit < 1:
        raise DataError(f"--limit: stops after N matches, N at least 1, got {limit}")
    if census:
        raise DataError(f"{flag}: a motif census counts shapes; it lists no matches")
    if run_params.get("updates") is not None:
        raise DataError(f"{flag}: a dynamic run (--updates) keeps a count current; it lists no matches")
    if not impl_cls.writes_matches:
        from implementations.base import writers

        raise DataError(f"{flag}: {impl_cls.name} does not list its matches ({writers()})")
    path = None
    if output is not None:
        path = Path(output).expanduser().absolute()
        if path.exists() and not (path.is_dir() and not any(path.iterdir())):
            raise DataError(f"--output {output}: exists and is not an empty directory")
    return Listing(path, limit)


def staging_dir(listing: Listing, run_id: str) -> Path | None:
    """The directory the implementation writes into (not yet created: Spark creates it), beside the output."""
    if listing.output is None:
        return None
    listing.output.parent.mkdir(parents=True, exist_ok=True)
    return listing.output.with_name(f".{listing.output.name}.part-{run_id}")


def written_rows(directory: Path) -> int:
    """The rows of every Parquet file in `directory`, read from their footers (not the rows themselves)."""
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(f).metadata.num_rows for f in sorted(directory.rglob("*.parquet")))


def publish(staging: Path, listing: Listing, count: int, columns: list[str]) -> dict:
    """Move a finished listing into place once its files hold exactly `count` rows; the record's `output`."""
    assert listing.output is not None
    staging.mkdir(exist_ok=True)  # a run that found no match may have written no file
    rows = written_rows(staging)
    if rows != count:
        raise ExecutionError(f"--output: the files hold {rows:,} rows, the run counted {count:,}")
    if listing.output.exists():
        listing.output.rmdir()  # empty (checked before the run); a non-empty one makes rmdir fail, not overwrite
    staging.rename(listing.output)
    return {"path": str(listing.output), "format": "parquet", "rows": rows, "columns": columns}


def discard(staging: Path | None) -> None:
    if staging is not None:
        shutil.rmtree(staging, ignore_errors=True)


def read_back(path: str, limit: int) -> list[tuple]:
    """Up to `limit` rows of a written listing as tuples (to compare them with an oracle's matches)."""
    import pyarrow.dataset as ds

    table = ds.dataset(path, format="parquet").head(limit)
    return list(zip(*(table.column(i).to_pylist() for i in range(table.num_columns))))
