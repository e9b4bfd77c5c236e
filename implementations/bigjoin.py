"""`bigjoin` (§3.2): Generic Join as a Spark dataflow. The prefix-extension primitive extends prefixes
one attribute at a time over the shared forward/reverse indices; this module only schedules it.

Batching: each worker holds a queue of counted prefixes per level, and every job gives each worker a
budget of B' proposals (`--batch`), taken from the deepest level where some worker has B' waiting
(else the deepest with any work). A prefix whose list is longer than the budget is extended in
several jobs, so no job holds more than B' proposals per worker, whatever the output size."""

from __future__ import annotations

import os
import shutil
import uuid

import numpy as np

from harness.errors import DataError
from harness.query import in_query_order

from . import distributed_index, exchange
from .base import Implementation, Outcome, Param
from .plan import ExtensionPlan
from .prefix_extension import (
    FIELDS,
    PYTHON_CLOCKS,
    RECEIVED,
    Chunk,
    ExtensionJob,
    GroupJob,
    JobResult,
    run_job,
)

DEFAULT_BATCH = 1 << 22
# A round has enough work to share when its workers receive at least this many tuples each on
# average; below it, max/mean measures hashing noise on a handful of tuples, not balance.
ENOUGH_WORK = 1000
MATCH_SAMPLE = 5001  # a count also keeps this many matches, so verifying small results needs no rerun


