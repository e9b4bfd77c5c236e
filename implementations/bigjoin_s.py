"""`bigjoin-s` (§3.4): BiGJoin made skew-resilient. Everything that differs from BiGJoin is here:

1. Indices (`balanced_index`): a count index by hash(key), an extension-resolver index by
   hash(key, position) and a membership index by hash(src, dst), so no worker holds a whole list.
2. Prefixes stay with the worker that holds them, as (p, min-i, start, end) ranges. Their lookups
   travel instead, in request/answer round trips, and each worker sends one request per distinct
   lookup key (Extension-Resolve, Intersect, Count aggregate identical keys locally).
3. Balance: after Count, each worker splits its total proposal work T into W ranges of about T/W,
   one for every worker (a prefix's list may be cut between workers).
4. Batching: the deepest level where *every* worker has B' proposal work waiting.

Shared with BiGJoin: the plan, the scheduler loop and its counters, the per-worker queues and their
work windows, the blob exchange and the job driver (`prefix_extension.run_job`).

Counts come from the count index, which holds whole-list sizes: order constraints (symmetry
breaking) are applied to the resolved candidates, not to the counts."""
from __future__ import annotations

import io
import os
import shutil
from dataclasses import dataclass
from typing import cast

import numpy as np

from harness import store
from harness.errors import ExecutionError

from . import balanced_index, exchange
from .balanced_index import (
    BalancedIndex,
    Partition,
    edge_owner,
    resolver_code,
    resolver_owner,
)
from .bigjoin import Batches, BiGJoin
from .constants import BOTH, FORWARD, REVERSE
from .distributed_index import PartitionedIndex
from .exchange import BlobKind
from .keys import edge_code, partition_of
from .prefix_extension import (
    ITEM_KINDS,
    ExtensionJob,
    StageBase,
    _concat,
    _Items,
    pack_items,
    take_window,
    unpack_items,
)

RESOLVE, MEMBER, COUNT = 0, 1, 2  # lookup operations
MAX_LOOKUPS_PER_BLOB = 4 << 20


@dataclass
class Ranges(_Items):
    """Queued work: positions [start, end) of prefix p's list in relation min_rel."""
    KIND = BlobKind.RANGES
    prefix: np.ndarray
    min_rel: np.ndarray
    start: np.ndarray
    end: np.ndarray
    split: np.ndarray  # reverse-list size of the proposing key (a BOTH list reads reverse ++ forward)

    def work(self) -> np.ndarray:
        return self.end - self.start


ITEM_KINDS[BlobKind.RANGES] = Ranges


class AllWorkersFull(Batches):
    """BiGJoin-S's batching rule: a level is full when every worker has B' work waiting."""

    def full(self, level: int) -> bool:
        return min(self.remaining(level), default=0) >= self.budget


@dataclass
class BalancedJob(ExtensionJob):
    """One batch of BiGJoin-S at level j: requester phases (even stages) alternate with owner phases
    (odd stages) that answer lookups; non-final levels end with Balance and one more exchange."""

    def steps(self) -> list[int]:
        p, j = self.plan, self.level
        if j == 0:
            return []  # seeding: every 1-prefix is counted by its own worker
        return [RESOLVE] + [MEMBER] * (int(p.rel_count[j]) - 1) + ([COUNT] if j + 1 < p.m else [])

    @property
    def last_level(self) -> bool:
        return self.level + 1 == self.plan.m

    @property
    def exchanges(self) -> int:
        return 2 * len(self.steps()) + (0 if self.last_level else 1)

    def state_path(self, p: int, stage: int) -> str:
        return os.path.join(self.run_dir, "state", f"j{self.job_id:06d}", f"p{p}-s{stage}.npz")

    def cleanup(self) -> None:
        shutil.rmtree(os.path.join(self.run_dir, "state", f"j{self.job_id:06d}"), ignore_errors=True)

    def start_task(self, final: bool):
        return self.stage_task(0, final)

    def stage_task(self, number: int, final: bool):
        job = self

        def run(iterator):
            p = exchange.current_partition()
            stage = _BalancedStage(job, number, p)
            if number == 0:  # the start stage reads no exchange
                for _ in iterator:
                    pass
                received = []
            else:
                with stage.clock("pack_us"):
                    received = list(exchange.received(iterator, p))
            yield from stage.run(received, final)
        return run


