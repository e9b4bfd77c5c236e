"""`bigjoin` (§3.2): Generic Join as a Spark dataflow. The prefix-extension primitive extends prefixes
one attribute at a time over the shared forward/reverse indices; this module only schedules it.

Batching: each worker holds a queue of counted prefixes per level. Each Spark job starts at the
deepest level where some worker has a full batch waiting (else the deepest with any work), the
paper's rule, and carries every level after it (`dataflow`): at each level each worker proposes one
window of its queue within the memory budget (`--memory-budget`, bytes of in-flight data per
worker; B' per level follows from it, see `budget`), or within B' proposals when `--batch` pins it.
A prefix whose list does not fit is extended in several jobs, so no batch holds more than the budget,
whatever the output size. BiGJoin-S as published (`bigjoin-s-paper`) schedules one level per job
(`extend_by_level`), with B' proposals per worker."""

from __future__ import annotations

import os
import shutil
import time
import uuid
from typing import Any, NamedTuple, cast

import numpy as np

from harness.core.errors import DataError
from harness.core.params import human
from harness.core.query import JoinSpec, in_query_order
from implementations.base import Implementation, Listed, Outcome, Param, RunContext
from implementations.extension.dataflow import DataflowGroup, DataflowJob
from implementations.extension.items import Chunk
from implementations.extension.job import JobResult, run_job, run_locally
from implementations.extension.stage import FIELDS, PYTHON_CLOCKS, RECEIVED, F
from implementations.gj import exchange, match_files
from implementations.gj.budget import COPY_FACTOR, Budget, capped_budget, default_budget, parse_size, worker_memory
from implementations.gj.match_files import MatchSink, part_name
from implementations.gj.plan import ExtensionPlan
from implementations.indices import distributed_index

DEFAULT_BATCH = 1 << 22
DEFAULT_LOCAL_BUDGET = 1 << 30  # `in_process` runs without Spark, so without its memory settings
# A round has enough work to share when its workers receive at least this many tuples each on
# average; below it, max/mean measures hashing noise on a handful of tuples, not balance.
ENOUGH_WORK = 1000
MATCH_SAMPLE = 5001  # a count also keeps this many matches, so verifying small results needs no rerun


