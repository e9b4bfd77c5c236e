"""The prefix-extension primitive (§3.1): extend a batch of j-prefixes by one attribute with three
operators (`Operator`), each a lookup keyed by a value the prefix has bound:
  Count      how many extensions a relation offers the prefix; keep the smallest relation;
  Propose    the extensions themselves, from that smallest relation;
  Intersect  which of the candidates every other relation binding the attribute also offers;
  Anti       which of them an anti-relation's list holds (JoinSpec.anti): those are dropped.
The numba kernels (`extension_kernels`) answer all three against one worker's index partition. Who
answers, and so what travels, is the variant's choice:
  bigjoin, delta-bigjoin  the worker that owns the key: prefixes travel to it (`Stage` below; both
                          now run the pipelined dataflow, `dataflow`, on `dataflow_kernels`);
  bigjoin-s               the worker holding the key's list or, for a long list cut into blocks,
                          the block's holder: prefixes travel to it (`bigjoin_s`, on `dataflow`);
  bigjoin-s-paper         the owners of the resolver, membership and count entries: lookups travel
                          to them and prefixes stay (`bigjoin_s_paper`).
Which version of the index a lookup reads (delta-bigjoin's old and new views) is the plan's
`rel_view` of its relation, which the kernels hand to `list_ranges`.

This module's one-level engine: one Spark job extends one batch at level j, where the prefixes wait in per-worker queues at the
worker of their proposing relation (the paper's (p, min-c, min-i, rem-ext) quadruples):
  stage 0       Propose: each worker takes up to `budget` units of proposal work from its queue;
  stages 1..H   Intersect with every other relation binding a_j, then Count the new (j+1)-prefixes
                against every relation binding a_(j+1), then move each to its proposer's worker and
                queue it for level j + 1 (at the last level the survivors are only counted).
Every stage applies all lookups whose keys the worker owns before shipping an item, so H is an
upper bound and items often arrive early. `bigjoin-s-paper` replaces the stages and keeps the queues,
windows, job driver and counters."""

from __future__ import annotations

import os
import re
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import numpy as np

from harness import store
from harness.errors import ExecutionError

from . import distributed_index, exchange
from .constants import INT32_MAX
from .exchange import BlobKind
from .extension_kernels import (
    IndexPartition,
    count_items,
    gather_lists,
    intersect_items,
    next_owner,
    propose_items,
)
from .kernel_signatures import signatures
from .match_files import MatchSink
from .plan import ExtensionPlan


class Operator(IntEnum):
    COUNT = 0
    PROPOSE = 1
    INTERSECT = 2
    ANTI = 3


FIELDS = (
    "stage",
    "worker",
    "received_prefixes",
    "received_candidates",
    "received_lookups",
    "received_answers",
    "received_ranges",
    "sent_prefixes",
    "sent_candidates",
    "sent_remote_prefixes",
    "sent_remote_candidates",
    "sent_lookups",
    "sent_remote_lookups",
    "sent_remote_answers",
    "sent_remote_ranges",
    "lookups_aggregated",
    "held_prefixes",
    "held_candidates",
    "count_lookups",
    "proposals",
    "probes",
    "produced",
    "counted",
    "queued_rows",
    "queued_work",
    "taken_work",
    "held_bytes",
    "kernels_compiled",
    "group",
    "attempt",
    "kernel_us",
    "pack_us",
    "io_us",
)
RECEIVED = tuple(name for name in FIELDS if name.startswith("received_"))
F = {name: i for i, name in enumerate(FIELDS)}
# The tasks' own clocks, in microseconds: Spark's executor CPU time does not see the Python worker.
PYTHON_CLOCKS = ("kernel_us", "pack_us", "io_us")


@dataclass
class Chunk:
    """A file of queued prefixes at one worker: their count and their total proposal work. The task
    that queued them keeps a local copy and checkpoints it to the store (store.write_bytes), so the
    task that proposes from them reads locally when it runs on the same executor, else the checkpoint."""

    path: str
    rows: int
    work: int


