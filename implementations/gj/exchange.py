"""Moving batches of tuples between logical workers through real Spark shuffles.

Rows through a shuffle cost far more than bytes, so a worker packs everything it sends to one
destination into a few binary blobs (columns of numpy arrays) and Spark shuffles those. Each blob
carries a routing token: a long whose Spark hash partition (`repartition(W, "token")`) is exactly
the destination worker, so the receiving task's partition id is the worker id.

A blob is one numpy byte buffer: a header of int64s (magic, kind, destination, sender, sequence,
meta, then each array's dtype and length) and the arrays, each padded to 8 bytes, so the receiver's
views of them are aligned and need no copy. It goes to Spark as its own Arrow record batch, built
over that buffer without copying it (one batch per blob keeps every Arrow binary array far below
its 2 GiB limit). The receiver orders blobs by (sender, sequence): a task re-executed after an
executor loss receives the same blobs in the same order, whatever order the shuffle fetched them in."""

from __future__ import annotations

from enum import IntEnum
from typing import NamedTuple

import numpy as np
from pyspark.sql.types import BinaryType, LongType, StructField, StructType

from harness.core.errors import ExecutionError


class BlobKind(IntEnum):
    """What a blob carries; the receiver dispatches on it. One list, so no two modules pick the same number."""

    SIZES = 0  # an index builder's per-worker sizes, on their way to the driver
    CANDIDATES = 1  # prefixes with their candidate lists, during Intersect
    PREFIXES = 2  # prefixes on their way to Count or Propose
    STATS = 3  # a task's counters, travelling with the data to the driver
    MATCHES = 4  # sampled matches
    RANGES = 5  # BiGJoin-S: prefixes with their share of a proposal range
    LOOKUPS = 6  # BiGJoin-S: requests to a resolver or membership owner
    ANSWERS = 7  # BiGJoin-S: the answers to LOOKUPS
    FAMILIES = 8  # bigjoin-carry: a prefix's candidate set with the members one worker extends
    EDGES = 10  # (key, value, kind) index entries on their way to the key's owner
    RESOLVER = 11  # BiGJoin-S index entries on their way to their resolver owner
    MEMBERSHIP = 12  # BiGJoin-S index entries on their way to their membership owner
    OPS = 20  # Delta-BiGJoin: update operations on their way to their owner
    UPDATE_STATS = 22  # Delta-BiGJoin: what an update batch did on one worker
    INDEX_STATS = 23  # Delta-BiGJoin: a worker's index sizes after a batch
    HOMED = 24  # Delta-BiGJoin: changed edges on their way to the seeds' owner
    CELL = 30  # Shares: one cell's result (was 20, the number OPS has)


Blob = np.ndarray  # a packed blob: uint8, header then arrays (`pack`)
SCHEMA = StructType([StructField("token", LongType()), StructField("payload", BinaryType())])  # parsed once
MAGIC = 0x5047_4A43  # "CJGP": the header with sender and sequence
_DTYPES: dict[int, np.dtype] = {1: np.dtype(np.int32), 2: np.dtype(np.int64), 3: np.dtype(np.int8), 4: np.dtype(np.uint8)}
_CODES = {v: k for k, v in _DTYPES.items()}
_FIXED = 7  # magic, kind, dest, sender, seq, number of meta fields, number of arrays
MAX_BLOB_BYTES = 8 << 20  # 64 MiB blobs cost the JVM 3x the time per byte (triangle, R-MAT 18)
TO_DRIVER = -1  # the destination (and token) of a blob the driver collects


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


def _padded(nbytes: int) -> int:
    return (nbytes + 7) & ~7


class _Sequence:
    """The running task's blob counter: restarts at 0 for every task attempt, so a re-executed task
    numbers its blobs as its first attempt did."""

    attempt = -2
    next = 0

    @classmethod
    def take(cls) -> tuple[int, int]:
        from pyspark import TaskContext

        context = TaskContext.get()
        attempt = int(context.taskAttemptId()) if context is not None else -1
        if attempt != cls.attempt:
            cls.attempt, cls.next = attempt, 0
        seq = cls.next
        cls.next += 1
        return (context.partitionId() if context is not None else -1), seq


