"""The items of the prefix-extension primitive (§3.1) and where they wait: the operators (`Operator`),
the in-flight item columns (`Candidates` during Intersect, `Prefixes` during Count and in the queues),
their blob format (`pack_items`, `unpack_items`), and the queued chunk files a worker proposes from
(`Chunk`, `chunk_path`, `take_window`). The stages that move them are `extension.stage`; the job
that runs the stages is `extension.job`."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, TypeVar

import numpy as np

from harness.core import store
from implementations.gj import exchange
from implementations.gj.constants import INT32_MAX
from implementations.gj.exchange import BlobKind
from implementations.gj.extension_kernels import gather_lists

if TYPE_CHECKING:
    from implementations.extension.job import ExtensionJob


class Operator(IntEnum):
    COUNT = 0
    PROPOSE = 1
    INTERSECT = 2
    ANTI = 3


@dataclass
class Chunk:
    """A file of queued prefixes at one worker: their count and their total proposal work. The task
    that queued them keeps a local copy and checkpoints it to the store (store.write_bytes), so the
    task that proposes from them reads locally when it runs on the same executor, else the checkpoint."""

    path: str
    rows: int
    work: int


class _Items:
    """Columns of in-flight items: an (n, j) int32 prefix matrix then per-item int32 columns, packed
    into blobs of kind KIND."""

    KIND = 0
    # Declared for the type checker; the subclasses are dataclasses whose first field is prefix.
    prefix: np.ndarray
    __dataclass_fields__: ClassVar[dict[str, Any]]

    if TYPE_CHECKING:

        def __init__(self, *columns: np.ndarray) -> None: ...

    @classmethod
    def empty(cls, width: int):
        z = np.zeros(0, dtype=np.int32)
        return cls(np.zeros((0, width), dtype=np.int32), *[z] * (len(cls.__dataclass_fields__) - 1))

    def take(self, order):
        return type(self)(*(getattr(self, f)[order] for f in self.__dataclass_fields__))

    def work(self) -> np.ndarray:
        """Proposal work of each queued item."""
        raise NotImplementedError


@dataclass
class Candidates(_Items):
    """Prefixes with their candidate extensions (concatenated lists), during Intersect."""

    KIND = BlobKind.CANDIDATES
    prefix: np.ndarray
    mask: np.ndarray  # relations still to intersect
    lengths: np.ndarray
    values: np.ndarray

    def take(self, order: np.ndarray) -> Candidates:
        return Candidates(
            self.prefix[order],
            self.mask[order],
            self.lengths[order],
            gather_lists(self.lengths, self.values, order.astype(np.int64)),
        )


@dataclass
class Prefixes(_Items):
    """Prefixes during Count, and queued for Propose: the smallest count so far and its relation."""

    KIND = BlobKind.PREFIXES
    prefix: np.ndarray
    mask: np.ndarray  # relations still to count
    min_rel: np.ndarray
    min_count: np.ndarray

    def work(self) -> np.ndarray:
        return self.min_count

    @classmethod
    def fresh(cls, prefix: np.ndarray, relations: int) -> Prefixes:
        n = len(prefix)
        return cls(
            np.ascontiguousarray(prefix, dtype=np.int32),
            np.full(n, (1 << relations) - 1, dtype=np.int32),
            np.full(n, -1, dtype=np.int32),
            np.full(n, INT32_MAX, dtype=np.int32),
        )


def concat_items(parts: list, empty):
    if not parts:
        return empty
    if len(parts) == 1:
        return parts[0]
    cls = type(parts[0])
    return cls(*(np.concatenate([getattr(x, f) for x in parts]) for f in cls.__dataclass_fields__))


ITEM_KINDS: dict[int, type] = {BlobKind.CANDIDATES: Candidates, BlobKind.PREFIXES: Prefixes}
_ItemsT = TypeVar("_ItemsT", bound=_Items)


class ItemsMeta(NamedTuple):
    """The meta of an item blob (`pack_items`): the shape of its prefix matrix and the extension group
    it belongs to."""

    rows: int
    width: int  # the prefix length
    group: int


def pack_items(items: _Items, dest: int, group: int = 0) -> exchange.Blob:
    arrays = [getattr(items, f) for f in type(items).__dataclass_fields__]
    arrays[0] = arrays[0].ravel()
    rows, width = items.prefix.shape
    return exchange.pack(items.KIND, dest, arrays, ItemsMeta(rows=rows, width=width, group=group))


def unpack_items(kind: int, meta: tuple[int, ...], arrays: list[np.ndarray]) -> _Items:
    shape = ItemsMeta(*meta)
    return ITEM_KINDS[kind](arrays[0].reshape(shape.rows, shape.width), *(a.copy() for a in arrays[1:]))


def read_queue(path: str) -> _Items:
    kind, _, meta, arrays = exchange.unpack(store.read_bytes(path))
    return unpack_items(kind, meta, arrays)


def chunk_path(run_dir: str, level: int, worker: int, job_id: int, stage: int, attempt: int, group: int | None = None) -> str:
    """A queued chunk's file, the one place its name is written: named by the writing task attempt, so a
    re-executed task (lost executor) writes a file of its own and the driver reads only the files of the
    attempts whose results it received. A one-level job names its extension's `group`; the pipelined
    dataflow's levels have folders of their own."""
    grouped = "" if group is None else f"-g{group}"
    return os.path.join(run_dir, f"L{level}", f"p{worker}", f"j{job_id:06d}{grouped}-s{stage:03d}-a{attempt}.bin")


def chunk_glob(run_dir: str, level: int, worker: int, job_id: int) -> str:
    """Every chunk one job's stages wrote for one worker at one level (no group: the dataflow's)."""
    return os.path.join(run_dir, f"L{level}", f"p{worker}", f"j{job_id:06d}-s*-a*.bin")


_STAGE_IN_NAME = re.compile(r"-s(\d+)-a(\d+)\.bin$")
_JOB_IN_NAME = re.compile(r"j(\d{6})")


def stage_of(path: str) -> int | None:
    """The stage that wrote a chunk, from its name (`chunk_path`); None for another file."""
    found = _STAGE_IN_NAME.search(path)
    return int(found.group(1)) if found else None


def _job_of(relative: str) -> int:
    """The job that wrote a run-directory file, from its path in the run directory: chunk_path names it
    in the file name, BiGJoin-S's state_path in the folder."""
    found = _JOB_IN_NAME.search(relative)
    return int(found.group(1)) if found else -1


def take_window(job: ExtensionJob, p: int, empty: _ItemsT) -> tuple[_ItemsT, np.ndarray, np.ndarray]:
    """The queued items overlapping this batch's work window [consumed, consumed + budget),
    with the positions [first, last) of their proposal work that fall inside it."""
    lo, hi = job.consumed[p], job.consumed[p] + job.budget
    store.prune_local(job.run_dir, lambda relative: not relative.endswith(".tmp") and _job_of(relative) < job.job_id)
    parts, base, offset = [], None, 0
    for chunk in job.queues[p]:
        if offset + chunk.work > lo and offset < hi:
            parts.append(read_queue(chunk.path))
            base = offset if base is None else base
            if offset + chunk.work <= hi:  # used up by this batch: a re-executed task reads the checkpoint
                store.drop_local(chunk.path)
        offset += chunk.work
        if offset >= hi:
            break
    items = concat_items(parts, empty)
    work = items.work().astype(np.int64)
    start = np.cumsum(work) - work + (base or 0)
    first = np.clip(lo - start, 0, work)
    last = np.clip(hi - start, 0, work)
    keep = np.flatnonzero(last > first)
    return items.take(keep), first[keep], last[keep]
