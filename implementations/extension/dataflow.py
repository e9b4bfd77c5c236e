"""`bigjoin`'s dataflow (§3.1–3.2) as Spark jobs that each carry a run of levels.

A job starts at level j (the level `bigjoin` picks by the paper's rule) and runs every level from j
to the last, one after the other: level l starts in the stage where level l−1's prefixes have all
reached the workers that propose them, so its Propose runs in the same task that queued them. Each
worker proposes at most one window of its queue per level and job, within the memory budget
(`budget`); what does not fit stays queued for a later job. So a query whose levels fit the budget
runs as one Spark job, and a larger one as a few, each bounded.

Each level takes at most as many shuffles as W requires: after Propose at the owner of the proposing
relation's key, an item hops to the owner of its next pending relation, applying there every lookup
that worker owns, so it visits each worker at most once per phase: Intersect needs min(n_l − 1 + a_l,
W − 1) hops (a_l anti-relations, which subtract where relations intersect: `checks`), Count
min(n_(l+1), W − 1) and the move to the proposer min(1, W − 1) (`hops`).

Items are int32 rows (see `dataflow_kernels`): candidate rows (prefix, mask, length) with their
values, prefix rows (prefix, mask, min_rel, min_count). Received blobs are read in place (views of
the shuffle's Arrow buffers); intersect writes the survivors once, and every item bound for another
worker is written once more, straight into that worker's blob. A prefix that reaches its proposer is
queued in a chunk file (as in `extension.items`), which the driver's `Batches` tracks.

What a finished candidate becomes is the one place the variants differ (`DataflowJob.finish`)."""

from __future__ import annotations

import glob
import itertools
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from typing import ClassVar, NamedTuple

import numpy as np

from harness.core import store
from harness.core.errors import ExecutionError
from implementations.extension.dataflow_kernels import (
    FAN_OUT,
    count_rows,
    destination_sizes,
    extend_rows,
    fan_out,
    intersect_rows,
    lookups,
    propose_local,
    scatter_rows,
    split_candidates,
    split_ranges,
)
from implementations.extension.items import Chunk, chunk_glob, chunk_path, stage_of
from implementations.extension.stage import FIELDS, F, TableMeta, pack_table, unpack_table
from implementations.gj import exchange
from implementations.gj.blocks import Blocks
from implementations.gj.budget import Budget
from implementations.gj.constants import INT32_MAX
from implementations.gj.exchange import BlobKind
from implementations.gj.extension_kernels import next_owner
from implementations.gj.kernel_signatures import signatures
from implementations.gj.keys import partition_of
from implementations.gj.match_files import MatchSink
from implementations.gj.plan import ExtensionPlan
from implementations.indices import distributed_index

# A candidate list longer than this is proposed as several items (same prefix, consecutive parts),
# so no item, and no blob, outgrows what one Arrow buffer should carry.
MAX_ITEM_VALUES = 4 << 20


class RowsMeta(NamedTuple):
    """The meta of a blob of rows in flight (CANDIDATES, PREFIXES, FAMILIES; `WorkerStage.send`)."""

    group: int  # the sending extension's tag + the level whose step moves the rows
    level: int  # the level whose queue the rows head for (candidates: the level that proposed them)
    rows: int
    width: int  # the row length


class ChunkMeta(NamedTuple):
    """The meta of a queue chunk's blob (`WorkerStage.flush_queue`)."""

    level: int
    rows: int
    width: int  # the row length
    work: int  # the rows' total proposal work
    values: int  # bigjoin-carry's family members (none for prefix rows)


def map_chunk(path: str) -> tuple[np.ndarray, np.ndarray, ChunkMeta]:
    """A queue chunk's rows and values, mapped from its file (no copy), and its meta."""
    _, _, meta, arrays = exchange.unpack(store.map_bytes(path))
    chunk = ChunkMeta(*meta)
    return arrays[0].reshape(chunk.rows, chunk.width), arrays[1], chunk


def hops(plan: ExtensionPlan, level: int, workers: int) -> int:
    """The most shuffles an item of `level` needs before its next level's Propose (or, at the last
    level, before it is counted): see the module docstring."""
    if level == 0:  # seeding: level 1's relations are all keyed by the first attribute, at its owner
        return 0
    others = workers - 1
    n = min(checks(plan, level), others)
    if level + 1 < plan.m:
        n += min(int(plan.rel_count[level + 1]), others) + min(1, others)
    return n


