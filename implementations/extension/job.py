"""The one-level engine: one Spark job extends one batch at level j, where the prefixes wait in per-worker queues at the
worker of their proposing relation (the paper's (p, min-c, min-i, rem-ext) quadruples):
  stage 0       Propose: each worker takes up to `budget` units of proposal work from its queue;
  stages 1..H   Intersect with every other relation binding a_j, then Count the new (j+1)-prefixes
                against every relation binding a_(j+1), then move each to its proposer's worker and
                queue it for level j + 1 (at the last level the survivors are only counted).
Every stage applies all lookups whose keys the worker owns before shipping an item, so H is an
upper bound and items often arrive early. `bigjoin-s-paper` replaces the stages and keeps the queues,
windows, job driver and counters."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from implementations.extension.items import Candidates, Chunk, Prefixes, chunk_path, concat_items, take_window, unpack_items
from implementations.extension.stage import FIELDS, F, Stage, TableMeta, unpack_table
from implementations.gj import exchange
from implementations.gj.exchange import BlobKind
from implementations.gj.extension_kernels import IndexPartition
from implementations.gj.match_files import MatchSink
from implementations.gj.plan import ExtensionPlan
from implementations.indices import distributed_index


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
        return stage.run(
            concat_items(cands, Candidates.empty(self.level)), concat_items(prefixes, Prefixes.empty(self.level + 1)), final
        )


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
            blocks.append(unpack_table(meta, arrays))
        elif kind == BlobKind.MATCHES:
            matches.setdefault(TableMeta(*meta).group, []).append(unpack_table(meta, arrays))
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
