"""`bigjoin-s-paper` (§3.4 as published): BiGJoin made skew-resilient by request/answer lookups.
`bigjoin-s` is the same idea on BiGJoin's dataflow and kernels; this is the paper's design, kept so
that it can be run and compared as published. Everything that differs from BiGJoin is here:

1. Indices (`balanced_index`): a count index by hash(key), an extension-resolver index by
   hash(key, position) and a membership index by hash(src, dst), so no worker holds a whole list.
2. Prefixes stay with the worker that holds them, as (p, min-i, start, end) ranges. Their lookups
   travel instead, to the owners `ANSWERERS` names per operator, in request/answer round trips (the
   stages `phases` lists), and each worker sends one request per distinct lookup key
   (Extension-Resolve, Intersect, Count aggregate identical keys locally).
3. Balance: after Count, each worker splits its total proposal work T into W ranges of about T/W,
   one for every worker (a prefix's list may be cut between workers).
4. Batching: the deepest level where *every* worker has B' proposal work waiting.

Shared with BiGJoin: the plan, the scheduler loop and its counters, the per-worker queues and their
work windows, the blob exchange and the job driver (`extension.job.run_job`).

Counts come from the count index, which holds whole-list sizes: order constraints (symmetry
breaking) are applied to the resolved candidates, not to the counts."""

from __future__ import annotations

import io
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from enum import Enum
from typing import NamedTuple, cast

import numpy as np

from harness.core import store
from harness.core.errors import ExecutionError
from implementations.bigjoin import LEVEL_PARAMS, Batches, BiGJoin
from implementations.extension.items import ITEM_KINDS, Operator, _Items, concat_items, pack_items, take_window, unpack_items
from implementations.extension.job import ExtensionJob
from implementations.extension.stage import StageBase
from implementations.gj import exchange
from implementations.gj.constants import BOTH, FORWARD, REVERSE
from implementations.gj.exchange import BlobKind
from implementations.gj.extension_kernels import filter_candidates
from implementations.gj.keys import edge_code, partition_of
from implementations.gj.plan import ExtensionPlan
from implementations.indices import balanced_index
from implementations.indices.balanced_index import BalancedIndex, Partition, edge_owner, resolver_code, resolver_owner
from implementations.indices.distributed_index import PartitionedIndex

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
        return min(self.remaining(level), default=0) >= self.budget[level]


class Lookup(NamedTuple):
    """One round of remote lookups: an operator; for Intersect, which relation other than the
    proposer's (0, 1, ...) it tests, for Anti which of `anti_lists` (0, 1, ...); whether its answers
    complete the candidates of the level."""

    operator: Operator
    other: int = 0
    completes: bool = False


class LookupMeta(NamedTuple):
    """The meta of a LOOKUPS blob: what it asks, who asks, and where its keys start among the
    distinct keys the requester sends this owner (`MAX_LOOKUPS_PER_BLOB` a blob)."""

    operator: int  # an Operator
    requester: int
    offset: int


class AnswerMeta(NamedTuple):
    """The meta of an ANSWERS blob: who answers, and the LOOKUPS blob it answers (its operator,
    offset and number of keys)."""

    operator: int  # an Operator
    answerer: int
    offset: int
    looked_up: int


class Role(Enum):
    SEED = "seed"  # level 0: count this worker's keys locally, then Balance
    REQUEST = "request"  # apply the answers to the previous lookup, then send the next (or finish the level)
    ANSWER = "answer"  # answer the lookups this worker owns
    QUEUE = "queue"  # queue the ranges Balance sent here


class Phase(NamedTuple):
    role: Role
    applies: Lookup | None = None  # REQUEST: the lookup whose answers arrived
    sends: Lookup | None = None  # REQUEST: the lookup to send next; None finishes the level


def phases(plan: ExtensionPlan, level: int) -> list[Phase]:
    """The stages of one BiGJoin-S batch at `level`, in order: requester phases alternate with owner
    phases; a level that is not the last ends with Balance, whose ranges the next stage queues."""
    if level == 0:
        return [Phase(Role.SEED), Phase(Role.QUEUE)]
    last, relations, antis = level + 1 == plan.m, int(plan.rel_count[level]), len(anti_lists(plan, level))
    lookups = [Lookup(Operator.PROPOSE, completes=relations == 1 and not antis)]
    lookups += [Lookup(Operator.INTERSECT, t, completes=t == relations - 2 and not antis) for t in range(relations - 1)]
    lookups += [Lookup(Operator.ANTI, t, completes=t == antis - 1) for t in range(antis)]
    if not last:
        lookups.append(Lookup(Operator.COUNT))
    out: list[Phase] = []
    for k in range(len(lookups) + 1):
        out.append(Phase(Role.REQUEST, lookups[k - 1] if k else None, lookups[k] if k < len(lookups) else None))
        if k < len(lookups):
            out.append(Phase(Role.ANSWER))
    return out if last else [*out, Phase(Role.QUEUE)]