def pack(kind: int, dest: int, arrays: list[np.ndarray], meta: tuple[int, ...] = ()) -> np.ndarray:
    """One blob (a uint8 buffer): the header then the arrays, each copied once, 8-byte aligned. `meta`
    is a NamedTuple of ints, defined where the kind is packed; a receiver names the plain tuple
    `unpack` gives back with it (e.g. `ItemsMeta(*meta).rows`)."""
    sender, seq = _Sequence.take()
    arrays = [np.asarray(a) for a in arrays]
    header = [MAGIC, kind, dest, sender, seq, len(meta), len(arrays), *meta]
    for a in arrays:
        header += [_CODES[a.dtype], a.size]
    head = np.asarray(header, dtype=np.int64)
    out = np.empty(head.nbytes + sum(_padded(a.nbytes) for a in arrays), dtype=np.uint8)
    out[: head.nbytes] = head.view(np.uint8)
    at = head.nbytes
    for a in arrays:
        out[at : at + a.nbytes] = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
        at += _padded(a.nbytes)
    return out


def layout(kind: int, blobs: list) -> tuple[np.ndarray, list[tuple[int, int, list[int]]]]:
    """Empty blobs of `kind`, back to back in one buffer, for a kernel to fill in place (the one copy
    of the data is the kernel's write). `blobs` gives each one's (destination, meta, [(dtype, size) of
    each array]). Returns the buffer and, per blob, (start, end, byte offset of each array)."""
    heads, places, total = [], [], 0
    for dest, meta, columns in blobs:
        sender, seq = _Sequence.take()
        header = [MAGIC, kind, dest, sender, seq, len(meta), len(columns), *meta]
        for dtype, size in columns:
            header += [_CODES[np.dtype(dtype)], size]
        head = np.asarray(header, dtype=np.int64)
        start, at, offsets = total, total + head.nbytes, []
        for dtype, size in columns:
            offsets.append(at)
            at += _padded(np.dtype(dtype).itemsize * size)
        heads.append(head)
        places.append((start, at, offsets))
        total = at
    out = np.empty(total, dtype=np.uint8)
    for head, (start, _, _) in zip(heads, places):
        out[start : start + head.nbytes] = head.view(np.uint8)
    return out, places


class Unpacked(NamedTuple):
    """A blob's parts (`unpack`); its arrays are read-only views of the blob."""

    kind: int
    destination: int
    meta: tuple[int, ...]
    arrays: list[np.ndarray]


def unpack(buf) -> Unpacked:
    """A blob's kind, destination, meta and arrays, as read-only views (no copy)."""
    kind, dest, _, _, meta, arrays = _parse(buf)
    return Unpacked(kind, dest, meta, arrays)


def _parse(buf) -> tuple[int, int, int, int, tuple[int, ...], list[np.ndarray]]:
    head = np.frombuffer(buf, dtype=np.int64, count=_FIXED)
    if head[0] != MAGIC:
        raise ExecutionError("corrupt exchange blob (bad magic)")
    kind, dest, sender, seq, n_meta, n_arrays = (int(x) for x in head[1:])
    rest = np.frombuffer(buf, dtype=np.int64, count=_FIXED + n_meta + 2 * n_arrays)
    meta = tuple(int(x) for x in rest[_FIXED : _FIXED + n_meta])
    offset = 8 * len(rest)
    arrays = []
    for i in range(n_arrays):
        dtype, size = _DTYPES[int(rest[_FIXED + n_meta + 2 * i])], int(rest[_FIXED + 1 + n_meta + 2 * i])
        arrays.append(np.frombuffer(buf, dtype=dtype, count=size, offset=offset))
        offset += _padded(size * dtype.itemsize)
    return kind, dest, sender, seq, meta, arrays


def by_destination(dest: np.ndarray, workers: int):
    """(worker, positions of the items bound for it), for every worker that gets any, in order:
    one counting pass, positions ascending within each worker."""
    dest = np.asarray(dest, dtype=np.int64)
    counts = np.bincount(dest, minlength=workers)
    if counts.max(initial=0) == len(dest):  # everything to one worker: no sort at all
        if len(dest):
            yield int(dest[0]), np.arange(len(dest))
        return
    order = np.argsort(dest, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(counts)])
    for q in range(workers):
        if bounds[q + 1] > bounds[q]:
            yield q, order[bounds[q] : bounds[q + 1]]


def split(kind: int, owners: np.ndarray, arrays: list[np.ndarray], workers: int) -> dict[int, np.ndarray]:
    """{owner: blob}: the rows of `arrays` split by owner, one blob of `kind` per owner."""
    return {q: pack(kind, q, [a[sel] for a in arrays]) for q, sel in by_destination(owners, workers)}