@dataclass(kw_only=True)
class ExtensionJob:
    """Everything the tasks of one batch need (pickled into them); built with keywords only."""

    index_root: str
    workers: int
    tokens: np.ndarray
    plan: ExtensionPlan
    level: int  # bind position `level`; level 0 seeds the level-1 queue from the index keys
    budget: int
    queues: list[list[Chunk]]  # per worker, oldest first
    consumed: list[int]  # per worker, work already taken from the front of its queue
    run_dir: str
    job_id: int
    match_limit: int = 0
    group: int = 0  # the counters' group column (BiGJoin-S runs one extension per job)
    sink: MatchSink | None = None  # write_matches: the last level's matches go to files, not to the sample

    @property
    def exchanges(self) -> int:
        """Upper bound on the hops an item needs: remaining intersects, then counts, then to its proposer."""
        p, j = self.plan, self.level
        if j == 0:  # seeding: every lookup is keyed by the worker's own keys
            return 0
        hops = int(p.rel_count[j]) - 1
        return hops + int(p.rel_count[j + 1]) + 1 if j + 1 < p.m else hops

    def chunk_path(self, level: int, worker: int, stage: int, attempt: int, group: int | None = None) -> str:
        return chunk_path(self.run_dir, level, worker, self.job_id, stage, attempt, self.group if group is None else group)

    def queued_chunk_path(self, group: int, worker: int, stage: int, attempt: int) -> str:
        """The chunk a stats row with `queued_rows` names: the level after the job's."""
        return self.chunk_path(self.level + 1, worker, stage, attempt, group)

    def parts(self) -> list[tuple[int, int, int, int]]:
        """(level, group, first stage, exchanges) of every extension the Spark job runs."""
        return [(self.level, self.group, 0, self.exchanges)]

    def cleanup(self) -> None:
        """Called by the driver once the job's results are in."""

    def load_index(self, p: int) -> tuple[IndexPartition, np.ndarray]:
        """(ix, loop vertices) of worker p; see extension_kernels for ix."""
        return distributed_index.load_partition(self.index_root, p)

    def start_task(self, final: bool):
        def start(iterator):
            for _ in iterator:
                pass
            yield from self.start(exchange.current_partition(), final)

        return start

    def stage_task(self, number: int, final: bool):
        def run_stage(iterator):
            p = exchange.current_partition()
            yield from self.stage(number, p, exchange.received(iterator, p), final)

        return run_stage

    def start(self, p: int, final: bool, number: int = 0):
        """The first stage (`number`) at worker p: seed level 1 from the index keys, or propose from the queue."""
        stage = Stage(self, number, p)
        plan = self.plan
        if self.level == 0:  # seed: every key this worker owns (in the base or an overlay) is a 1-prefix
            lists, changes = stage.ix.lists, stage.ix.changes
            keys = np.union1d(lists.keys, changes.keys).astype(np.int32) if len(changes.keys) else lists.keys
            if plan.loop[0]:
                keys = keys[np.isin(keys, stage.loops)]
            prefixes = Prefixes.fresh(keys.reshape(-1, 1), int(plan.rel_count[1]))
            return stage.run(Candidates.empty(0), prefixes, final)
        with stage.clock("io_us"):
            window = self.window(p)
        return stage.run(stage.propose(window), Prefixes.empty(self.level + 1), final)

    def window(self, p: int) -> tuple:
        """(items, first, last): the queued prefixes worker p proposes for in this job; see take_window."""
        return take_window(self, p, Prefixes.empty(self.level))

    def stage(self, number: int, p: int, blobs, final: bool):
        """Stage `number` at worker p on the (kind, meta, arrays) blobs it received."""
        stage = Stage(self, number, p)
        cands: list[Any] = []  # Candidates
        prefixes: list[Any] = []  # Prefixes
        with stage.clock("pack_us"):
            for kind, meta, arrays in blobs:
                if not stage.side_input(kind, meta, arrays):
                    (cands if kind == BlobKind.CANDIDATES else prefixes).append(unpack_items(kind, meta, arrays))
        stage.add("received_prefixes", sum(len(c.prefix) for c in cands) + sum(len(x.prefix) for x in prefixes))
        stage.add("received_candidates", sum(len(c.values) for c in cands))
        return stage.run(_concat(cands, Candidates.empty(self.level)), _concat(prefixes, Prefixes.empty(self.level + 1)), final)


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