def anti_lists(plan: ExtensionPlan, level: int) -> list[int]:
    """The anti-relations of `level` tested by membership lookups (a directed `!a-a`, keyed by the
    candidate itself, is a filter against the self-loops instead: `no_loop`)."""
    return [a for a in range(int(plan.anti_count[level])) if plan.anti_pos[level, a] != level]


def no_loop(plan: ExtensionPlan, level: int) -> bool:
    """Whether a value at `level` must not have a self-loop (a directed `!a-a`)."""
    return any(plan.anti_pos[level, a] == level for a in range(int(plan.anti_count[level])))


class Answerer(NamedTuple):
    """Who answers one operator's lookups in BiGJoin-S, and how: the worker owning each lookup code,
    and the Partition method that answers a batch of them there."""

    owner: Callable[[np.ndarray, int], np.ndarray]  # (codes, workers) -> the answering worker of each
    answer: Callable[[Partition, np.ndarray], np.ndarray]


# BiGJoin-S's difference from BiGJoin in one table: a lookup travels to the owner of its entry in one
# of the three balanced indices (BiGJoin instead moves the prefix to the owner of the key's lists).
ANSWERERS = {
    Operator.COUNT: Answerer(partition_of, Partition.counts),  # count index, by hash(key)
    Operator.PROPOSE: Answerer(resolver_owner, Partition.resolve),  # resolver, by hash(key, position)
    Operator.INTERSECT: Answerer(edge_owner, Partition.contains),  # membership, by hash(src, dst)
    Operator.ANTI: Answerer(edge_owner, Partition.contains),  # the same lookup: its hits are dropped
}
MEMBERSHIP = (Operator.INTERSECT, Operator.ANTI)  # answered with the positions of the hits only


def _no_rows() -> np.ndarray:
    return np.zeros((0, 0), np.int32)


def _no_int32() -> np.ndarray:
    return np.zeros(0, np.int32)


def _no_int64() -> np.ndarray:
    return np.zeros(0, np.int64)


@dataclass
class Requests:
    """A requester's state between its phases: the window's prefixes, one entry per lookup or
    candidate (`item` names its prefix), the new prefixes Count minimises over, and where the
    pending lookups went. Saved between stages (a file per stage, so a re-executed task finds its input)."""

    prefix: np.ndarray = field(default_factory=_no_rows)
    min_rel: np.ndarray = field(default_factory=_no_int32)
    split: np.ndarray = field(default_factory=_no_int32)
    item: np.ndarray = field(default_factory=_no_int64)
    position: np.ndarray = field(default_factory=_no_int64)  # Propose: the position in the item's list to resolve
    value: np.ndarray = field(default_factory=_no_int32)  # after Propose: the candidate
    new_prefix: np.ndarray = field(default_factory=_no_rows)
    new_min_rel: np.ndarray = field(default_factory=_no_int32)
    new_min_count: np.ndarray = field(default_factory=_no_int32)
    new_split: np.ndarray = field(default_factory=_no_int32)
    lookup_dest: np.ndarray = field(default_factory=_no_int64)  # per distinct lookup key, sorted: its owner
    lookup_inverse: np.ndarray = field(default_factory=_no_int64)  # per entry: its distinct lookup key

    def keep(self, mask: np.ndarray) -> None:
        self.item, self.value = self.item[mask], self.value[mask]

    def keep_new(self, mask: np.ndarray) -> None:
        for name in ("new_prefix", "new_min_rel", "new_min_count", "new_split"):
            setattr(self, name, getattr(self, name)[mask])

    def save(self, path: str) -> None:
        """Kept locally and checkpointed to the store like a queue chunk."""
        buffer = io.BytesIO()
        np.savez(buffer, **{f.name: getattr(self, f.name) for f in fields(self)})
        store.write_bytes(path, buffer.getvalue())

    @classmethod
    def load(cls, path: str) -> Requests:
        with np.load(io.BytesIO(store.read_bytes(path))) as saved:
            state = cls(**{name: saved[name] for name in saved.files})
        store.drop_local(path)  # read once; a re-executed task reads the checkpoint
        return state


