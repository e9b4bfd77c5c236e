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

This module holds one worker's share of one stage (`StageBase`, and BiGJoin's `Stage`), the
counters each stage records (`FIELDS`), and the blobs those counters and the sampled matches
travel in (`pack_table`)."""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from harness.core import store
from harness.core.errors import ExecutionError
from implementations.extension.items import Candidates, Prefixes, _Items, concat_items, pack_items
from implementations.gj import exchange
from implementations.gj.exchange import BlobKind
from implementations.gj.extension_kernels import count_items, intersect_items, next_owner, propose_items
from implementations.gj.kernel_signatures import signatures

if TYPE_CHECKING:
    from implementations.extension.job import ExtensionJob


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


class TableMeta(NamedTuple):
    """The meta of a STATS or MATCHES blob, whose one array is a matrix (counter rows, or matches):
    its shape, and the extension it belongs to (a one-level job's group, a dataflow's tag)."""

    rows: int
    columns: int
    group: int


def pack_table(kind: int, dest: int, table: np.ndarray, group: int) -> exchange.Blob:
    rows, columns = table.shape
    return exchange.pack(kind, dest, [table.ravel()], TableMeta(rows=rows, columns=columns, group=group))


def unpack_table(meta: tuple[int, ...], arrays: list[np.ndarray]) -> np.ndarray:
    """The matrix of a STATS or MATCHES blob, as a view of the received data."""
    shape = TableMeta(*meta)
    return arrays[0].reshape(shape.rows, shape.columns)


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

    def side_input(self, kind: int, meta: tuple[int, ...], arrays: list[np.ndarray]) -> bool:
        """Take a STATS or MATCHES blob travelling with the data; False for any other kind."""
        if kind == BlobKind.STATS:
            self.stats.append(unpack_table(meta, arrays))
        elif kind == BlobKind.MATCHES:
            self.matches.append(unpack_table(meta, arrays))
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
        side = [pack_table(BlobKind.STATS, self.p, stats, group)]
        if self.matches:
            found = np.concatenate(self.matches)[: self.job.match_limit]
            side.append(pack_table(BlobKind.MATCHES, self.p, found, group))
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
        return concat_items([prefixes, new], Prefixes.empty(j + 1))

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