def route(
    kind: int, owners: np.ndarray, arrays: list[np.ndarray], tokens: np.ndarray, workers: int
) -> tuple[list[int], list[np.ndarray]]:
    """(routing tokens, blobs): `split`, addressed for a shuffle."""
    parts = split(kind, owners, arrays, workers)
    return [int(tokens[q]) for q in parts], list(parts.values())


def blob_batches(tokens: list[int], payloads: list):
    """One Arrow record batch per blob, built over the blob's own buffer (no copy)."""
    import pyarrow as pa

    for token, payload in zip(tokens, payloads):
        data = np.frombuffer(payload, dtype=np.uint8) if not isinstance(payload, np.ndarray) else payload
        offsets = np.array([0, len(data)], dtype=np.int32)
        blob = pa.Array.from_buffers(pa.binary(), 1, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
        yield pa.RecordBatch.from_arrays([pa.array([token], pa.int64()), blob], names=["token", "payload"])


def blobs_of(batch) -> list[np.ndarray]:
    """The blobs of one Arrow record batch of SCHEMA, as views of its data buffer."""
    column = batch.column(1)
    _, offsets_buf, data = column.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=np.int32, count=len(column) + 1, offset=column.offset * 4)
    whole = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8)
    return [whole[offsets[i] : offsets[i + 1]] for i in range(len(column))]


def received(iterator, partition: int):
    """Unpack every blob a task received, in (sender, sequence) order, checking that each was routed
    to this worker. Yields (kind, meta, arrays), the arrays read-only views of the received data."""
    parsed = [_parse(buf) for batch in iterator for buf in blobs_of(batch)]
    parsed.sort(key=lambda blob: (blob[2], blob[3]))
    for kind, dest, _, _, meta, arrays in parsed:
        if dest != partition:
            raise ExecutionError(f"blob for worker {dest} arrived at worker {partition}: routing tokens are stale")
        yield kind, meta, arrays


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


def local_tokens(workers: int) -> np.ndarray:
    """Routing tokens for `run_locally`: any distinct longs, as it routes by them directly."""
    return np.arange(workers, dtype=np.int64) + 100


def run_locally(workers: int, tokens: np.ndarray, tasks: list, inputs: dict[int, list] | None = None) -> list:
    """What `mapInArrow(tasks[0])`, then `repartition(workers, "token").mapInArrow(task)` for each later
    task, computes, in this process: every task called in turn under a task context naming its worker,
    each stage's blobs handed to the worker their token names. Worker p's first task reads inputs[p]
    (record batches). Returns the last tasks' output batches, one blob each. For warm-ups and tests:
    the code Spark tasks run, on the argument types they see, without Spark."""
    worker_of = {int(token): p for p, token in enumerate(tokens)}
    outputs = {p: _as_task(p, 0, tasks[0], (inputs or {}).get(p, [])) for p in range(workers)}
    for number, task in enumerate(tasks[1:], start=1):
        inbox: dict[int, list] = {p: [] for p in range(workers)}
        for batches in outputs.values():
            for batch in batches:
                inbox[worker_of[int(batch.column(0)[0].as_py())]].append(batch)
        outputs = {p: _as_task(p, number, task, inbox[p]) for p in range(workers)}
    return [batch for batches in outputs.values() for batch in batches]


def _as_task(p: int, stage: int, task, batches: list) -> list:
    """Run one task's function to completion as Spark would, with a task context naming worker p."""
    from pyspark import TaskContext

    context = object.__new__(TaskContext)
    context._partitionId, context._stageId, context._attemptNumber, context._taskAttemptId = p, stage, 0, 1000 * stage + p
    previous = TaskContext.get()
    TaskContext._setTaskContext(context)
    try:
        return [out.slice(i, 1) for out in task(iter(_through_ipc(batches))) for i in range(out.num_rows)]
    finally:
        TaskContext._setTaskContext(previous)


def _through_ipc(batches: list) -> list:
    """The batches as a Python worker receives them from the JVM: read from an Arrow IPC stream, so
    their buffers are read-only, as in a Spark task."""
    import pyarrow as pa

    if not batches:
        return []
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batches[0].schema) as writer:
        for batch in batches:
            writer.write_batch(batch)
    return list(pa.ipc.open_stream(sink.getvalue()))