@dataclass
class BalancedJob(ExtensionJob):
    """One batch of BiGJoin-S at level j: the stages `phases` lists."""

    def phases(self) -> list[Phase]:
        return phases(self.plan, self.level)

    @property
    def last_level(self) -> bool:
        return self.level + 1 == self.plan.m

    @property
    def exchanges(self) -> int:
        return len(self.phases()) - 1

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
    """One worker in one stage of a BiGJoin-S batch, in the role its phase names."""

    job: BalancedJob

    def __init__(self, job: BalancedJob, stage: int, p: int):
        super().__init__(job, stage, p)
        with self.clock("io_us"):
            self.index = Partition.load(job.index_root, p)
        self.phase = job.phases()[stage]
        self.tokens: list[int] = []
        self.payloads: list[exchange.Blob] = []

    # --------------------------------------------------------------- stage roles

    def run(self, received, final: bool):
        data = [(kind, meta, arrays) for kind, meta, arrays in received if not self.side_input(kind, meta, arrays)]
        role = self.phase.role
        if role == Role.SEED:
            self._seed()
        elif role == Role.REQUEST:
            self._requester(data)
        elif role == Role.ANSWER:
            with self.clock("kernel_us"):
                self._answer(data)
        else:
            self._queue_ranges(data)
        return self.output(self.tokens, self.payloads, final)

    def _send(self, q: int, payload: exchange.Blob, remote_field: str, count: int) -> None:
        self.tokens.append(int(self.job.tokens[q]))
        self.payloads.append(payload)
        if q != self.p:
            self.add(remote_field, count)

    def _answer(self, data) -> None:
        """Owner role: answer every lookup this worker received, back to its requester."""
        for _kind, meta, arrays in data:
            request = LookupMeta(*meta)
            op = Operator(request.operator)
            codes = np.cumsum(arrays[0])  # sent as deltas of the sorted keys
            self.add("received_lookups", len(codes))
            answer = ANSWERERS[op].answer(self.index, codes)
            if op in MEMBERSHIP:  # only the hits go back: a lookup not named is a "no"
                answer = np.flatnonzero(answer).astype(np.int32)
            elif op == Operator.COUNT:
                answer = answer.ravel()
            tuples = len(answer) // (2 if op == Operator.COUNT else 1)
            if op != Operator.COUNT:  # resolved values (sorted within a list) and hit positions go as deltas too
                answer = np.diff(answer, prepend=np.int32(0)).astype(np.int32)
            reply = AnswerMeta(operator=op, answerer=self.p, offset=request.offset, looked_up=len(codes))
            blob = exchange.pack(BlobKind.ANSWERS, request.requester, [answer], reply)
            self._send(request.requester, blob, "sent_remote_answers", tuples)

    def _queue_ranges(self, data) -> None:
        parts = [unpack_items(kind, meta, arrays) for kind, meta, arrays in data if kind == BlobKind.RANGES]
        ranges = concat_items(parts, Ranges.empty(self.job.level + 1))
        self.add("received_ranges", len(ranges.prefix))
        if len(ranges.prefix):
            self.queue(ranges)

    def _requester(self, data) -> None:
        job, applies, sends = self.job, self.phase.applies, self.phase.sends
        if applies is None:  # the first phase: open the window
            with self.clock("io_us"):
                items, first, last = take_window(job, self.p, Ranges.empty(job.level))
            state = _open_ranges(items, first, last)
            self.add("held_prefixes", len(items.prefix))
        else:
            with self.clock("io_us"):
                state = Requests.load(job.state_path(self.p, self.stage - 2))
            width = 2 if applies.operator == Operator.COUNT else 1
            answers, n = _gather_answers(data, state.lookup_dest, job.workers, width)
            self.add("received_answers", n)
            with self.clock("kernel_us"):
                self._apply(applies, state, answers[state.lookup_inverse])
        self.add("held_candidates", len(state.item))
        if sends is not None:
            with self.clock("kernel_us"):
                self._request(sends, state)
            with self.clock("io_us"):
                state.save(job.state_path(self.p, self.stage))
        elif job.last_level:
            self._count_matches(state)
        else:
            self._balance(state.new_prefix, state.new_min_rel, state.new_min_count, state.new_split)

    # --------------------------------------------------------------- lookups

    def _request(self, lookup: Lookup, state: Requests) -> None:
        """Aggregate identical lookup keys, then send each distinct key to its owner once."""
        plan, j, w = self.job.plan, self.job.level, self.job.workers
        if lookup.operator == Operator.PROPOSE:  # the k-th entry of a BOTH list is in reverse ++ forward
            item = state.item
            r = state.min_rel[item]
            key, kind = state.prefix[item, plan.rel_pos[j][r]], plan.rel_kind[j][r]
            k, split = state.position, state.split[item]
            reverse = (kind == REVERSE) | ((kind == BOTH) & (k < split))
            codes = resolver_code(key, reverse, np.where((kind == BOTH) & ~reverse, k - split, k))
            self.add("proposals", len(codes))
        elif lookup.operator in MEMBERSHIP:
            item = state.item
            if lookup.operator == Operator.INTERSECT:
                r = lookup.other + (lookup.other >= state.min_rel[item])
                key, kind = state.prefix[item, plan.rel_pos[j][r]], plan.rel_kind[j][r]
            else:
                a = anti_lists(plan, j)[lookup.other]
                key, kind = state.prefix[item, plan.anti_pos[j, a]], plan.anti_kind[j, a]
            codes = _edge_codes(key, state.value, kind)
            self.add("probes", len(codes))
        else:
            codes = state.new_prefix[:, plan.rel_pos[j + 1][: int(plan.rel_count[j + 1])]].astype(np.int64).ravel()
            self.add("count_lookups", len(codes))
        unique, inverse = np.unique(codes, return_inverse=True)
        self.add("lookups_aggregated", len(codes) - len(unique))
        dest = ANSWERERS[lookup.operator].owner(unique, w)
        state.lookup_dest, state.lookup_inverse = dest, inverse.ravel()
        self.add("sent_lookups", len(unique))
        for q, sel in exchange.by_destination(dest, w):
            for offset in range(0, len(sel), MAX_LOOKUPS_PER_BLOB):
                piece = unique[sel[offset : offset + MAX_LOOKUPS_PER_BLOB]]
                # Sorted keys go as deltas: mostly small numbers, which Spark's shuffle compression shrinks.
                deltas = np.diff(piece, prepend=np.int64(0))
                request = LookupMeta(operator=lookup.operator, requester=self.p, offset=offset)
                self._send(q, exchange.pack(BlobKind.LOOKUPS, q, [deltas], request), "sent_remote_lookups", len(piece))

    def _apply(self, lookup: Lookup, state: Requests, answer: np.ndarray) -> None:
        plan, j = self.job.plan, self.job.level
        if lookup.operator == Operator.PROPOSE:
            state.value = answer.astype(np.int32)
            state.position = state.position[:0]  # resolved
            keep = filter_candidates(
                j, state.prefix, state.item, state.value, plan.above, plan.below, plan.differ, plan.loop[j], self.index.loops
            )
            if no_loop(plan, j):
                keep &= ~np.isin(state.value, self.index.loops)
            keep &= plan.carries_label(j, state.value)  # before any lookup
            state.keep(keep)
        elif lookup.operator == Operator.INTERSECT:
            state.keep(answer.astype(bool))
        elif lookup.operator == Operator.ANTI:
            state.keep(~answer.astype(bool))
        else:
            self._minimise(state, answer.reshape(-1, int(plan.rel_count[j + 1]), 2))
            return
        if lookup.completes:  # every relation binding a_j agreed
            self.add("produced", len(state.value))
            if not self.job.last_level:
                state.new_prefix = np.column_stack([state.prefix[state.item], state.value]).astype(np.int32)

    def _minimise(self, state: Requests, degrees: np.ndarray) -> None:
        """Count: each new prefix's smallest list (ties to the lower relation), dropping empty ones."""
        plan, j = self.job.plan, self.job.level
        counts = _list_sizes(degrees, plan.rel_kind[j + 1][: int(plan.rel_count[j + 1])])
        min_rel = counts.argmin(axis=1).astype(np.int32)
        rows = np.arange(len(counts))
        state.new_min_count, state.new_split, state.new_min_rel = counts[rows, min_rel], degrees[rows, min_rel, 1], min_rel
        state.keep_new(state.new_min_count > 0)

    def _seed(self) -> None:
        """Level 0: this worker's count-index keys are 1-prefixes, and their counts are local."""
        plan = self.job.plan
        keys = np.asarray(self.index.count_keys)
        if plan.loop[0]:
            keys = keys[np.isin(keys, self.index.loops)]
        if no_loop(plan, 0):
            keys = keys[~np.isin(keys, self.index.loops)]
        keys = plan.labelled(0, keys)
        self.add("held_prefixes", len(keys))
        state = Requests(new_prefix=keys.reshape(-1, 1).astype(np.int32))
        relations = int(plan.rel_count[1])
        self.add("count_lookups", len(keys) * relations)
        self._minimise(state, np.repeat(self.index.counts(keys)[:, None, :], relations, axis=1))
        self._balance(state.new_prefix, state.new_min_rel, state.new_min_count, state.new_split)

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

    def _count_matches(self, state: Requests) -> None:
        n = len(state.value)
        self.add("counted", n)
        sink = self.job.sink
        take = min(n, self.job.match_limit if sink is None else sink.room(self.listed))
        if take:  # written to the sink's file, or kept as the driver's sample
            rows = np.column_stack([state.prefix[state.item[:take]], state.value[:take]])
            (self.matches if sink is None else self.listed).append(rows.astype(np.int32))


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