class Batches:
    """Per-level, per-worker queues of counted prefixes, and the choice of the next batch. `budget` is
    B' (proposals per worker per batch), one number or one per level."""

    def __init__(self, levels: int, workers: int, budget: int | dict[int, int]):
        self.budget = budget if isinstance(budget, dict) else dict.fromkeys(range(levels), budget)
        self.queues: dict[int, list[list[Chunk]]] = {j: [[] for _ in range(workers)] for j in range(1, levels)}
        self.consumed = {j: [0] * workers for j in range(1, levels)}

    def remaining(self, level: int) -> list[int]:
        return [sum(c.work for c in q) - done for q, done in zip(self.queues[level], self.consumed[level])]

    def full(self, level: int) -> bool:
        """BiGJoin's rule: some worker has a full batch waiting."""
        return max(self.remaining(level), default=0) >= self.budget[level]

    def add(self, level: int, chunks: dict[int, list[Chunk]]) -> None:
        for p, new in chunks.items():
            self.queues[level][p].extend(new)

    def advance(self, level: int, taken: list[int] | None = None) -> None:
        """Mark one batch of `level` as taken (`taken` per worker, else B' or what was left); drop the
        chunks it used up."""
        for p, left in enumerate(self.remaining(level)):
            done = self.consumed[level][p] + (min(self.budget[level], left) if taken is None else taken[p])
            queue = self.queues[level][p]
            while queue and queue[0].work <= done:
                done -= queue[0].work
                os.remove(queue.pop(0).path)
            self.consumed[level][p] = done

    def queued_batches(self) -> int:
        """At least how many more batches the queued work needs (deeper levels will add more)."""
        return sum(-(-max(self.remaining(j), default=0) // self.budget[j]) for j in self.queues)

    def queued_prefixes(self) -> int:
        return sum(c.rows for qs in self.queues.values() for q in qs for c in q)


# One help text for --batch, which every BiGJoin variant reads: the CLI shows one flag per name.
BATCH_HELP = (
    "B': proposals per worker per batch (bigjoin, bigjoin-carry, bigjoin-s, delta-bigjoin: pins it at every "
    "level instead of --memory-budget; bigjoin-s-paper: 4,194,304 unless given)"
)
# BiGJoin-S as published: one level per Spark job, B' proposals per worker per batch.
LEVEL_PARAMS: tuple[Param, ...] = (Param("batch", int, DEFAULT_BATCH, BATCH_HELP),)
INDEX_BUILDS = ("auto", "driver", "spark")
# `--index-build auto` builds on the driver up to this many edges (their arrays and the build's
# working copies take about 40 bytes an edge there); larger graphs are indexed by a Spark job.
DRIVER_INDEX_MAX_EDGES = 200_000_000


class BiGJoin(Implementation):
    name = "bigjoin"
    kernels = frozenset({"bigjoin"})
    description = "BiGJoin: Generic Join as a Spark dataflow of count/propose/intersect exchanges, batched"
    job_class: type | None = None  # None: the pipelined dataflow; BiGJoin-S and Delta-BiGJoin name their one-level job
    dataflow_class: type[DataflowJob] = DataflowJob
    batches_class = Batches
    anti_edges = True  # an anti-relation is subtracted where a relation is intersected (`dataflow_kernels.Lookups`)
    vertex_labels = True  # proposals are filtered by the plan's per-position label (`dataflow_kernels._keep_labelled`)
    anti_loops = False  # a directed `!a-a` (keyed by the candidate itself): the dataflow kernels have no test for it
    params: tuple[Param, ...] = (
        Param(
            "memory_budget",
            str,
            None,
            "bytes of in-flight data per worker (e.g. 512m, 2g), from which B' follows per level "
            "(default: a quarter of a worker's Spark memory less its index partition)",
        ),
        Param("batch", int, None, BATCH_HELP),
        Param("index_build", str, "auto", "where the index is built: driver, spark, or auto (driver up to 200M edges)"),
    )
    _sample: np.ndarray | None  # the matches a count kept; None once the graph has changed
    _listing: _Listing | None = None  # set while write_matches runs
    writes_matches = True  # the last level's matches, written by the tasks that find them (not delta-bigjoin)

    def __init_subclass__(cls, **kwargs):
        """A variant counts labelled patterns only if it says so: its own kernels may not filter them."""
        super().__init_subclass__(**kwargs)
        if "vertex_labels" not in cls.__dict__:
            cls.vertex_labels = False

    @classmethod
    def wants_driver_edges(cls, edges: int, params: dict) -> bool:
        """Whether the index is built from the edges on the driver (read before prepare, as local-gj's)."""
        build = params.get("index_build") or "auto"
        return build == "driver" or (build == "auto" and edges <= DRIVER_INDEX_MAX_EDGES)

    def prepare(self) -> None:
        ctx = self.ctx
        self.configure()
        key = ("partitioned-index", ctx.workers)
        self.index_reused = key in ctx.arrangements
        if not self.index_reused:
            undirected = ctx.spec.semantics == "undirected"
            if self.wants_driver_edges(ctx.graph.edges, ctx.params):
                src, dst = ctx.graph.edge_arrays()
                ctx.arrangements[key] = distributed_index.build_on_driver(src, dst, undirected, ctx.workers)
            else:
                ctx.arrangements[key] = distributed_index.build(ctx.spark, ctx.edges, undirected, ctx.workers)
        self.index = ctx.arrangements[key]
        if ctx.spec.query.labels:  # each rank's label, for the kernels (the index is shared: the plan holds them)
            self.plan.rank_labels(self.index.ids, *ctx.graph.label_arrays())
        if self.job_class is None:
            self.memory = self.choose_budget()

    def configure(self) -> None:
        """The plan and the batch budget: B' (`--batch`) or the memory budget it follows from."""
        ctx = self.ctx
        self.plan = ExtensionPlan.from_spec(ctx.spec)
        self.plan.require_connected_order(ctx.spec)
        require_anti_lookups(self.plan, ctx.spec, self.anti_loops)
        batch = self.param("batch")
        if batch is not None and batch < 1:
            raise DataError(f"--batch (B', proposals per worker per batch) must be at least 1, got {batch}")
        if self.job_class is not None:
            self.budget = batch
            return
        if batch is not None and self.param("memory_budget") is not None:
            raise DataError("--batch and --memory-budget both set: give one (B' per batch, or the bytes it follows from)")
        if self._params.get("index_build", "auto") not in INDEX_BUILDS:
            raise DataError(f"--index-build: '{self.param('index_build')}' is not one of {', '.join(INDEX_BUILDS)}")
        if self.param("memory_budget") is not None:
            parse_size(self.param("memory_budget"))  # a bad size fails before the index is built

    def choose_budget(self) -> Budget:
        """`--batch`, else `--memory-budget`, else the default rule (`budget.default_budget`)."""
        m, batch, given = self.plan.m, self.param("batch"), self.param("memory_budget")
        if batch is not None:
            return Budget(None, batch, m, "--batch")
        if given is not None:
            size = parse_size(given)
            floor = Budget(None, None, m, "").row_bytes(m) + Budget(None, None, m, "").proposal_bytes(0)
            if size < floor:
                raise DataError(f"--memory-budget {given}: at least {floor} bytes (one prefix and one proposal)")
            return Budget(size, None, m, "--memory-budget")
        spark, index, capped = self.ctx.spark, self.index.partition_bytes(), self.ctx.worker_cap
        if capped is not None:
            grown = max(0, capped.executor_growth())
            reserved = max(grown, capped.executor_heap)
            source = (
                f"default under a cap: (memory_per_worker={human(capped.cap)} less {human(capped.idle)} resident at the start, "
                f"{human(reserved)} for the executor JVM (the larger of its heap ceiling, {human(capped.executor_heap)}, "
                f"and the {human(grown)} it grew since the start, loading the graph and building the index), "
                f"and the index partition) / {COPY_FACTOR}, the copies in-flight data makes"
            )
            return Budget(capped_budget(capped.cap, capped.idle + reserved, index), None, m, source)
        memory, where = _worker_memory(spark, self.ctx.workers)
        return Budget(default_budget(memory, index), None, m, f"default: a quarter of {where} less the index partition")

    def job_args(self) -> dict:
        """Extra fields for every job of this implementation."""
        return {}

    local = False  # `in_process`: jobs run in this process, not on Spark

    @classmethod
    def in_process(cls, spec: JoinSpec, workers: int, index, budget: Budget | None = None, params: dict | None = None):
        """An instance whose jobs run in this process (`extension.job.run_locally`) on a given
        index (of the kind `prepare` builds): the same code on the same argument types, without
        Spark. The warm-up runs it, and the tests run many W and budgets through it quickly. Call
        `extend` (the pipelined dataflow) or `extend_by_level` (`job_class`)."""
        impl = cls(RunContext(cast(Any, None), cast(Any, None), spec, workers, dict(params or {})))
        impl.configure()
        impl.index = index
        batch = impl.param("batch") if impl.job_class is None else None
        if budget is None and batch is not None:
            budget = Budget(None, batch, impl.plan.m, "--batch")
        impl.memory = budget or Budget(DEFAULT_LOCAL_BUDGET, None, impl.plan.m, "in-process")
        impl.local = True
        return impl

    def execute(self, job) -> JobResult:
        """Run one job on Spark, or in this process (`in_process`)."""
        return run_locally(job) if self.local else run_job(self.ctx.spark, job)

    def routing_tokens(self) -> np.ndarray:
        if self.local:
            return exchange.local_tokens(self.ctx.workers)
        return exchange.routing_tokens(self.ctx.spark, self.ctx.workers)

    def budget_fields(self) -> dict:
        if self.job_class is not None:
            return {"batch_per_worker": self.budget}
        return {"batch_per_worker": self.memory.batch, **self.memory.describe()}

    def count(self) -> Outcome:
        count, counters, self._sample = self._run(MATCH_SAMPLE)
        self._sample_complete = len(self._sample) == count
        return Outcome(
            count,
            counters.report(self.index, self.budget_fields(), self.index_reused),
            metrics={"python_task_s": counters.python_task_s()},
        )

    def write_matches(self, path: str | None, limit: int | None) -> Listed:
        """count()'s dataflow with the last level listed: each task writes the matches it finds (mapped to
        original ids) as a Parquet file into `path` when its stage ends, and the driver keeps the files
        of the attempts whose results it received. With a limit, no job starts once the jobs so far
        found that many (each task writes at most the limit, and the last file is cut to it by Spark);
        first_match_s is the end of the first job that found one."""
        with match_files.sink_for(self.ctx.spec, path, self.index.ids, limit) as sink:
            self._listing = _Listing(sink, limit, time.perf_counter())
            try:
                count, counters, _ = self._run(0)
            finally:
                self._listing = None
        if path is not None:
            match_files.finish(self.ctx.spark, path, self._accepted, limit)
        return Listed(
            count if limit is None else min(limit, count),
            counters.report(self.index, self.budget_fields(), self.index_reused),
            metrics={"python_task_s": counters.python_task_s()},
            first_match_s=self._first_match_s,
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
            ranks = self.plan.labelled(0, index.loop_vertices if self.plan.loop[0] else np.arange(index.vertices))
            listing = self._listing
            if listing is not None:
                self._first_match_s = time.perf_counter() - listing.started if len(ranks) else None
                if listing.sink is not None:  # the index's own vertex list, held by the driver
                    name = part_name(0, 0, 0, 0)
                    listing.sink.write(name, ranks[: listing.sink.limit].reshape(-1, 1))
                    self._accepted = {name}
            return len(ranks), Counters(1), ranks[:match_limit].reshape(-1, 1)
        if self.job_class is not None:
            return self.extend_by_level(match_limit)
        return self.extend(match_limit)

    def extend(self, match_limit: int) -> tuple[int, Counters, np.ndarray]:
        """Generic Join to completion: each Spark job starts at the level `next_level` picks (the first
        seeds the level-1 queue from the index keys) and carries every level after it, one window of
        each worker's queue per level. Returns the count, the counters and a sample of matches."""
        m, workers = self.plan.m, self.ctx.workers
        listing = self._listing is not None and self._listing.sink is not None
        # Kept, so that the record's B' per level is the one the run used.
        self.memory = memory = self.memory.counting_last(
            self.dataflow_class.counts_last and self.plan.last_from_one_list and not listing
        )
        batches = self.batches_class(m, workers, {j: memory.proposals(j) for j in range(m)})

        def job(level: int, common: dict) -> DataflowJob:
            levels = range(max(level, 1), m)
            return self.dataflow_class(
                budget=memory,
                first=level,
                queues={j: batches.queues[j] for j in levels},
                consumed={j: batches.consumed[j] for j in levels},
                **common,
            )

        def update(job: DataflowJob, result: JobResult) -> None:
            for j in job.levels:  # what level j queued for j + 1 first, then what level j + 1 took
                if j + 1 < m:
                    batches.add(j + 1, result.chunks(j))
                if j >= 1:
                    batches.advance(j, result.taken(j, workers))

        return self._schedule(batches, match_limit, job, update)

    def extend_by_level(self, match_limit: int) -> tuple[int, Counters, np.ndarray]:
        """BiGJoin-S's and Delta-BiGJoin's schedule: one Spark job per batch, at the level `next_level`
        picks (the first job seeds level 0 from the index keys)."""
        m, workers, job_class = self.plan.m, self.ctx.workers, self.job_class
        assert job_class is not None
        batches = self.batches_class(m, workers, self.budget)

        def job(level: int, common: dict):
            return job_class(
                level=level,
                budget=self.budget,
                queues=batches.queues.get(level, [[] for _ in range(workers)]),
                consumed=batches.consumed.get(level, [0] * workers),
                **common,
            )

        def update(job, result: JobResult) -> None:
            if job.level > 0:  # the seed job takes nothing from a queue
                batches.advance(job.level)
            if job.level + 1 < m:
                batches.add(job.level + 1, result.chunks())

        return self._schedule(batches, match_limit, job, update)

    def _listed(self, listing: _Listing, job, result: JobResult, count: int, level: int | None) -> int | None:
        """After a job of write_matches: the files its received attempts wrote, when the first match came,
        and the next level, or None once the limit is reached."""
        for rec in result.stats:
            stage, worker, attempt = (int(rec[F[name]]) for name in ("stage", "worker", "attempt"))
            self._accepted.add(part_name(job.job_id, stage, worker, attempt))
        if self._first_match_s is None and count:
            self._first_match_s = time.perf_counter() - listing.started
        return None if listing.limit is not None and count >= listing.limit else level

    def _schedule(self, batches: Batches, match_limit: int, make_job, update) -> tuple[int, Counters, np.ndarray]:
        """The driver's loop: a job at the level `next_level` picks (`make_job(level, common fields)`),
        run, counted and folded into the queues (`update`), until no work is left. Returns the count,
        the counters and a sample of up to match_limit matches."""
        ctx, m = self.ctx, self.plan.m
        run_dir = str(self.index.root / f"run-{uuid.uuid4().hex[:8]}")
        common = {
            "index_root": str(self.index.root),
            "workers": ctx.workers,
            "tokens": self.routing_tokens(),
            "plan": self.plan,
            "run_dir": run_dir,
            "match_limit": match_limit,
            **self.job_args(),
        }
        listing = self._listing
        if listing is not None and listing.sink is not None:
            common["sink"] = listing.sink
        self._accepted, self._first_match_s = set(), None
        counters = Counters(m)
        found: list[np.ndarray] = []
        job_id = 0
        level: int | None = 0
        try:
            while level is not None:
                job = make_job(level, {**common, "job_id": job_id})
                # The queued work includes this batch's (the seed job's is not queued: live_status counts it).
                ctx.report(level=level, batches_done=job_id, batches_estimate=job_id + max(1, batches.queued_batches()))
                result = self.execute(job)
                counters.add(job, result, batches.queued_prefixes())
                update(job, result)
                found += [result.matches[g] for g in sorted(result.matches)]
                job_id += 1
                level = next_level(batches)
                if listing is not None:
                    level = self._listed(listing, job, result, counters.count, level)
        finally:
            shutil.rmtree(run_dir, ignore_errors=True)
        sample = np.concatenate(found)[:match_limit] if found else np.zeros((0, m), np.int32)
        return counters.count, counters, sample


class _Listing(NamedTuple):
    """A run of write_matches: where its tasks write (None: counted only), its limit, when it started."""

    sink: MatchSink | None
    limit: int | None
    started: float


def require_anti_lookups(plan: ExtensionPlan, spec: JoinSpec, anti_loops: bool = False) -> None:
    """An anti-relation is keyed by an earlier attribute (unless the class tests `anti_loops`, a directed
    `!a-a`, itself) and shares a candidate's mask bits with the relations of its level (`dataflow_kernels.Lookups`)."""
    for x, y in spec.anti:
        if x == y and not anti_loops:
            raise DataError(
                f"query {spec.query.name}: anti-edge !{x}-{y} (no self-loop at {x}): not supported by {BiGJoin.name}'s dataflow"
            )
    if (plan.rel_count + plan.anti_count).max(initial=0) > 30:
        raise DataError("at most 30 relations and anti-relations may bind one attribute")


_memory_of: dict[tuple[str, int], tuple[int, str]] = {}


def _worker_memory(spark, workers: int) -> tuple[int, str]:
    """`budget.worker_memory` of the session's configuration, read once per session and W."""
    key = (spark.sparkContext.applicationId, workers)
    if key not in _memory_of:
        conf = dict(spark.sparkContext.getConf().getAll())
        conf["cores"] = str(spark.sparkContext.defaultParallelism)
        _memory_of[key] = worker_memory(conf, str(spark.sparkContext.master), workers)
    return _memory_of[key]


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
            ("count_lookups", "proposals", "probes", "sent_lookups", "lookups_aggregated", "kernels_compiled", *PYTHON_CLOCKS), 0
        )
        self.exchanged = 0
        self.exchanged_remote = 0
        self.by_round: dict[str, int] = {}
        self.max_round = 0
        self.rounds = 0
        self.jobs_per_level = [0] * m
        self.peak_in_flight = 0
        self.peak_in_flight_per_worker = 0
        self.peak_bytes = 0  # held_bytes: all workers in one stage, and one worker in one stage
        self.peak_bytes_per_worker = 0
        self.peak_queued = 0
        self.jobs = 0
        self.round_loads: list[list[int]] = []  # tuples received by each worker, per exchange in run order

    def add(self, job, result: JobResult, queued: int) -> None:
        """One Spark job's counters: `job.parts()` names the extensions it ran and their stages."""
        parts = job.parts()
        pipelined = isinstance(job, (DataflowJob, DataflowGroup))  # a level ran if its windows took work
        loads = _received(result)  # (stage, worker)
        ran = set()
        for level, group, offset, exchanges in parts:  # a pipelined job runs several levels, each from its offset
            part = result.of_group(group) if len(parts) > 1 else result
            if level == 0:  # the seeds, counted where they start (bigjoin-s sends some on as pieces)
                self.prefixes[1] += int(part.per_stage("held_prefixes")[offset]) if part.total("held_prefixes") else 0
            else:
                self.prefixes[level + 1] += part.total("produced")
            if level == 0 or part.total("taken_work") or part.total("proposals") or not pipelined:
                ran.add(level)
            mine = (loads if part is result else _received(part)).sum(axis=1)
            for number in range(1, exchanges + 1):
                stage = offset + number
                key = f"level{level}.exchange{number}"
                self.by_round[key] = self.by_round.get(key, 0) + (int(mine[stage]) if stage < len(mine) else 0)
        for level in ran:
            self.jobs_per_level[level] += 1
        self.rounds += job.exchanges
        self.jobs += 1
        self.count += result.total("counted")
        for name in self.totals:
            self.totals[name] += result.total(name)
        received = loads.sum(axis=1)
        for stage in range(1, len(received)):
            self.max_round = max(self.max_round, int(received[stage]))
            self.round_loads.append(loads[stage].tolist())
        self.exchanged += int(received[1:].sum())
        self.exchanged_remote += sum(result.total(name) for name in FIELDS if name.startswith("sent_remote_"))
        held = result.per_worker("held_prefixes") + result.per_worker("held_candidates")
        self.peak_in_flight = max(self.peak_in_flight, int(held.sum(axis=1).max(initial=0)))
        self.peak_in_flight_per_worker = max(self.peak_in_flight_per_worker, int(held.max(initial=0)))
        self.peak_bytes = max(self.peak_bytes, int(result.per_stage("held_bytes").max(initial=0)))
        self.peak_bytes_per_worker = max(self.peak_bytes_per_worker, int(result.per_worker("held_bytes").max(initial=0)))
        self.peak_queued = max(self.peak_queued, queued + result.total("queued_rows"))

    def balance(self) -> dict:
        """Per-round max/mean of the tuples each worker received, and the worst round that had
        enough work to share."""
        skews = [round(max(r) * len(r) / sum(r), 4) if sum(r) else None for r in self.round_loads]
        busy = [s for s, r in zip(skews, self.round_loads) if s is not None and sum(r) >= ENOUGH_WORK * len(r)]
        # The MPC model's time (§2.3): summed over rounds, the tuples the busiest worker received;
        # against the total over W, what a perfectly balanced run would take.
        critical = sum(max(r) for r in self.round_loads if r)
        total = sum(sum(r) for r in self.round_loads)
        workers = len(self.round_loads[0]) if self.round_loads else 1
        return {
            "round_load_skew": skews,
            "enough_work_per_worker": ENOUGH_WORK,
            "rounds_with_enough_work": len(busy),
            "max_round_load_skew": max(busy, default=None),
            "critical_path_tuples": critical,
            "critical_path_over_balanced": round(critical * workers / total, 4) if total else None,
        }

    def python_task_s(self) -> dict:
        """Seconds summed over tasks, from their own clocks: where the Python workers' time went."""
        return {name[:-3]: round(self.totals[name] / 1e6, 3) for name in PYTHON_CLOCKS}

    def report(self, index, budget: dict, reused: bool) -> dict:
        """`budget`: the batching it ran with (`BiGJoin.budget_fields`)."""
        return {
            **budget,
            "prefixes_per_level": {f"P{j}": n for j, n in enumerate(self.prefixes) if j >= 1},
            "count_lookups": self.totals["count_lookups"],
            "proposals": self.totals["proposals"],
            "intersection_probes": self.totals["probes"],
            # BiGJoin-S only: lookups sent as requests, and those saved by aggregating identical keys.
            "distinct_lookups_sent": self.totals["sent_lookups"],
            "lookups_aggregated": self.totals["lookups_aggregated"],
            # Numba signatures compiled or loaded inside the timed stages: 0 when the workers started warm.
            "kernels_compiled": self.totals["kernels_compiled"],
            "tuples_exchanged": self.exchanged,
            "tuples_exchanged_remote": self.exchanged_remote,
            "tuples_exchanged_per_round": self.by_round,
            "max_tuples_in_one_round": self.max_round,
            "rounds": self.rounds,
            "batches_per_level": self.jobs_per_level,
            "spark_jobs": self.jobs,
            "peak_prefixes_in_flight": self.peak_in_flight,
            "peak_prefixes_in_flight_per_worker": self.peak_in_flight_per_worker,
            "peak_prefixes_queued": self.peak_queued,
            "peak_bytes_in_flight": self.peak_bytes,
            "peak_bytes_in_flight_per_worker": self.peak_bytes_per_worker,
            "worker_load_per_round": self.round_loads,
            **self.balance(),
            "index": dict(index.describe(), reused=reused),
        }