def checks(plan: ExtensionPlan, level: int) -> int:
    """The lookups a proposed candidate of `level` still needs: every relation but the proposing one,
    and every anti-relation (Intersect's hops; none more for a plain pattern)."""
    return int(plan.rel_count[level]) - 1 + int(plan.anti_count[level])


def full_mask(plan: ExtensionPlan, level: int) -> int:
    return (1 << int(plan.rel_count[level])) - 1


@dataclass(kw_only=True)
class DataflowJob:
    """Everything the tasks of one Spark job need (pickled into them)."""

    # Whether its last level, read from one list, is counted where it is proposed (`propose_local`).
    counts_last: ClassVar[bool] = True

    index_root: str
    workers: int
    tokens: np.ndarray
    plan: ExtensionPlan
    budget: Budget
    first: int  # the first level this job extends; 0 seeds the level-1 queue from the index keys
    queues: dict[int, list[list[Chunk]]]  # level -> per worker, oldest first
    consumed: dict[int, list[int]]  # level -> per worker, work already taken from the front
    run_dir: str
    job_id: int
    match_limit: int = 0
    sink: MatchSink | None = None  # --output / --limit: the last level's matches are listed into files, not sampled
    # Several extensions in one Spark job (`DataflowGroup`): each tags its counters' groups and its
    # blobs with tag + level, tag a multiple of TAG_STRIDE, and queues under a run_dir of its own.
    tag: int = 0
    start_stage: int = 0  # the stage of the Spark job its first level starts in (DataflowGroup)

    @property
    def levels(self) -> range:
        return range(self.first, self.plan.m)

    @cached_property
    def lookup_pos(self) -> np.ndarray:
        """Per level, the key position of each bit of a candidate row's mask: relations, then
        anti-relations (`dataflow_kernels.Lookups`)."""
        return lookups(self.plan.kernel).pos

    @cached_property
    def offsets(self) -> dict[int, int]:
        """The stage each level starts in: where the level before has delivered all its prefixes."""
        out, at = {}, self.start_stage
        for level in self.levels:
            out[level] = at
            at += self.level_hops(level)
        return out

    def last_stage(self, level: int) -> int:
        return self.offsets[level] + self.level_hops(level)

    def level_hops(self, level: int) -> int:
        """The shuffles a level's items need (`hops`); bigjoin-carry's carried levels need fewer."""
        return hops(self.plan, level, self.workers)

    @property
    def exchanges(self) -> int:
        return self.last_stage(self.levels[-1])

    def parts(self) -> list[tuple[int, int, int, int]]:
        """(level, group, first stage, exchanges) per level; a level's group is tag + the level."""
        return [(level, self.tag + level, self.offsets[level], self.level_hops(level)) for level in self.levels]

    def chunk_path(self, level: int, worker: int, stage: int, attempt: int) -> str:
        """Named by the writing task attempt, as in extension.items: the driver reads the attempts
        whose results it received."""
        return chunk_path(self.run_dir, level, worker, self.job_id, stage, attempt)

    def queued_chunk_path(self, group: int, worker: int, stage: int, attempt: int) -> str:
        return self.chunk_path(group - self.tag + 1, worker, stage, attempt)

    def cleanup(self) -> None:
        """Called by the driver once the job's results are in."""

    def start_task(self, final: bool):
        def start(iterator):
            for _ in iterator:
                pass
            yield from WorkerStage(self, 0, exchange.current_partition()).run([], final)

        return start

    def stage_task(self, number: int, final: bool):
        def run_stage(iterator):
            p = exchange.current_partition()
            worker = WorkerStage(self, number, p)
            with worker.clock(None, "pack_us"):
                received = list(exchange.received(iterator, p))
            yield from worker.run(received, final)

        return run_stage

    def load_index(self, p: int):
        return distributed_index.load_partition(self.index_root, p)

    def load_blocks(self, p: int) -> Blocks | None:
        """The table of lists cut into blocks (bigjoin-s); None: every list is whole at its key's owner."""
        return None

    def start_level(self, worker: WorkerStage, level: int) -> None:
        """A level's first stage at one worker: seed the level-1 queue, or propose one window."""
        if level == 0:
            worker.seed()
            return
        with worker.clock(level, "io_us"):
            rows, first, last = worker.window(level)
        if len(rows):
            worker.propose(level, rows, first, last)

    def whole_items(self, level: int) -> bool:
        """Whether a level's windows take whole prefixes (bigjoin-carry: the next level carries them)."""
        return False

    def queue_kind(self, level: int) -> int:
        """What waits in a level's queue: prefix rows (bigjoin-carry: families at a carried level)."""
        return BlobKind.PREFIXES

    def work_column(self, level: int) -> int:
        """The column of a queued row holding its proposal work: a prefix row's min_count."""
        return level + 2

    def finish(self, worker: WorkerStage, level: int, rows: np.ndarray, values: np.ndarray, take: np.ndarray) -> None:
        """Candidates every relation agreed on: counted at the last level (bar a sample of matches),
        else each becomes a (level+1)-prefix to be counted. bigjoin-carry changes only this."""
        produced = int(rows[take, level + 1].sum())
        worker.add(level, "produced", produced)
        if level + 1 == self.plan.m:
            worker.count_matches(level, rows, values, take, produced)
            return
        with worker.clock(level, "kernel_us"):
            new = extend_rows(rows, values, level, take, full_mask(self.plan, level + 1))
        worker.prefixes(level, new)