def _open_ranges(items: Ranges, first: np.ndarray, last: np.ndarray) -> Requests:
    """Propose requests for the window: one (prefix, position in its list) per unit of work."""
    job_work = (last - first).astype(np.int64)
    item = np.repeat(np.arange(len(job_work)), job_work)
    position = (
        items.start[item].astype(np.int64)
        + first[item]
        + np.arange(int(job_work.sum()))
        - np.repeat(np.cumsum(job_work) - job_work, job_work)
    )
    return Requests(prefix=items.prefix, min_rel=items.min_rel, split=items.split, item=item, position=position)


def _gather_answers(data, dest: np.ndarray, workers: int, width: int) -> tuple[np.ndarray, int]:
    """Answers to this worker's distinct lookups, in the order of its sorted lookup keys, and the
    tuples that carried them."""
    sent_to = dict(exchange.by_destination(dest, workers))  # the order _request sent them in
    out = np.zeros((len(dest), width), dtype=np.int32)
    answered = tuples = 0
    for kind, meta, arrays in data:
        if kind != BlobKind.ANSWERS:
            continue
        reply = AnswerMeta(*meta)
        mine = sent_to[reply.answerer][reply.offset : reply.offset + reply.looked_up]
        values = arrays[0] if reply.operator == Operator.COUNT else np.cumsum(arrays[0], dtype=np.int64)
        if reply.operator in MEMBERSHIP:  # the positions of the hits
            out[mine[values]] = 1
            tuples += len(values)
        else:
            out[mine] = values.reshape(-1, width)
            tuples += len(mine)
        answered += len(mine)
    if answered != len(dest):
        raise ExecutionError(f"{answered} of {len(dest)} lookups answered")
    return (out if width > 1 else out[:, 0]), tuples