def _concat(parts: list, empty):
    if not parts:
        return empty
    if len(parts) == 1:
        return parts[0]
    cls = type(parts[0])
    return cls(*(np.concatenate([getattr(x, f) for x in parts]) for f in cls.__dataclass_fields__))


# ------------------------------------------------------------------ worker side


ITEM_KINDS: dict[int, type] = {BlobKind.CANDIDATES: Candidates, BlobKind.PREFIXES: Prefixes}
_ItemsT = TypeVar("_ItemsT", bound=_Items)


def pack_items(items: _Items, dest: int, group: int = 0) -> exchange.Blob:
    """meta: (rows, prefix width, group); every blob of this module ends its meta with its group."""
    arrays = [getattr(items, f) for f in type(items).__dataclass_fields__]
    arrays[0] = arrays[0].ravel()
    return exchange.pack(items.KIND, dest, arrays, (*items.prefix.shape, group))


def unpack_items(kind: int, meta: tuple, arrays: list[np.ndarray]) -> _Items:
    n, width = meta[:2]
    return ITEM_KINDS[kind](arrays[0].reshape(n, width), *(a.copy() for a in arrays[1:]))


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
    items = _concat(parts, empty)
    work = items.work().astype(np.int64)
    start = np.cumsum(work) - work + (base or 0)
    first = np.clip(lo - start, 0, work)
    last = np.clip(hi - start, 0, work)
    keep = np.flatnonzero(last > first)
    return items.take(keep), first[keep], last[keep]


class StageBase:
    """One worker's share of one stage: its counters (one FIELDS row, plus the rows of earlier stages
    that travel with the data), its sample of matches, queueing and the blobs it emits."""

    def __init__(self, job: ExtensionJob, stage: int, p: int):
        self.job, self.stage, self.p = job, stage, p
        self.record = np.zeros(len(FIELDS), dtype=np.int64)
        self.record[F["stage"]], self.record[F["worker"]], self.record[F["group"]] = stage, p, job.group
        self.record[F["attempt"]] = exchange.current_attempt()
        self.stats: list[np.ndarray] = []
        self.matches: list[np.ndarray] = []
        self.listed: list[np.ndarray] = []  # write_matches: this task's matches, at most the sink's limit
        self.signatures = signatures()

    def add(self, name: str, value) -> None:
        self.record[F[name]] += int(value)

    @contextmanager
    def clock(self, name: str):
        """Adds the block's wall time to the `name` clock (one of PYTHON_CLOCKS)."""
        started = time.perf_counter()
        try:
            yield
        finally:
            self.record[F[name]] += int((time.perf_counter() - started) * 1e6)

    def queue(self, items: _Items) -> None:
        path = self.job.chunk_path(self.job.level + 1, self.p, self.stage, int(self.record[F["attempt"]]))
        with self.clock("pack_us"):
            blob = pack_items(items, self.p, self.job.group)
        with self.clock("io_us"):
            store.write_bytes(path, blob)
        self.add("queued_rows", len(items.prefix))
        self.add("queued_work", items.work().astype(np.int64).sum())

    def side_input(self, kind: int, meta: tuple, arrays: list[np.ndarray]) -> bool:
        """Take a STATS or MATCHES blob travelling with the data; False for any other kind."""
        if kind == BlobKind.STATS:
            self.stats.append(arrays[0].reshape(meta[:2]))
        elif kind == BlobKind.MATCHES:
            self.matches.append(arrays[0].reshape(meta[:2]))
        else:
            return False
        return True

    def output(self, tokens: list[int], payloads: list[exchange.Blob], final: bool):
        """The data blobs plus this worker's counters and matches: to itself for the next stage, or
        (after the last stage) to the driver."""
        self.add("kernels_compiled", signatures() - self.signatures)
        if self.listed:
            job = self.job
            assert job.sink is not None
            with self.clock("io_us"):
                job.sink.write_task(job.job_id, self.stage, self.p, int(self.record[F["attempt"]]), self.listed)
        self.stats.append(self.record[None, :])
        stats = np.concatenate(self.stats)
        group = self.job.group
        side = [exchange.pack(BlobKind.STATS, self.p, [stats.ravel()], (*stats.shape, group))]
        if self.matches:
            found = np.concatenate(self.matches)[: self.job.match_limit]
            side.append(exchange.pack(BlobKind.MATCHES, self.p, [found.ravel()], (*found.shape, group)))
        if final:
            return list(exchange.blob_batches([-1] * len(side), side))
        tokens = tokens + [int(self.job.tokens[self.p])] * len(side)
        return list(exchange.blob_batches(tokens, payloads + side))


