"""Moving batches of tuples between logical workers through real Spark shuffles.

Rows through a shuffle cost far more than bytes, so a worker packs everything it sends to one
destination into a few binary blobs (columns of numpy arrays) and Spark shuffles those. Each blob
carries a routing token: a long whose Spark hash partition (`repartition(W, "token")`) is exactly
the destination worker, so the receiving task's partition id is the worker id."""

from __future__ import annotations

import zlib
from enum import IntEnum

import numpy as np
from pyspark.sql.types import BinaryType, LongType, StructField, StructType

from harness.errors import ExecutionError


class BlobKind(IntEnum):
    """What a blob carries; the receiver dispatches on it. One list, so no two modules pick the same number."""

    CANDIDATES = 1  # prefixes with their candidate lists, during Intersect
    PREFIXES = 2  # prefixes on their way to Count or Propose
    STATS = 3  # a task's counters, travelling with the data to the driver
    MATCHES = 4  # sampled matches
    RANGES = 5  # BiGJoin-S: prefixes with their share of a proposal range
    LOOKUPS = 6  # BiGJoin-S: requests to a resolver or membership owner
    ANSWERS = 7  # BiGJoin-S: the answers to LOOKUPS
    EDGES = 10  # (key, value, kind) index entries on their way to the key's owner
    RESOLVER = 11  # BiGJoin-S index entries on their way to their resolver owner
    MEMBERSHIP = 12  # BiGJoin-S index entries on their way to their membership owner
    OPS = 20  # Delta-BiGJoin: update operations on their way to their owner
    UPDATE_STATS = 22  # Delta-BiGJoin: what an update batch did on one worker
    INDEX_STATS = 23  # Delta-BiGJoin: a worker's index sizes after a batch
    HOMED = 24  # Delta-BiGJoin: changed edges on their way to the seeds' owner
    CELL = 30  # Shares: one cell's result (was 20, the number OPS has)


SCHEMA = StructType([StructField("token", LongType()), StructField("payload", BinaryType())])  # parsed once
MAGIC = 0x5047_4A42  # "BJGP"
_DTYPES: dict[int, np.dtype] = {1: np.dtype(np.int32), 2: np.dtype(np.int64), 3: np.dtype(np.int8)}
_CODES = {v: k for k, v in _DTYPES.items()}
MAX_BLOB_BYTES = 64 << 20


_tokens: dict[tuple[str, int], np.ndarray] = {}


def routing_tokens(spark, workers: int) -> np.ndarray:
    """tokens[p] is a long that Spark's hash partitioning into `workers` partitions sends to p."""
    key = (spark.sparkContext.applicationId, workers)
    if key not in _tokens:
        from pyspark.sql import functions as F

        rows = spark.range(0, 64 * workers + 64, 1, 1).select("id", F.expr(f"pmod(hash(id), {workers})").alias("p")).collect()
        tokens = np.full(workers, -1, dtype=np.int64)
        for row in rows:
            if tokens[row.p] < 0:
                tokens[row.p] = row.id
        if (tokens < 0).any():
            raise ExecutionError(f"no routing token found for some of {workers} partitions")
        _tokens[key] = tokens
    return _tokens[key]


def pack(kind: int, dest: int, arrays: list[np.ndarray], meta: tuple[int, ...] = ()) -> bytes:
    """One blob: a header (magic, kind, destination, meta, dtypes and lengths) then the raw arrays."""
    arrays = [np.ascontiguousarray(a) for a in arrays]
    header = [MAGIC, kind, dest, len(meta), len(arrays), *meta]
    for a in arrays:
        header += [_CODES[a.dtype], a.size]
    return b"".join([np.asarray(header, dtype=np.int64).tobytes()] + [a.tobytes() for a in arrays])


def unpack(buf) -> tuple[int, int, tuple[int, ...], list[np.ndarray]]:
    """(kind, destination, meta, arrays) of a blob, without copying the arrays."""
    head = np.frombuffer(buf, dtype=np.int64, count=5)
    if head[0] != MAGIC:
        raise ExecutionError("corrupt exchange blob (bad magic)")
    kind, dest, n_meta, n_arrays = (int(x) for x in head[1:])
    rest = np.frombuffer(buf, dtype=np.int64, count=5 + n_meta + 2 * n_arrays)
    meta = tuple(int(x) for x in rest[5 : 5 + n_meta])
    offset = 8 * len(rest)
    arrays = []
    for i in range(n_arrays):
        dtype, size = _DTYPES[int(rest[5 + n_meta + 2 * i])], int(rest[6 + n_meta + 2 * i])
        arrays.append(np.frombuffer(buf, dtype=dtype, count=size, offset=offset))
        offset += size * dtype.itemsize
    return kind, dest, meta, arrays


def by_destination(dest: np.ndarray, workers: int):
    """(worker, positions of the items bound for it), for every worker that gets any, in order."""
    order = np.argsort(dest, kind="stable")
    bounds = np.searchsorted(dest[order], np.arange(workers + 1))
    for q in range(workers):
        if bounds[q + 1] > bounds[q]:
            yield q, order[bounds[q] : bounds[q + 1]]


def split(kind: int, owners: np.ndarray, arrays: list[np.ndarray], workers: int) -> dict[int, bytes]:
    """{owner: blob}: the rows of `arrays` split by owner, one blob of `kind` per owner."""
    return {q: pack(kind, q, [a[sel] for a in arrays]) for q, sel in by_destination(owners, workers)}


def route(
    kind: int, owners: np.ndarray, arrays: list[np.ndarray], tokens: np.ndarray, workers: int
) -> tuple[list[int], list[bytes]]:
    """(routing tokens, blobs): `split`, addressed for a shuffle."""
    parts = split(kind, owners, arrays, workers)
    return [int(tokens[q]) for q in parts], list(parts.values())


def blobs_batch(tokens: list[int], payloads: list[bytes]):
    import pyarrow as pa

    return pa.RecordBatch.from_arrays([pa.array(tokens, pa.int64()), pa.array(payloads, pa.binary())], names=["token", "payload"])


def received(iterator, partition: int):
    """Unpack every blob a task received, checking that each was routed to this worker.

    Blobs come in an order fixed by their content, not by the order the shuffle fetched them in, so
    a task re-executed after an executor loss computes (and writes) exactly what its first attempt did."""
    buffers = [batch.column(1)[i].as_buffer() for batch in iterator for i in range(batch.num_rows)]
    buffers.sort(key=_content_key)
    for buf in buffers:
        kind, dest, meta, arrays = unpack(buf)
        if dest != partition:
            raise ExecutionError(f"blob for worker {dest} arrived at worker {partition}: routing tokens are stale")
        yield kind, meta, arrays


def _content_key(buf) -> tuple[int, int, int]:
    view = memoryview(buf)
    return len(view), zlib.crc32(view), zlib.adler32(view)


def current_partition() -> int:
    from pyspark import TaskContext

    context = TaskContext.get()
    assert context is not None  # code that runs in a task
    return context.partitionId()


def current_attempt() -> int:
    """The running task attempt's id, unique within the application (0 outside a task)."""
    from pyspark import TaskContext

    context = TaskContext.get()
    return int(context.taskAttemptId()) if context is not None else 0