def _edge_codes(key: np.ndarray, value: np.ndarray, kind) -> np.ndarray:
    """The membership code of the edge between each key and candidate that a relation of `kind` (per
    item, or one for all) reads: key -> value (FORWARD), value -> key (REVERSE), or the lower rank ->
    the higher (BOTH)."""
    src = np.where(kind == FORWARD, key, np.where(kind == REVERSE, value, np.minimum(key, value)))
    dst = np.where(kind == FORWARD, value, np.where(kind == REVERSE, key, np.maximum(key, value)))
    return edge_code(src, dst)


def _list_sizes(degrees: np.ndarray, kinds: np.ndarray) -> np.ndarray:
    """(n, R) list sizes from (n, R, 2) forward/reverse sizes and each relation's kind."""
    forward, reverse = degrees[:, :, 0].astype(np.int64), degrees[:, :, 1].astype(np.int64)
    return np.where(kinds == FORWARD, forward, np.where(kinds == REVERSE, reverse, forward + reverse))


class BiGJoinSPaper(BiGJoin):
    name = "bigjoin-s-paper"
    kernels = frozenset({"bigjoin", "one-level"})
    description = "BiGJoin-S as published: lookups travel to balanced indices, prefixes stay, then Balance"
    job_class = BalancedJob
    writes_matches = True  # the last level's resolved candidates, written by the tasks that resolve them
    batches_class = AllWorkersFull
    params = LEVEL_PARAMS
    anti_edges = True  # an anti-pair is an Anti lookup beside Intersect: the edges it names drop the candidates
    anti_loops = True  # a directed `!a-a` filters the resolved candidates against the self-loops (`no_loop`)
    # A labelled position keeps the resolved values with its label (`_apply`), the seeds too; the ranks'
    # labels come from BiGJoin's prepare (the balanced index keeps the partitioned index's ranks).
    vertex_labels = True

    def prepare(self) -> None:
        super().prepare()  # the key-partitioned index, shared with bigjoin; ours is derived from it
        key = ("balanced-index", self.ctx.workers)
        reused = key in self.ctx.arrangements
        if not reused:
            # self.index is still the key-partitioned index super().prepare() set
            self.ctx.arrangements[key] = balanced_index.build(self.ctx.spark, cast(PartitionedIndex, self.index))
        self.index_reused = self.index_reused and reused
        self.index: BalancedIndex = self.ctx.arrangements[key]