class Stage(StageBase):
    """BiGJoin's stage: apply local lookups, then ship, queue or count each item."""

    def __init__(self, job: ExtensionJob, stage: int, p: int):
        super().__init__(job, stage, p)
        with self.clock("io_us"):
            self.ix, self.loops = job.load_index(p)

    def propose(self, window: tuple) -> Candidates:
        """Candidates for the positions [first, last) of the window's queued prefixes' smallest lists."""
        job, plan, j = self.job, self.job.plan, self.job.level
        items, first, last = window
        with self.clock("kernel_us"):
            lengths, values = propose_items(
                self.p,
                job.workers,
                self.ix,
                self.loops,
                j,
                items.prefix,
                items.min_rel,
                first,
                last,
                plan.rel_pos,
                plan.rel_kind,
                plan.rel_view,
                plan.above,
                plan.below,
                plan.differ,
                plan.loop,
            )
        self.add("proposals", len(values))
        full = (1 << int(plan.rel_count[j])) - 1
        return Candidates(items.prefix, (full & ~(1 << items.min_rel)).astype(np.int32), lengths, values)

    def intersect(self, cands: Candidates) -> Candidates:
        """Intersect (level j) with every pending relation this worker owns; drop emptied items."""
        job, plan = self.job, self.job.plan
        if job.level == 0 or not len(cands.prefix):
            return cands
        with self.clock("kernel_us"):
            kept, probes = intersect_items(
                self.p,
                job.workers,
                self.ix,
                job.level,
                cands.prefix,
                cands.mask,
                cands.lengths,
                cands.values,
                cands.values,
                plan.rel_count,
                plan.rel_pos,
                plan.rel_kind,
                plan.rel_view,
            )
        cands.values = cands.values[:kept]
        self.add("probes", probes)
        alive = np.flatnonzero(cands.lengths > 0)
        return cands if len(alive) == len(cands.lengths) else cands.take(alive)

    def count(self, prefixes: Prefixes) -> Prefixes:
        """Count (level j + 1) against every pending relation this worker owns; drop empty extensions."""
        job, plan = self.job, self.job.plan
        if not len(prefixes.prefix):
            return prefixes
        with self.clock("kernel_us"):
            lookups = count_items(
                self.p,
                job.workers,
                self.ix,
                job.level + 1,
                prefixes.prefix,
                prefixes.mask,
                prefixes.min_rel,
                prefixes.min_count,
                plan.rel_count,
                plan.rel_pos,
                plan.rel_kind,
                plan.rel_view,
                plan.above,
                plan.below,
            )
        self.add("count_lookups", lookups)
        return prefixes.take(np.flatnonzero(prefixes.min_count > 0))

    def run(self, cands: Candidates, prefixes: Prefixes, final: bool):
        """BiGJoin's step at this worker: Intersect, turn the finished candidates into (j+1)-prefixes
        (or count them, at the last level), Count those, then queue or ship every item."""
        self.add("held_prefixes", len(cands.prefix) + len(prefixes.prefix))
        self.add("held_candidates", len(cands.values))
        cands = self.intersect(cands)
        done = cands.mask == 0
        if done.any():
            prefixes = self.extended(cands.take(np.flatnonzero(done)), prefixes)
            cands = cands.take(np.flatnonzero(~done))
        return self.route(cands, self.count(prefixes), final)

    def extended(self, finished: Candidates, prefixes: Prefixes) -> Prefixes:
        """Candidates every relation agreed on: counted at the last level (bar a bounded sample of
        matches), else new prefixes added to `prefixes`."""
        job, j = self.job, self.job.level
        produced = len(finished.values)
        self.add("produced", produced)
        if j + 1 == job.plan.m:
            self.add("counted", produced)
            if job.match_limit:
                self.matches.append(_flatten(finished, j, job.match_limit))
            return prefixes
        new = Prefixes.fresh(_flatten(finished, j, produced), int(job.plan.rel_count[j + 1]))
        return _concat([prefixes, new], Prefixes.empty(j + 1))

    def route(self, cands: Candidates, prefixes: Prefixes, final: bool):
        """Queue the prefixes that reached their proposer's worker; ship every other item to the owner
        of its next lookup."""
        job, plan, j, p = self.job, self.job.plan, self.job.level, self.p
        dest_p = next_owner(job.workers, j + 1, prefixes.prefix, prefixes.mask, prefixes.min_rel, plan.rel_pos)
        arrived = (prefixes.mask == 0) & (dest_p == p)
        if arrived.any():
            self.queue(prefixes.take(np.flatnonzero(arrived)))
            prefixes = prefixes.take(np.flatnonzero(~arrived))
            dest_p = dest_p[~arrived]
        dest_c = next_owner(job.workers, j, cands.prefix, cands.mask, np.zeros(len(cands.mask), np.int32), plan.rel_pos)
        if final and (len(cands.prefix) or len(prefixes.prefix)):
            raise ExecutionError(f"level {j}: items still pending after the last exchange")
        return self._emit(cands, dest_c, prefixes, dest_p, final)

    def _emit(self, cands: Candidates, dest_c, prefixes: Prefixes, dest_p, final: bool):
        job = self.job
        tokens, payloads = [], []
        for items, dest in ((cands, dest_c), (prefixes, dest_p)):
            if not len(items.prefix):
                continue
            for q, sel in exchange.by_destination(dest, job.workers):
                part = items.take(sel)
                n_cands = len(part.values) if isinstance(part, Candidates) else 0
                self.add("sent_prefixes", len(sel))
                self.add("sent_candidates", n_cands)
                if q != self.p:
                    self.add("sent_remote_prefixes", len(sel))
                    self.add("sent_remote_candidates", n_cands)
                with self.clock("pack_us"):
                    for piece in _split(part):
                        tokens.append(int(job.tokens[q]))
                        payloads.append(pack_items(piece, q, job.group))
        return self.output(tokens, payloads, final)