class WorkerStage:
    """One worker's share of one stage: every level active in it, its counters (a FIELDS row per
    level), the chunks it queues and the blobs it emits, in order."""

    def __init__(self, job: DataflowJob, stage: int, p: int):
        self.job, self.stage, self.p = job, stage, p
        self.plan = job.plan
        self.records: dict[int, np.ndarray] = {}
        self.carried: list[np.ndarray] = []  # stats rows of earlier stages, travelling with the data
        self.matches: list[np.ndarray] = []
        self.listed: list[np.ndarray] = []  # matches for the job's sink, written when the stage ends
        self.outgoing: list[tuple[int, np.ndarray]] = []
        self.arrived: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}  # level -> (rows, values) queued here
        self.attempt = exchange.current_attempt()
        self.siblings: dict[int, WorkerStage] = {}  # the other extensions' workers of a DataflowGroup, by tag
        self.signatures = signatures()
        started = time.perf_counter()
        self.ix, self.loops = job.load_index(p)
        self.blocks = job.load_blocks(p)
        self.add(job.first, "io_us", int((time.perf_counter() - started) * 1e6))

    # ------------------------------------------------------------------ counters

    def record(self, level: int) -> np.ndarray:
        if level not in self.records:
            rec = np.zeros(len(FIELDS), dtype=np.int64)
            rec[F["stage"]], rec[F["worker"]], rec[F["attempt"]] = self.stage, self.p, self.attempt
            rec[F["group"]] = self.job.tag + level
            self.records[level] = rec
        return self.records[level]

    def add(self, level: int, name: str, value) -> None:
        self.record(level)[F[name]] += int(value)

    @contextmanager
    def clock(self, level: int | None, name: str):
        started = time.perf_counter()
        try:
            yield
        finally:
            self.add(self.job.first if level is None else level, name, int((time.perf_counter() - started) * 1e6))

    # ------------------------------------------------------------------ the stage

    def run(self, received: list, final: bool):
        job = self.job
        self.signatures = signatures()  # in a DataflowGroup, the extensions before this one ran since __init__
        by_level: dict[int, list] = {}
        for kind, meta, arrays in received:
            if kind == BlobKind.STATS:
                self.carried.append(unpack_table(meta, arrays))
            elif kind == BlobKind.MATCHES:
                self.matches.append(unpack_table(meta, arrays))
            else:
                by_level.setdefault(RowsMeta(*meta).group - job.tag, []).append((kind, meta, arrays))
        for level in job.levels:
            if job.offsets[level] < self.stage <= job.last_stage(level):
                self.receive(level, by_level.pop(level, []))
            if job.offsets[level] == self.stage:
                self.start(level)
            self.flush_queue(level + 1)
            yield from self.drain()
        if by_level:
            raise ExecutionError(f"stage {self.stage}: items of level {min(by_level)} arrived after their last stage")
        self.add(job.first, "kernels_compiled", signatures() - self.signatures)
        yield from self.output(final)

    def receive(self, level: int, blobs: list) -> None:
        """Items of `level` that other workers sent here: candidates to intersect, prefixes to count."""
        prefixes = []
        for kind, meta, arrays in blobs:
            shape = RowsMeta(*meta)
            rows = arrays[0].reshape(shape.rows, shape.width)
            if kind == BlobKind.CANDIDATES:
                self.add(level, "received_prefixes", len(rows))
                self.add(level, "received_candidates", len(arrays[1]))
                self.candidates(level, rows, arrays[1])
            elif kind == BlobKind.FAMILIES:  # bigjoin-carry: queued where they arrive
                self.add(level, "received_prefixes", len(rows))
                self.add(level, "received_candidates", len(arrays[1]))
                self.arrive(level + 1, rows.copy(), arrays[1].copy())
            else:
                prefixes.append(rows)
        if prefixes:
            with self.clock(level, "pack_us"):
                rows = np.concatenate(prefixes) if len(prefixes) > 1 else prefixes[0].copy()
            self.add(level, "received_prefixes", len(rows))
            self.prefixes(level, rows)

    def start(self, level: int) -> None:
        self.job.start_level(self, level)

    def arrive(self, level: int, rows: np.ndarray, values: np.ndarray | None = None) -> None:
        """Items that reached the worker that extends them at `level`: queued at the end of the level's step."""
        self.arrived.setdefault(level, []).append((rows, np.zeros(0, np.int32) if values is None else values))

    def seed(self) -> None:
        """Every key this worker owns is a 1-prefix, counted at once (level 1's relations are all its)."""
        keys = np.asarray(self.ix.lists.keys)
        if len(self.ix.changes.keys):  # Delta-BiGJoin's view: keys its changes added count too
            keys = np.union1d(keys, self.ix.changes.keys).astype(np.int32)
        if self.blocks is not None:  # a split key's blocks may all be held away from its owner
            keys = np.union1d(keys, np.flatnonzero(np.asarray(self.blocks.slots) >= 0)).astype(np.int32)
            keys = keys[partition_of(keys, self.job.workers) == self.p]
        if self.plan.loop[0]:
            keys = keys[np.isin(keys, self.loops)]
        keys = self.plan.labelled(0, keys)
        rows = np.empty((len(keys), 4), dtype=np.int32)
        rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 3] = keys, full_mask(self.plan, 1), -1, INT32_MAX
        self.prefixes(0, rows)

    # ------------------------------------------------------------------ the three operators

    def propose(self, level: int, queued: np.ndarray, first: np.ndarray, last: np.ndarray) -> None:
        """Propose positions [first, last) of each queued prefix's smallest list, intersected at once
        with every pending relation this worker owns (`propose_local`)."""
        plan, job = self.plan, self.job
        if not job.whole_items(level):  # a candidate set the next level carries stays whole
            piece, first, last = split_ranges(first, last, MAX_ITEM_VALUES)
            if len(piece) != len(queued):
                queued = queued[piece]
        queued = np.require(queued, np.int32, ("C", "W"))  # one argument type for the kernels (a window may be mapped)
        with self.clock(level, "kernel_us"):
            mask, lengths, values, proposals, probes, counted = propose_local(
                self.p, job.workers, self.ix, self.loops, level, queued, first, last, plan.kernel, self.keep_done(level),
                self.blocks,
            )  # fmt: skip
        self.add(level, "proposals", proposals)
        self.add(level, "probes", probes)
        rows = np.empty((len(queued), level + 2), dtype=np.int32)
        rows[:, :level] = queued[:, :level]
        rows[:, level] = mask
        rows[:, level + 1] = lengths
        self.route_candidates(level, rows, values, counted)

    def candidates(self, level: int, rows: np.ndarray, values: np.ndarray) -> None:
        """Intersect received candidate rows (read-only views of the shuffle's buffers) with every
        pending relation this worker owns."""
        plan, job = self.plan, self.job
        rows, out = rows.copy(), np.empty(len(values), dtype=np.int32)
        with self.clock(level, "kernel_us"):
            kept, probes, counted = intersect_rows(
                self.p, job.workers, self.ix, level, rows, values, out, plan.kernel, self.keep_done(level), self.blocks
            )
        self.add(level, "probes", probes)
        self.route_candidates(level, rows, out[:kept], counted)

    def keep_done(self, level: int) -> int:
        """How many agreed candidates a kernel writes out: all but at the last level, where they are
        only counted once the sample of matches is full."""
        if level + 1 < self.plan.m:
            return 1 << 62
        if self.job.sink is not None:
            return self.job.sink.room(self.listed)
        return max(0, self.job.match_limit - sum(len(m) for m in self.matches))

    def route_candidates(self, level: int, rows: np.ndarray, values: np.ndarray, counted: int) -> None:
        """Ship what other workers must still check; hand what every relation agreed on to `finish`
        (`counted` of those were only counted, at the last level)."""
        job = self.job
        self.add(level, "held_prefixes", len(rows))
        self.add(level, "held_candidates", len(values))
        self.add(level, "held_bytes", rows.nbytes + values.nbytes)
        if counted:
            self.add(level, "produced", counted)
            self.add(level, "counted", counted)
        mask, lengths = rows[:, level], rows[:, level + 1]
        alive = lengths > 0
        finished = alive & (mask == 0)
        if not finished.all():
            if self.blocks is not None:  # a row bound for a split list goes to its values' blocks
                with self.clock(level, "kernel_us"):
                    rows, dest = split_candidates(self.blocks, job.workers, level, rows, values, job.lookup_pos)
                mask, lengths = rows[:, level], rows[:, level + 1]
                finished = (lengths > 0) & (mask == 0)
            else:
                dest = next_owner(job.workers, level, rows[:, :level], mask, np.zeros(len(mask), np.int32), job.lookup_pos)
                dest[~alive | finished] = -1
            self.send(BlobKind.CANDIDATES, level, level, rows, values, level + 1, dest)
        if finished.any():
            job.finish(self, level, rows, values, finished)

    def prefixes(self, group: int, rows: np.ndarray) -> None:
        """Count new or received (group+1)-prefixes (writable rows) against every pending relation
        this worker owns; queue those that reached their proposer, ship the others on."""
        plan, job, level = self.plan, self.job, group + 1
        self.add(group, "held_prefixes", len(rows))
        self.add(group, "held_bytes", rows.nbytes)
        with self.clock(group, "kernel_us"):
            dest, lookups = count_rows(self.p, job.workers, self.ix, level, rows, plan.kernel, self.blocks)
            fan = dest == FAN_OUT
            if fan.any():  # one piece per block of a split list, each to its block's holder
                pieces, to = fan_out(self.blocks, job.workers, level, rows, fan, plan.kernel)
                rows, dest = np.concatenate([rows[~fan], pieces]), np.concatenate([dest[~fan], to])
        self.add(group, "count_lookups", lookups)
        arrived = (dest == self.p) & (rows[:, level] == 0)
        if arrived.any():
            self.arrive(level, rows[arrived])
            dest[arrived] = -1
        self.send(BlobKind.PREFIXES, group, level, rows, np.zeros(0, np.int32), -1, dest)

    # ------------------------------------------------------------------ queues and windows

    def flush_queue(self, level: int) -> None:
        """Write what reached its proposer here in this stage (prefix rows, or bigjoin-carry's
        families with their values) as one queue chunk."""
        parts = self.arrived.pop(level, [])
        if not parts:
            return
        group = level - 1
        rows = np.concatenate([r for r, _ in parts]) if len(parts) > 1 else parts[0][0]
        values = np.concatenate([v for _, v in parts]) if len(parts) > 1 else parts[0][1]
        work = int(rows[:, self.job.work_column(level)].astype(np.int64).sum())
        with self.clock(group, "pack_us"):
            meta = ChunkMeta(level=level, rows=len(rows), width=rows.shape[1], work=work, values=len(values))
            blob = exchange.pack(self.job.queue_kind(level), self.p, [rows.ravel(), values], meta)
        with self.clock(group, "io_us"):
            store.write_bytes(self.job.chunk_path(level, self.p, self.stage, self.attempt), blob)
        self.add(group, "queued_rows", len(rows))
        self.add(group, "queued_work", work)

    def queue_files(self, level: int) -> list[tuple[str, int | None]]:
        """(path, work) of this worker's queue at `level`: the driver's chunks, then those queued in
        this job's earlier stages (one attempt per stage; their work is read from the file)."""
        job = self.job
        files: list[tuple[str, int | None]] = [(c.path, c.work) for c in job.queues.get(level, [[]] * job.workers)[self.p]]
        per_stage: dict[int, str] = {}
        for path in sorted(glob.glob(chunk_glob(job.run_dir, level, self.p, job.job_id))):
            stage = stage_of(path)
            if stage is not None and stage <= self.stage:
                per_stage.setdefault(stage, path)
        return files + [(per_stage[s], None) for s in sorted(per_stage)]

    def window(self, level: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The queued prefixes this batch proposes for, from the front of the queue past what earlier
        jobs took, within the budget; with the positions [first, last) of their lists it takes."""
        budget, job = self.job.budget, self.job
        skip = job.consumed.get(level, [0] * job.workers)[self.p]
        room = budget.batch if budget.batch is not None else budget.bytes or 0
        per_row, per_value = (0, 1) if budget.batch is not None else (budget.row_bytes(level), budget.proposal_bytes(level))
        parts, firsts, lasts, at, taken = [], [], [], 0, 0
        for path, work in self.queue_files(level):
            if work is not None and at + work <= skip:
                at += work
                continue
            rows, _, chunk = map_chunk(path)
            rows_work = rows[:, level + 2].astype(np.int64)
            total = chunk.work
            whole = per_row * len(rows) + per_value * total
            if at >= skip and whole <= room:  # the whole chunk: no per-row arithmetic, no copy
                parts.append(rows)
                firsts.append(np.zeros(len(rows), np.int64))
                lasts.append(rows_work)
                take_sum, room = total, room - whole
            else:
                start = np.cumsum(rows_work) - rows_work + at
                first = np.clip(skip - start, 0, rows_work)
                take, room = _fit(rows_work - first, room, budget, level, job.whole_items(level), taken == 0)
                chosen = take > 0
                parts.append(rows[chosen])
                firsts.append(first[chosen])
                lasts.append(first[chosen] + take[chosen])
                take_sum = int(take.sum())
                if int(first.sum()) + take_sum < total:
                    room = 0
            taken += take_sum
            if at + total <= skip + taken:
                store.drop_local(path)  # used up: a re-executed task reads the store's copy
            at += total
            if room <= 0:
                break
        self.add(level, "taken_work", taken)
        if not parts:
            return np.zeros((0, level + 3), np.int32), np.zeros(0, np.int64), np.zeros(0, np.int64)
        if len(parts) == 1:
            return parts[0], firsts[0], lasts[0]
        return np.concatenate(parts), np.concatenate(firsts), np.concatenate(lasts)

    # ------------------------------------------------------------------ output

    def send(
        self, kind: int, group: int, level: int, rows: np.ndarray, values: np.ndarray, length_col: int, dest: np.ndarray
    ) -> None:
        """Write every row with dest >= 0 (and its values) into blobs for its destination, each of at
        most about MAX_BLOB_BYTES (the rows are cut into runs by their bytes)."""
        job = self.job
        if not (dest >= 0).any():
            return
        if self.stage >= job.last_stage(group):
            raise ExecutionError(f"level {group}: items still pending after its last exchange (stage {self.stage})")
        with self.clock(group, "pack_us"):
            lengths = rows[:, length_col].astype(np.int64) if length_col >= 0 else np.zeros(len(rows), np.int64)
            ends = np.cumsum(np.where(dest >= 0, 4 * (rows.shape[1] + lengths), 0))
            marks = np.arange(1, int(ends[-1] // exchange.MAX_BLOB_BYTES) + 1) * exchange.MAX_BLOB_BYTES
            bounds = [0, *sorted({int(c) + 1 for c in np.searchsorted(ends, marks) if c + 1 < len(rows)}), len(rows)]
            starts = np.concatenate([[0], np.cumsum(lengths)])
        for a, b in itertools.pairwise(bounds):
            self._send_run(kind, group, level, rows[a:b], values[starts[a] : starts[b]], length_col, dest[a:b])

    def _send_run(self, kind: int, group: int, level: int, rows, values, length_col: int, dest) -> None:
        job = self.job
        with self.clock(group, "pack_us"):
            items, vals = destination_sizes(dest, rows, length_col, job.workers)
            width = rows.shape[1]
            targets = [q for q in range(job.workers) if items[q]]
            blobs = [
                (
                    q,
                    RowsMeta(group=job.tag + group, level=level, rows=int(items[q]), width=width),
                    [(np.int32, int(items[q]) * width), (np.int32, int(vals[q]))],
                )
                for q in targets
            ]
            buffer, places = exchange.layout(kind, blobs)
            row_at = np.zeros(job.workers, np.int64)
            value_at = np.zeros(job.workers, np.int64)
            for q, (_, _, offsets) in zip(targets, places):
                row_at[q], value_at[q] = offsets[0] // 4, offsets[1] // 4
            scatter_rows(dest, rows, values, length_col, buffer.view(np.int32), row_at, value_at)
        for q, (start, end, _) in zip(targets, places):
            self.outgoing.append((int(job.tokens[q]), buffer[start:end]))
            self.add(group, "sent_prefixes", items[q])
            self.add(group, "sent_candidates", vals[q])
            if q != self.p:
                self.add(group, "sent_remote_prefixes", items[q])
                self.add(group, "sent_remote_candidates", vals[q])

    def count_matches(self, level: int, rows: np.ndarray, values: np.ndarray, take: np.ndarray, produced: int) -> None:
        self.add(level, "counted", produced)
        if self.job.sink is not None:  # keep_done wrote only what the sink still takes
            self.listed.append(extend_rows(rows, values, level, take, 0)[:, : level + 1])
            return
        have = sum(len(m) for m in self.matches)
        if self.job.match_limit > have:
            # At the last level only the sample's values were written (keep_done): few rows.
            self.matches.append(extend_rows(rows, values, level, take, 0)[: self.job.match_limit - have, : level + 1])

    def drain(self):
        out, self.outgoing = self.outgoing, []
        for token, blob in out:
            yield from exchange.blob_batches([token], [blob])

    def output(self, final: bool):
        """This worker's counters (and sampled matches): to itself for the next stage, or (after the
        last stage) to the driver."""
        if self.listed:
            with self.clock(self.plan.m - 1, "io_us"):
                job = self.job
                assert job.sink is not None
                job.sink.write_task(job.job_id, self.stage, self.p, self.attempt, self.listed)
        stats = np.concatenate(self.carried + [self.records[level][None, :] for level in sorted(self.records)])
        tag = self.job.tag
        side = [pack_table(BlobKind.STATS, self.p, stats, tag)]
        if self.matches:
            found = np.concatenate(self.matches)[: self.job.match_limit]
            side.append(pack_table(BlobKind.MATCHES, self.p, found, tag))
        token = exchange.TO_DRIVER if final else int(self.job.tokens[self.p])
        yield from exchange.blob_batches([token] * len(side), side)


def _fit(
    avail: np.ndarray, room: int, budget: Budget, level: int, cut_whole: bool = False, first: bool = False
) -> tuple[np.ndarray, int]:
    """How much of each row's available work a window takes, in order, within `room` (bytes, or
    proposals with a pinned B'); and the room left. With `cut_whole`, rows are taken whole or not at all,
    and the `first` row of a window is taken even past the budget (bigjoin-carry: a candidate set the
    next level carries is never cut; a row holds at most one list)."""
    take = np.zeros(len(avail), dtype=np.int64)
    if room <= 0 or not len(avail):
        return take, room
    if budget.batch is not None:
        cost = avail
        per_row, per_value = 0, 1
    else:
        per_row, per_value = budget.row_bytes(level), budget.proposal_bytes(level)
        cost = np.where(avail > 0, per_row + avail * per_value, 0)
    spent = np.cumsum(cost)
    whole = int(np.searchsorted(spent, room, side="right"))  # rows that fit entirely
    take[:whole] = avail[:whole]
    used = int(spent[whole - 1]) if whole else 0
    if whole < len(avail) and avail[whole] > 0:  # part of the next row's list
        part = (room - used - per_row) // per_value if per_value else 0  # free values: the row's own bytes did not fit
        if cut_whole and (whole > 0 or not first):
            part = 0
        elif cut_whole:
            part = int(avail[whole])  # the window's first row, whole, however long
        if part > 0:
            take[whole] = min(int(avail[whole]), part)
            used += per_row + int(take[whole]) * per_value
    if whole < len(avail):
        return take, 0  # the budget is spent: a later job takes the rest
    return take, room - used


TAG_STRIDE = 64  # an extension's groups are tag + level, its tag a multiple of this (m < 64)


@dataclass
class DataflowGroup:
    """Several extensions (DataflowJobs with distinct tags and run_dirs) in one Spark job: each stage
    runs every extension's stage on its own blobs, so each keeps its own windows within its own
    budget. With a `prelude`, the start tasks first run it on their input and worker (Delta-BiGJoin
    applies its update batch there); the blobs it returns travel to the driver (JobResult.reports)."""

    jobs: list[DataflowJob]
    prelude: Callable[[Iterator, int], list[exchange.Blob]] | None = None

    @property
    def workers(self) -> int:
        return self.jobs[0].workers

    @property
    def tokens(self) -> np.ndarray:
        return self.jobs[0].tokens

    @property
    def exchanges(self) -> int:  # an extension that finishes earlier idles (its stages only carry counters)
        return max(job.exchanges for job in self.jobs)

    def parts(self) -> list[tuple[int, int, int, int]]:
        return [part for job in self.jobs for part in job.parts()]

    def queued_chunk_path(self, group: int, worker: int, stage: int, attempt: int) -> str:
        job = next(job for job in self.jobs if job.tag == group - group % TAG_STRIDE)
        return job.queued_chunk_path(group, worker, stage, attempt)

    def cleanup(self) -> None:
        for job in self.jobs:
            job.cleanup()

    def start_task(self, final: bool):
        def start(iterator):
            p = exchange.current_partition()
            if self.prelude is not None:
                reports = self.prelude(iterator, p)
            else:
                reports = []
                for _ in iterator:
                    pass
            for worker in self.workers_at(0, p):
                yield from worker.run([], final)
            yield from self._carry(reports, p, final)

        return start

    def stage_task(self, number: int, final: bool):
        def run_stage(iterator):
            p = exchange.current_partition()
            workers = self.workers_at(number, p)
            by_tag: dict[int, list] = {}
            reports = []
            with workers[0].clock(None, "pack_us"):
                for kind, meta, arrays in exchange.received(iterator, p):
                    if kind in (BlobKind.STATS, BlobKind.MATCHES):
                        by_tag.setdefault(TableMeta(*meta).group, []).append((kind, meta, arrays))
                    elif kind in (BlobKind.CANDIDATES, BlobKind.PREFIXES, BlobKind.FAMILIES):
                        group = RowsMeta(*meta).group
                        by_tag.setdefault(group - group % TAG_STRIDE, []).append((kind, meta, arrays))
                    else:  # the prelude's reports, on their way to the driver
                        reports.append(exchange.pack(kind, p, arrays, meta))
            for worker in workers:
                yield from worker.run(by_tag.pop(worker.job.tag, []), final)
            yield from self._carry(reports, p, final)

        return run_stage

    def workers_at(self, stage: int, p: int) -> list[WorkerStage]:
        """Every extension's worker of one stage, in the jobs' order; each sees the others by tag (an
        extension may hand its prefixes to another's: Delta-BiGJoin's shared delta queries)."""
        workers = [WorkerStage(job, stage, p) for job in self.jobs]
        siblings = {worker.job.tag: worker for worker in workers}
        for worker in workers:
            worker.siblings = siblings
        return workers

    def _carry(self, reports: list[exchange.Blob], p: int, final: bool):
        if reports:
            token = exchange.TO_DRIVER if final else int(self.tokens[p])
            yield from exchange.blob_batches([token] * len(reports), reports)