class Batches:
    """Per-level, per-worker queues of counted prefixes, and the choice of the next batch."""

    def __init__(self, levels: int, workers: int, budget: int):
        self.budget = budget
        self.queues: dict[int, list[list[Chunk]]] = {j: [[] for _ in range(workers)] for j in range(1, levels)}
        self.consumed = {j: [0] * workers for j in range(1, levels)}

    def remaining(self, level: int) -> list[int]:
        return [sum(c.work for c in q) - done for q, done in zip(self.queues[level], self.consumed[level])]

    def full(self, level: int) -> bool:
        """BiGJoin's rule: some worker has a full batch waiting."""
        return max(self.remaining(level), default=0) >= self.budget

    def add(self, level: int, chunks: dict[int, list[Chunk]]) -> None:
        for p, new in chunks.items():
            self.queues[level][p].extend(new)

    def advance(self, level: int) -> None:
        """Mark one batch of `level` as taken; drop the chunks it used up."""
        for p, left in enumerate(self.remaining(level)):
            done = self.consumed[level][p] + min(self.budget, left)
            queue = self.queues[level][p]
            while queue and queue[0].work <= done:
                done -= queue[0].work
                os.remove(queue.pop(0).path)
            self.consumed[level][p] = done

    def queued_batches(self) -> int:
        """At least how many more batches the queued work needs (deeper levels will add more)."""
        return sum(-(-max(self.remaining(j), default=0) // self.budget) for j in self.queues)

    def queued_prefixes(self) -> int:
        return sum(c.rows for qs in self.queues.values() for q in qs for c in q)


class BiGJoin(Implementation):
    name = "bigjoin"
    description = "BiGJoin: Generic Join as a Spark dataflow of count/propose/intersect exchanges, batched"
    job_class = ExtensionJob
    batches_class = Batches
    params: tuple[Param, ...] = (Param("batch", int, DEFAULT_BATCH, "B': proposals per worker per batch (prefixes in flight)"),)
    _sample: np.ndarray | None  # the matches a count kept; None once the graph has changed

    def prepare(self) -> None:
        ctx = self.ctx
        self.configure()
        key = ("partitioned-index", ctx.workers)
        self.index_reused = key in ctx.arrangements
        if not self.index_reused:
            ctx.arrangements[key] = distributed_index.build(ctx.spark, ctx.edges, ctx.spec.semantics == "undirected", ctx.workers)
        self.index = ctx.arrangements[key]

    def configure(self) -> None:
        """The plan and the batch budget B'."""
        ctx = self.ctx
        self.plan = ExtensionPlan.from_spec(ctx.spec)
        self.plan.require_connected_order(ctx.spec)
        self.budget = self.param("batch")
        if self.budget < 1:
            raise DataError(f"--batch (B', proposals per worker per batch) must be at least 1, got {self.budget}")

    def job_args(self) -> dict:
        """Extra fields for every job of this implementation."""
        return {}

    def count(self) -> Outcome:
        count, counters, self._sample = self._run(MATCH_SAMPLE)
        self._sample_complete = len(self._sample) == count
        return Outcome(
            count,
            counters.report(self.index, self.budget, self.index_reused),
            metrics={"python_task_s": counters.python_task_s()},
        )

    def matches(self, limit: int) -> list[tuple]:
        sample = getattr(self, "_sample", None)
        if sample is not None and (self._sample_complete or len(sample) >= limit):
            found = sample
        else:
            _, _, found = self._run(limit)
        spec = self.ctx.spec
        return in_query_order(spec.query, spec.attribute_order, self.index.ids[found[:limit]] if len(found) else [])

    def _run(self, match_limit: int) -> tuple[int, Counters, np.ndarray]:
        if self.plan.m == 1:  # a single attribute: every vertex, or every vertex with a self-loop
            index = self.index
            ranks = index.loop_vertices if self.plan.loop[0] else np.arange(index.vertices)
            return len(ranks), Counters(1), ranks[:match_limit].reshape(-1, 1)
        return self.extend(match_limit)

    def extend(self, match_limit: int) -> tuple[int, Counters, np.ndarray]:
        """Generic Join to completion, batch by batch: one Spark job per batch, at the level
        `next_level` picks (the first job seeds level 0 from the index keys). Returns the count, the
        counters and a sample of up to match_limit matches."""
        ctx, m = self.ctx, self.plan.m
        run_dir = str(self.index.root / f"run-{uuid.uuid4().hex[:8]}")
        tokens = exchange.routing_tokens(ctx.spark, ctx.workers)
        batches = self.batches_class(m, ctx.workers, self.budget)
        counters = Counters(m)
        found: list[np.ndarray] = []
        job_id = 0
        level: int | None = 0
        try:
            while level is not None:
                job = self.job_class(
                    index_root=str(self.index.root),
                    workers=ctx.workers,
                    tokens=tokens,
                    plan=self.plan,
                    level=level,
                    budget=self.budget,
                    queues=batches.queues.get(level, [[] for _ in range(ctx.workers)]),
                    consumed=batches.consumed.get(level, [0] * ctx.workers),
                    run_dir=run_dir,
                    job_id=job_id,
                    match_limit=match_limit,
                    **self.job_args(),
                )
                # The queued work includes this batch's (the seed job's is not queued: live_status counts it).
                ctx.report(level=level, batches_done=job_id, batches_estimate=job_id + batches.queued_batches())
                result = run_job(ctx.spark, job)
                counters.add(job, result, batches.queued_prefixes())
                if level > 0:  # the seed job takes nothing from a queue
                    batches.advance(level)
                if level + 1 < m:
                    batches.add(level + 1, result.chunks())
                if result.matches:
                    found.append(result.matches[job.group])
                job_id += 1
                level = next_level(batches)
        finally:
            shutil.rmtree(run_dir, ignore_errors=True)
        sample = np.concatenate(found)[:match_limit] if found else np.zeros((0, m), np.int32)
        return counters.count, counters, sample


def next_level(batches: Batches) -> int | None:
    """BiGJoin's rule: the deepest level with a full batch waiting (`Batches.full`), else the deepest
    with any work; None when no work is left."""
    full = [j for j in batches.queues if batches.full(j)]
    some = [j for j in batches.queues if max(batches.remaining(j), default=0) > 0]
    return max(full) if full else max(some) if some else None


def _received(result: JobResult) -> np.ndarray:
    """(stage, worker) matrix of the tuples each worker received."""
    return np.sum([result.per_worker(name) for name in RECEIVED], axis=0)


class Counters:
    """The MPC-model counters (§2.3) of one run, summed over its batches."""

    def __init__(self, m: int):
        self.count = 0
        self.prefixes = [0] * (m + 1)  # prefixes[j] = |P_j|
        self.totals = dict.fromkeys(
            ("count_lookups", "proposals", "probes", "sent_lookups", "lookups_aggregated", *PYTHON_CLOCKS), 0
        )
        self.exchanged = 0
        self.exchanged_remote = 0
        self.by_round: dict[str, int] = {}
        self.max_round = 0
        self.rounds = 0
        self.jobs_per_level = [0] * m
        self.peak_in_flight = 0
        self.peak_queued = 0
        self.round_loads: list[list[int]] = []  # tuples received by each worker, per exchange in run order

    def add(self, job: ExtensionJob | GroupJob, result: JobResult, queued: int) -> None:
        subs = job.jobs if isinstance(job, GroupJob) else [job]
        offsets = job.offsets if isinstance(job, GroupJob) else [0]
        for level in {sub.level for sub in subs}:
            self.jobs_per_level[level] += 1
        loads = _received(result)  # (stage, worker)
        for sub, offset in zip(subs, offsets):  # a pipelined job runs several levels, each from its offset
            part = result.of_group(sub.group) if len(subs) > 1 else result
            if sub.level == 0:
                self.prefixes[1] += part.total("held_prefixes")
            else:
                self.prefixes[sub.level + 1] += part.total("produced")
            mine = (loads if part is result else _received(part)).sum(axis=1)
            for number in range(1, sub.exchanges + 1):
                stage = offset + number
                key = f"level{sub.level}.exchange{number}"
                self.by_round[key] = self.by_round.get(key, 0) + (int(mine[stage]) if stage < len(mine) else 0)
        self.rounds += job.exchanges
        self.count += result.total("counted")
        for name in self.totals:
            self.totals[name] += result.total(name)
        received = loads.sum(axis=1)
        for stage in range(1, len(received)):
            self.max_round = max(self.max_round, int(received[stage]))
            self.round_loads.append(loads[stage].tolist())
        self.exchanged += int(received[1:].sum())
        self.exchanged_remote += sum(result.total(name) for name in FIELDS if name.startswith("sent_remote_"))
        held = result.per_stage("held_prefixes") + result.per_stage("held_candidates")
        self.peak_in_flight = max(self.peak_in_flight, int(held.max(initial=0)))
        self.peak_queued = max(self.peak_queued, queued + result.total("queued_rows"))

    def balance(self) -> dict:
        """Per-round max/mean of the tuples each worker received, and the worst round that had
        enough work to share."""
        skews = [round(max(r) * len(r) / sum(r), 4) if sum(r) else None for r in self.round_loads]
        busy = [s for s, r in zip(skews, self.round_loads) if s is not None and sum(r) >= ENOUGH_WORK * len(r)]
        return {
            "round_load_skew": skews,
            "enough_work_per_worker": ENOUGH_WORK,
            "rounds_with_enough_work": len(busy),
            "max_round_load_skew": max(busy, default=None),
        }

    def python_task_s(self) -> dict:
        """Seconds summed over tasks, from their own clocks: where the Python workers' time went."""
        return {name[:-3]: round(self.totals[name] / 1e6, 3) for name in PYTHON_CLOCKS}

    def report(self, index, budget: int, reused: bool) -> dict:
        return {
            "batch_per_worker": budget,
            "prefixes_per_level": {f"P{j}": n for j, n in enumerate(self.prefixes) if j >= 1},
            "count_lookups": self.totals["count_lookups"],
            "proposals": self.totals["proposals"],
            "intersection_probes": self.totals["probes"],
            # BiGJoin-S only: lookups sent as requests, and those saved by aggregating identical keys.
            "distinct_lookups_sent": self.totals["sent_lookups"],
            "lookups_aggregated": self.totals["lookups_aggregated"],
            "tuples_exchanged": self.exchanged,
            "tuples_exchanged_remote": self.exchanged_remote,
            "tuples_exchanged_per_round": self.by_round,
            "max_tuples_in_one_round": self.max_round,
            "rounds": self.rounds,
            "batches_per_level": self.jobs_per_level,
            "peak_prefixes_in_flight": self.peak_in_flight,
            "peak_prefixes_queued": self.peak_queued,
            "worker_load_per_round": self.round_loads,
            **self.balance(),
            "index": dict(index.describe(), reused=reused),
        }