class _BalancedStage(StageBase):
    """One worker in one stage of a BiGJoin-S batch: requester, owner, or receiver of Balance's ranges."""
    job: BalancedJob

    def __init__(self, job: BalancedJob, stage: int, p: int):
        super().__init__(job, stage, p)
        with self.clock("io_us"):
            self.index = Partition.load(job.index_root, p)
        self.steps = job.steps()
        self.tokens: list[int] = []
        self.payloads: list[bytes] = []

    # --------------------------------------------------------------- stage roles

    def run(self, received, final: bool):
        s = self.stage
        data = [(kind, meta, arrays) for kind, meta, arrays in received if not self.side_input(kind, meta, arrays)]
        if s == 2 * len(self.steps) + 1:  # after Balance: queue the ranges this worker received
            self._queue_ranges(data)
        elif s % 2 == 1:
            with self.clock("kernel_us"):
                self._answer(data)
        else:
            self._requester(s // 2, data)
        return self.output(self.tokens, self.payloads, final)

    def _send(self, q: int, payload: bytes, remote_field: str, count: int) -> None:
        self.tokens.append(int(self.job.tokens[q]))
        self.payloads.append(payload)
        if q != self.p:
            self.add(remote_field, count)

    def _answer(self, data) -> None:
        """Owner role: answer every lookup this worker received, back to its requester."""
        for _kind, (op, requester, offset), arrays in data:
            codes = np.cumsum(arrays[0])  # sent as deltas of the sorted keys
            self.add("received_lookups", len(codes))
            if op == RESOLVE:
                answer = self.index.resolve(codes)
            elif op == MEMBER:  # only the hits go back: a lookup not named is a "no"
                answer = np.flatnonzero(self.index.contains(codes)).astype(np.int32)
            else:
                answer = self.index.counts(codes.astype(np.int32)).ravel()
            tuples = len(answer) // (2 if op == COUNT else 1)
            if op != COUNT:  # resolved values (sorted within a list) and hit positions go as deltas too
                answer = np.diff(answer, prepend=np.int32(0)).astype(np.int32)
            blob = exchange.pack(BlobKind.ANSWERS, requester, [answer], (op, self.p, offset, len(codes)))
            self._send(requester, blob, "sent_remote_answers", tuples)

    def _queue_ranges(self, data) -> None:
        parts = [unpack_items(kind, meta, arrays) for kind, meta, arrays in data if kind == BlobKind.RANGES]
        ranges = _concat(parts, Ranges.empty(self.job.level + 1))
        self.add("received_ranges", len(ranges.prefix))
        if len(ranges.prefix):
            self.queue(ranges)

    def _requester(self, phase: int, data) -> None:
        job, j = self.job, self.job.level
        if j == 0:
            return self._seed()
        if phase == 0:
            with self.clock("io_us"):
                items, first, last = take_window(job, self.p, Ranges.empty(j))
            state = _open_ranges(items, first, last)
            self.add("held_prefixes", len(items.prefix))
        else:
            with self.clock("io_us"):
                state = _load_state(job.state_path(self.p, self.stage - 2))
            width = 2 if self.steps[phase - 1] == COUNT else 1
            answers, n = _gather_answers(data, state["lookup_dest"], job.workers, width)
            self.add("received_answers", n)
            with self.clock("kernel_us"):
                state = self._apply(self.steps[phase - 1], phase - 1, state, answers[state["lookup_inverse"]])
        self.add("held_candidates", len(state.get("value", state.get("lookup_item", ()))))
        if phase < len(self.steps):
            with self.clock("kernel_us"):
                self._request(self.steps[phase], phase, state)
            with self.clock("io_us"):
                _save_state(job.state_path(self.p, self.stage), state)
        elif job.last_level:
            self._count_matches(state)
        else:
            self._balance(state["new_prefix"], state["min_rel"], state["min_count"], state["split"])

    # --------------------------------------------------------------- lookups

    def _request(self, op: int, step: int, state: dict) -> None:
        """Aggregate identical lookup keys, then send each distinct key to its owner once."""
        plan, j, w = self.job.plan, self.job.level, self.job.workers
        if op == RESOLVE:  # the k-th entry of a BOTH list is in reverse ++ forward
            item = state["lookup_item"]
            r = state["min_rel"][item]
            key, kind = state["prefix"][item, plan.rel_pos[j][r]], plan.rel_kind[j][r]
            k, split = state["lookup_pos_in_range"], state["split"][item]
            reverse = (kind == REVERSE) | ((kind == BOTH) & (k < split))
            codes = resolver_code(key, reverse, np.where((kind == BOTH) & ~reverse, k - split, k))
            self.add("proposals", len(codes))
        elif op == MEMBER:
            t = step - 1  # the t-th relation other than the proposer
            item = state["item"]
            r = t + (t >= state["min_rel"][item])
            key = state["prefix"][item, plan.rel_pos[j][r]]
            kind = plan.rel_kind[j][r]
            e = state["value"]
            src = np.where(kind == FORWARD, key, np.where(kind == REVERSE, e, np.minimum(key, e)))
            dst = np.where(kind == FORWARD, e, np.where(kind == REVERSE, key, np.maximum(key, e)))
            codes = edge_code(src, dst)
            self.add("probes", len(codes))
        else:
            new = state["new_prefix"]
            codes = new[:, plan.rel_pos[j + 1][: int(plan.rel_count[j + 1])]].astype(np.int64).ravel()
            self.add("count_lookups", len(codes))
        unique, inverse = np.unique(codes, return_inverse=True)
        self.add("lookups_aggregated", len(codes) - len(unique))
        if op == RESOLVE:
            dest = resolver_owner(unique, w)
        elif op == MEMBER:
            dest = edge_owner(unique, w)
        else:
            dest = partition_of(unique, w)
        state["lookup_dest"], state["lookup_inverse"] = dest, inverse.ravel()
        self.add("sent_lookups", len(unique))
        for q, sel in exchange.by_destination(dest, w):
            for offset in range(0, len(sel), MAX_LOOKUPS_PER_BLOB):
                piece = unique[sel[offset:offset + MAX_LOOKUPS_PER_BLOB]]
                # Sorted keys go as deltas: mostly small numbers, which Spark's shuffle compression shrinks.
                deltas = np.diff(piece, prepend=np.int64(0))
                self._send(q, exchange.pack(BlobKind.LOOKUPS, q, [deltas], (op, self.p, offset)), "sent_remote_lookups", len(piece))

    def _apply(self, op: int, step: int, state: dict, answer: np.ndarray) -> dict:
        plan, j = self.job.plan, self.job.level
        if op == RESOLVE:
            item, value = state["lookup_item"], answer.astype(np.int32)
            prefix = state["prefix"]
            keep = np.ones(len(value), dtype=bool)
            for q in range(j):  # order constraints, inequalities and self-loops, locally
                if plan.above[j, q]:
                    keep &= value > prefix[item, q]
                if plan.below[j, q]:
                    keep &= value < prefix[item, q]
                if plan.differ[j, q]:
                    keep &= value != prefix[item, q]
            if plan.loop[j]:
                keep &= np.isin(value, self.index.loops)
            state = {"prefix": prefix, "min_rel": state["min_rel"], "item": item[keep], "value": value[keep]}
        elif op == MEMBER:
            keep = answer.astype(bool)
            state["item"], state["value"] = state["item"][keep], state["value"][keep]
        else:
            self._minimise(state, answer.reshape(-1, int(plan.rel_count[j + 1]), 2))
        if op != COUNT and step + 1 == int(plan.rel_count[j]):  # every relation of a_j agreed
            self.add("produced", len(state["value"]))
            if not self.job.last_level:
                state["new_prefix"] = np.column_stack([state["prefix"][state["item"]], state["value"]]).astype(np.int32)
        return state

    def _minimise(self, state: dict, degrees: np.ndarray) -> None:
        """Count: each new prefix's smallest list (ties to the lower relation), dropping empty ones."""
        plan, j = self.job.plan, self.job.level
        counts = _list_sizes(degrees, plan.rel_kind[j + 1][: int(plan.rel_count[j + 1])])
        min_rel = counts.argmin(axis=1).astype(np.int32)
        rows = np.arange(len(counts))
        state["min_count"] = counts[rows, min_rel]
        state["split"] = degrees[rows, min_rel, 1]
        state["min_rel"] = min_rel
        keep = state["min_count"] > 0
        for name in ("new_prefix", "min_rel", "min_count", "split"):
            state[name] = state[name][keep]

    def _seed(self) -> None:
        """Level 0: this worker's count-index keys are 1-prefixes, and their counts are local."""
        plan = self.job.plan
        keys = np.asarray(self.index.count_keys)
        if plan.loop[0]:
            keys = keys[np.isin(keys, self.index.loops)]
        self.add("held_prefixes", len(keys))
        state = {"new_prefix": keys.reshape(-1, 1).astype(np.int32)}
        relations = int(plan.rel_count[1])
        self.add("count_lookups", len(keys) * relations)
        self._minimise(state, np.repeat(self.index.counts(keys)[:, None, :], relations, axis=1))
        self._balance(state["new_prefix"], state["min_rel"], state["min_count"], state["split"])

    # --------------------------------------------------------------- balance and output

    def _balance(self, prefix, min_rel, min_count, split) -> None:
        """Balance: hand every worker an equal share of this worker's proposal work."""
        w = self.job.workers
        # In a random order, each worker's share holds about the same number of prefixes as well as
        # the same work (in rank order, low-degree prefixes would crowd into the first shares).
        shuffle = np.random.default_rng((self.job.job_id, self.p)).permutation(len(min_count))
        item, q, start, end = split_work(min_count[shuffle], w)
        item = shuffle[item]
        ranges = Ranges(prefix[item], min_rel[item], start, end, split[item])
        for dest, sel in exchange.by_destination(q, w):
            self._send(dest, pack_items(ranges.take(sel), dest), "sent_remote_ranges", len(sel))

    def _count_matches(self, state: dict) -> None:
        n = len(state["value"])
        self.add("counted", n)
        if self.job.match_limit and n:
            take = min(n, self.job.match_limit)
            rows = np.column_stack([state["prefix"][state["item"][:take]], state["value"][:take]])
            self.matches.append(rows.astype(np.int32))


def split_work(work: np.ndarray, workers: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Cut the items' work, laid end to end (total T), into `workers` consecutive ranges of
    floor or ceil of T/W. Returns (item, worker, start, end) per piece; at most n + W pieces."""
    work = work.astype(np.int64)
    begin = np.cumsum(work) - work
    bounds = (np.arange(workers + 1, dtype=np.int64) * int(work.sum())) // workers
    first = np.searchsorted(bounds, begin, side="right") - 1
    last = np.searchsorted(bounds, begin + work - 1, side="right") - 1
    pieces = np.where(work > 0, last - first + 1, 0)
    item = np.repeat(np.arange(len(work)), pieces)
    q = first[item] + (np.arange(int(pieces.sum())) - np.repeat(np.cumsum(pieces) - pieces, pieces))
    start = np.maximum(begin[item], bounds[q]) - begin[item]
    end = np.minimum(begin[item] + work[item], bounds[q + 1]) - begin[item]
    keep = end > start  # a worker whose share is empty (T < W) gets no piece
    return item[keep], q[keep], start[keep].astype(np.int32), end[keep].astype(np.int32)


def _save_state(path: str, state: dict) -> None:
    """A requester's state between its phases (a file per stage, so a re-executed task finds its input),
    kept locally and checkpointed to the store like a queue chunk."""
    buffer = io.BytesIO()
    np.savez(buffer, **state)
    store.write_bytes(path, buffer.getvalue())


def _load_state(path: str) -> dict:
    with np.load(io.BytesIO(store.read_bytes(path))) as saved:
        state = dict(saved)
    store.drop_local(path)  # read once; a re-executed task reads the checkpoint
    return state


def _open_ranges(items: Ranges, first: np.ndarray, last: np.ndarray) -> dict:
    """Extension-Resolve requests for the window: one (key, kind, position) per unit of work."""
    job_work = (last - first).astype(np.int64)
    item = np.repeat(np.arange(len(job_work)), job_work)
    pos = (items.start[item].astype(np.int64) + first[item]
           + np.arange(int(job_work.sum())) - np.repeat(np.cumsum(job_work) - job_work, job_work))
    return {"prefix": items.prefix, "min_rel": items.min_rel, "split": items.split, "lookup_item": item,
            "lookup_pos_in_range": pos}


def _gather_answers(data, dest: np.ndarray, workers: int, width: int) -> tuple[np.ndarray, int]:
    """Answers to this worker's distinct lookups, in the order of its sorted lookup keys, and the
    tuples that carried them."""
    sent_to = dict(exchange.by_destination(dest, workers))  # the order _request sent them in
    out = np.zeros((len(dest), width), dtype=np.int32)
    answered = tuples = 0
    for kind, (op, owner, offset, looked_up), arrays in data:
        if kind != BlobKind.ANSWERS:
            continue
        mine = sent_to[owner][offset: offset + looked_up]
        values = arrays[0] if op == COUNT else np.cumsum(arrays[0], dtype=np.int64)
        if op == MEMBER:  # the positions of the hits
            out[mine[values]] = 1
            tuples += len(values)
        else:
            out[mine] = values.reshape(-1, width)
            tuples += len(mine)
        answered += len(mine)
    if answered != len(dest):
        raise ExecutionError(f"{answered} of {len(dest)} lookups answered")
    return (out if width > 1 else out[:, 0]), tuples


def _list_sizes(degrees: np.ndarray, kinds: np.ndarray) -> np.ndarray:
    """(n, R) list sizes from (n, R, 2) forward/reverse sizes and each relation's kind."""
    forward, reverse = degrees[:, :, 0].astype(np.int64), degrees[:, :, 1].astype(np.int64)
    return np.where(kinds == FORWARD, forward, np.where(kinds == REVERSE, reverse, forward + reverse))


class BiGJoinS(BiGJoin):
    name = "bigjoin-s"
    description = "BiGJoin-S: skew-resilient BiGJoin (balanced indices, aggregated lookups, Balance)"
    job_class = BalancedJob
    batches_class = AllWorkersFull

    def prepare(self) -> None:
        super().prepare()  # the key-partitioned index, shared with bigjoin; ours is derived from it
        key = ("balanced-index", self.ctx.workers)
        reused = key in self.ctx.arrangements
        if not reused:
            # self.index is still the key-partitioned index super().prepare() set
            self.ctx.arrangements[key] = balanced_index.build(self.ctx.spark, cast(PartitionedIndex, self.index))
        self.index_reused = self.index_reused and reused
        self.index: BalancedIndex = self.ctx.arrangements[key]