def _flatten(items: Candidates, width: int, limit: int) -> np.ndarray:
    """The first `limit` extended prefixes (prefix + candidate) as rows."""
    if limit < len(items.values):
        cut = np.searchsorted(np.cumsum(items.lengths), limit, side="left") + 1
        items = items.take(np.arange(min(int(cut), len(items.lengths))))
    rows = np.repeat(items.prefix, items.lengths, axis=0)
    rows = np.column_stack([rows, items.values]) if width else items.values.reshape(-1, 1)
    return rows[:limit].astype(np.int32)


def _split(items):
    """Pieces of at most ~MAX_BLOB_BYTES each."""
    size = items.prefix.nbytes + 12 * len(items.prefix) + (items.values.nbytes if isinstance(items, Candidates) else 0)
    pieces = int(size // exchange.MAX_BLOB_BYTES) + 1
    if pieces == 1:
        return [items]
    return [items.take(sel) for sel in np.array_split(np.arange(len(items.prefix)), pieces)]


# ------------------------------------------------------------------ driver side


@dataclass
class JobResult:
    stats: np.ndarray  # one row per (stage, worker), columns FIELDS
    new_chunks: dict[int, dict[int, list[Chunk]]] = field(default_factory=dict)  # group -> worker -> chunks queued for level + 1
    matches: dict[int, np.ndarray] = field(default_factory=dict)  # group -> sampled matches
    reports: list[tuple[int, int, np.ndarray]] = field(default_factory=list)  # a prelude's (kind, worker, values)

    def chunks(self, group: int = 0) -> dict[int, list[Chunk]]:
        return self.new_chunks.get(group, {})

    def of_group(self, group: int) -> JobResult:
        rows = self.stats[self.stats[:, F["group"]] == group]
        return JobResult(rows, {group: self.chunks(group)}, {group: self.matches[group]} if group in self.matches else {})

    def total(self, name: str) -> int:
        return int(self.stats[:, F[name]].sum())

    def taken(self, group: int, workers: int) -> list[int]:
        """Work each worker's window took from its queue, for the extension `group`."""
        rows = self.stats[self.stats[:, F["group"]] == group]
        return np.bincount(rows[:, F["worker"]], weights=rows[:, F["taken_work"]], minlength=workers).astype(np.int64).tolist()

    def per_worker(self, name: str) -> np.ndarray:
        """(stages, workers) matrix of one counter."""
        stages = int(self.stats[:, F["stage"]].max()) + 1 if len(self.stats) else 0
        workers = int(self.stats[:, F["worker"]].max()) + 1 if len(self.stats) else 0
        out = np.zeros((stages, workers), dtype=np.int64)
        np.add.at(out, (self.stats[:, F["stage"]], self.stats[:, F["worker"]]), self.stats[:, F[name]])
        return out

    def per_stage(self, name: str) -> np.ndarray:
        return self.per_worker(name).sum(axis=1)


def run_job(spark, job) -> JobResult:
    """Run one batch as one Spark job: a start stage then `job.exchanges` shuffled stages."""
    hops = job.exchanges
    df = spark.range(0, job.workers, 1, job.workers).mapInArrow(job.start_task(hops == 0), exchange.SCHEMA)
    for number in range(1, hops + 1):
        df = df.repartition(job.workers, "token").mapInArrow(job.stage_task(number, number == hops), exchange.SCHEMA)
    return job_result(job, [blob for batch in df.toArrow().to_batches() for blob in exchange.blobs_of(batch)])


def run_locally(job) -> JobResult:
    """What `run_job` computes, in this process (`exchange.run_locally`)."""
    hops = job.exchanges
    tasks = [job.start_task(hops == 0)] + [job.stage_task(n, n == hops) for n in range(1, hops + 1)]
    batches = exchange.run_locally(job.workers, job.tokens, tasks)
    return job_result(job, [blob for batch in batches for blob in exchange.blobs_of(batch)])


def job_result(job, payloads: list) -> JobResult:
    """The driver's reading of a job's output blobs: counters, sampled matches, a prelude's reports,
    and the queue chunks the counters name."""
    blocks: list[np.ndarray] = []
    matches: dict[int, list[np.ndarray]] = {}
    reports: list[tuple[int, int, np.ndarray]] = []
    for payload in payloads:
        kind, dest, meta, arrays = exchange.unpack(payload)
        if kind == BlobKind.STATS:
            blocks.append(arrays[0].reshape(meta[:2]))
        elif kind == BlobKind.MATCHES:
            matches.setdefault(meta[2], []).append(arrays[0].reshape(meta[:2]))
        else:
            reports.append((kind, dest, arrays[0].copy()))
    job.cleanup()
    stats = np.concatenate(blocks) if blocks else np.zeros((0, len(FIELDS)), np.int64)
    result = JobResult(stats, matches={g: np.concatenate(m) for g, m in matches.items()}, reports=reports)
    for rec in stats:
        if rec[F["queued_rows"]]:
            p, stage, group = int(rec[F["worker"]]), int(rec[F["stage"]]), int(rec[F["group"]])
            path = job.queued_chunk_path(group, p, stage, int(rec[F["attempt"]]))
            chunk = Chunk(path, int(rec[F["queued_rows"]]), int(rec[F["queued_work"]]))
            result.new_chunks.setdefault(group, {}).setdefault(p, []).append(chunk)
    return result
