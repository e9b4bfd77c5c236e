"""Run one (query, dataset, implementation, parameters) combination: load, prepare, count, measure,
verify, and return the complete result record. Every failure becomes a typed status."""
from __future__ import annotations

import contextlib
import shutil
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from . import datasets, dynamic, results, store, updates
from . import spark as spark_factory
from .errors import DataError, ExecutionError, HarnessError, RunTimeout
from .memory import MemorySampler
from .metrics import SparkCounters
from .oracles import Pattern
from .query import Query, load_query, make_join_spec
from .spark_floor import floor_seconds
from .verify import ORACLE_CHOICES


@dataclass
class RunRequest:
    query: str | dict | Query
    dataset: str
    impl: str
    workers: int = 2
    semantics: str = "undirected"
    oracle: str = "auto"
    timeout_s: float | None = None
    oracle_timeout_s: float = 600.0
    params: dict = field(default_factory=dict)
    attribute_order: tuple[str, ...] | None = None
    workload: str | None = None
    trial: int = 0
    allow_unverified: bool = False  # the user accepts an UNVERIFIED result (exit code 0); still labelled so
    timeout_expected: bool = False  # the workload declares a TIM of this run an expected result
    spark_floor: bool = False  # also time empty Spark jobs shaped like each phase's (time_breakdown.<phase>.spark_floor_s)


class Runner:
    """Holds one Spark session and the graphs loaded so far (a workload loads each dataset once)."""

    def __init__(self, master: str | None = None, workers: int = 2):
        self.master = master
        self.initial_workers = workers
        self._spark: SparkSession | None = None
        self._counters: SparkCounters | None = None
        self._graphs: dict[tuple[str, str, str], tuple[datasets.Graph, float]] = {}
        self._arrangements: dict[tuple[str, str, str], dict] = {}  # indices built per graph, shared by runs
        self._oracle_answers: dict = {}  # an oracle's answer on a graph serves every implementation run on it

    @property
    def spark(self) -> SparkSession:
        if self._spark is None:
            self._spark = spark_factory.get_session(self.master, self.initial_workers)
            self._counters = SparkCounters(self._spark)
        return self._spark

    @property
    def counters(self) -> SparkCounters:
        """The session's counters, there once `spark` has started it."""
        assert self._counters is not None, "no Spark session yet"
        return self._counters

    def graph(self, source: datasets.Source, semantics: str, workers: int) -> tuple[datasets.Graph, float, bool]:
        """(graph, load seconds, reused) — reused graphs report the load time of their first use."""
        key = (source.kind, source.location, semantics)
        if key in self._graphs:
            graph, load_s = self._graphs[key]
            return graph, load_s, True
        start = time.perf_counter()
        with self.counters.job_group(f"load:{source.name}"):
            graph = datasets.load(self.spark, source, semantics, partitions=workers)
        load_s = time.perf_counter() - start
        self._graphs[key] = (graph, load_s)
        return graph, load_s, False

    def run(self, req: RunRequest) -> dict:
        run_id = results.new_run_id()
        started = time.perf_counter()
        record: dict[str, Any] = {
            "schema_version": results.SCHEMA_VERSION, "run_id": run_id, "timestamp": results.now_iso(),
            "git": results.git_info(), "machine": results.machine_info(),
            "workload": req.workload, "trial": req.trial, "semantics": req.semantics,
            "query": {"name": str(req.query)} if not isinstance(req.query, (dict, Query)) else {"name": req.query.name if isinstance(req.query, Query) else req.query.get("name")},
            "dataset": {"name": req.dataset}, "implementation": req.impl,
            "params": {"workers": req.workers, **req.params}, "status": None, "error": None,
            "allow_unverified": req.allow_unverified, "timeout_expected": req.timeout_expected,
            "count": None, "verified": False, "unverified_reason": None, "oracle": None, "checks": [],
            "metrics": {}, "logical": {},
        }
        metrics = record["metrics"]
        stream, workdir = None, None
        try:
            from implementations import RunContext
            from implementations import get as get_impl

            stream_spec = req.params.get("updates")
            choices = dynamic.DYNAMIC_ORACLES if stream_spec is not None else ORACLE_CHOICES
            if req.oracle not in choices:
                raise DataError(f"unknown oracle '{req.oracle}' (expected one of {', '.join(choices)})")
            if req.workers < 1:
                raise DataError(f"workers must be at least 1, got {req.workers}")
            impl_cls = get_impl(req.impl)
            if stream_spec is not None and not impl_cls.maintains_updates:
                raise DataError(f"--updates: {req.impl} does not maintain counts under updates (delta-bigjoin does)")
            query, options = load_query(req.query)
            spec = make_join_spec(query, req.semantics, req.attribute_order, **options)
            record["query"] = {
                "name": query.name, "pattern": query.describe(), "attributes": list(query.attributes),
                "attribute_order": list(spec.attribute_order), "less_than": [list(p) for p in spec.less_than],
                "distinct": [list(p) for p in spec.distinct],
            }
            source = datasets.resolve(req.dataset)
            if self._spark is None:  # session start-up is reported on its own, outside wall_s
                session_start = time.perf_counter()
                _ = self.spark
                metrics["session_start_s"] = round(time.perf_counter() - session_start, 4)
                started = time.perf_counter()
            spark = self.spark
            spark_factory.set_workers(spark, req.workers)
            record["spark"] = {"master": spark.sparkContext.master, "version": spark.version, "app_id": spark.sparkContext.applicationId}
            graph, load_s, reused = self.graph(source, req.semantics, req.workers)
            record["dataset"] = graph.describe()
            metrics.update(load_s=round(load_s, 4), load_reused=reused)
            if impl_cls.driver_edges:
                started_driver_load = time.perf_counter()
                reused_arrays = graph.edge_arrays_read
                graph.edge_arrays()
                metrics.update(driver_load_s=round(time.perf_counter() - started_driver_load, 4), driver_load_reused=reused_arrays)

            arrangements = self._arrangements.setdefault((source.kind, source.location, req.semantics), {})
            stream = None
            if stream_spec is not None:  # the initial graph is a set of directed edges in every semantics
                directed, _, _ = self.graph(source, "directed", req.workers)
                workdir = store.new_scratch("stream")  # Spark's tasks write it: the store, not /tmp
                with self.counters.job_group(f"load:{source.name}"):
                    stream = updates.load_stream(spark, str(stream_spec), directed.df, workdir)
            impl = impl_cls(RunContext(spark, graph, spec, req.workers, dict(req.params), arrangements, stream))
            deadline = None if req.timeout_s is None else time.perf_counter() + req.timeout_s
            window_start = time.time()
            with MemorySampler(spark) as memory:
                metrics["memory"] = memory  # its report replaces it once it has stopped
                index_s, _ = self.timed(f"{run_id}:index", impl.prepare, deadline, impl.ctx.cancelled)
                query_s, outcome = self.timed(f"{run_id}:query", impl.count, deadline, impl.ctx.cancelled)
                metrics.update(index_s=round(index_s, 4), query_s=round(query_s, 4), index_reused=impl.index_reused)
                metrics["wall_s"] = round(time.perf_counter() - started, 4)
                record["count"] = int(outcome.count)
                record["logical"] = outcome.counters
                if stream is not None:
                    assert workdir is not None  # made with the stream
                    self._run_batches(record, impl, stream, spec, req, run_id, deadline, workdir, memory)
            metrics["memory"] = memory.report()
            metrics.update(self.counters.collect([f"{run_id}:index", f"{run_id}:query", f"{run_id}:updates"],
                                                 since=window_start))
            metrics["time_breakdown"] = time_breakdown(metrics, outcome.metrics.get("python_task_s"))
            for phase, breakdown in metrics["time_breakdown"].items() if req.spark_floor else ():
                shape = metrics["spark_stages_per_job"][phase]
                floor_s, _ = self.timed(f"{run_id}:floor-{phase}", lambda: floor_seconds(self.spark, shape, req.workers), None)  # noqa: B023 (called at once)
                breakdown["spark_floor_s"] = round(floor_s, 4)
            clash = sorted(set(outcome.metrics) & set(metrics))
            if clash:
                raise ExecutionError(f"{req.impl} reports metric '{clash[0]}', which the harness already measures")
            metrics.update(outcome.metrics)

            from .verify import verify

            def fetch(limit: int) -> list[tuple]:
                with self.counters.job_group(f"{run_id}:verify"):
                    return impl.matches(limit)

            if stream is not None:  # verified batch by batch
                disagrees = record["oracle"]["agrees"] is False
                record["unverified_reason"] = None if record["verified"] or disagrees else record["oracle"].get("reason")
            else:
                check = verify(graph.published, graph.parquet_glob(), graph.edges, spec, record["count"], fetch,
                               req.oracle, req.oracle_timeout_s, answers=self._oracle_answers)
                disagrees = check.pop("disagrees")
                record.update(check)
            record["status"] = "VAL" if disagrees else "OK" if record["verified"] else "UNVERIFIED"
        except HarnessError as exc:
            record["status"] = exc.status
            record["error"] = str(exc)
            if exc.__cause__ is not None:
                record["traceback"] = "".join(traceback.format_exception(exc.__cause__, limit=8))
        except Exception as exc:  # an implementation or Spark failure
            record["status"] = "EXE"
            record["error"] = f"{type(exc).__name__}: {_first_line(exc)}"
            record["traceback"] = traceback.format_exc(limit=8)
        finally:
            if workdir is not None:
                shutil.rmtree(workdir, ignore_errors=True)
        if isinstance(metrics.get("memory"), MemorySampler):
            metrics["memory"] = metrics["memory"].report()
        if record["status"] in ("TIM", "EXE") and self._counters is not None:
            with contextlib.suppress(Exception):
                metrics.update(self._counters.collect([f"{run_id}:index", f"{run_id}:query", f"{run_id}:updates"], settle_s=5))
        metrics.setdefault("wall_s", round(time.perf_counter() - started, 4))
        return record

    def _run_batches(self, record: dict, impl, stream, spec, req: RunRequest, run_id: str, deadline, workdir: Path,
                     memory: MemorySampler) -> None:
        """Apply the stream batch by batch (each timed), recounting the graph with an oracle after each
        one. With params `recompute: bigjoin`, a fresh BiGJoin run on each state is timed too (the
        recompute an update saves); its count is agreement, not verification."""
        spark, metrics = self.spark, record["metrics"]
        pattern = Pattern.of(spec.query, spec.semantics)
        recompute = req.params.get("recompute")
        if recompute not in (None, "bigjoin"):
            raise DataError(f"params.recompute: expected 'bigjoin', got {recompute!r}")

        def recount(name: str) -> dict:
            with memory.paused(), self.counters.job_group(f"{run_id}:verify"):
                return dynamic.recount(reference, pattern, req.oracle, req.oracle_timeout_s, name)

        def recompute_bigjoin(name: str) -> dict | None:
            if recompute is None:
                return None
            from implementations import RunContext
            from implementations.bigjoin import BiGJoin

            with memory.paused(), self.counters.job_group(f"{run_id}:recompute"):
                graph = datasets.from_canonical_parquet(spark, reference.export(name), req.semantics, name, req.workers)
                fresh = BiGJoin(RunContext(spark, graph, spec, req.workers))
                start = time.perf_counter()
                fresh.prepare()
                count = fresh.count().count
                seconds = time.perf_counter() - start
                graph.df.unpersist()
                fresh.index.close()
            return {"count": count, "seconds": round(seconds, 4)}

        reference = dynamic.Reference(stream, workdir, req.semantics)
        try:
            initial = recount("initial")
            initial.update(count=record["count"], agrees=None if initial["oracle_count"] is None else initial["oracle_count"] == record["count"])
            count, entries, sizes = record["count"], [], stream.sizes()
            for batch in stream.batches:
                seconds, outcome = self.timed(f"{run_id}:updates", lambda: impl.apply_updates(stream.batch(batch)), deadline)  # noqa: B023 (called at once)
                count += outcome.delta
                reference.apply(batch)
                check = recount(f"batch-{batch}")
                entries.append(dynamic.batch_entry(batch, sizes[batch], seconds, outcome, count, check,
                                                   recompute_bigjoin(f"batch-{batch}")))
        finally:
            reference.close()
        check = dynamic.summary(initial, entries)
        total_s = sum(e["seconds"] for e in entries)
        recounts = [e["recompute_agrees"] for e in entries if "recompute_agrees" in e]
        record.update(count=count, initial=initial, batches=entries, checks=[check], oracle=check,
                      verified=check["status"] == "ok" and bool(check["agrees"]),
                      agreement=None if not recounts else {
                          "with": "a fresh bigjoin run on every state (timing comparison, not verification)",
                          "states": len(recounts), "agreeing": sum(recounts)})
        metrics.update(batches=len(entries), updates_s=round(total_s, 4),
                       updates_per_s=round(sum(e["updates"] for e in entries) / total_s, 1) if total_s else None,
                       output_changes_per_s=round(sum(e["output_changes"] for e in entries) / total_s, 1) if total_s else None,
                       stream=stream.source)

    def timed(self, group: str, fn, deadline: float | None, cancelled: threading.Event | None = None):
        """Run fn in a thread tagged with a Spark job group; at the deadline cancel the group and set
        `cancelled` (driver-side work stops at its next check)."""
        from pyspark import InheritableThread

        box: dict = {}

        def target():
            with self.counters.job_group(group):
                try:
                    box["value"] = fn()
                except BaseException as exc:
                    box["error"] = exc

        thread = InheritableThread(target=target, daemon=True)
        start = time.perf_counter()
        thread.start()
        thread.join(None if deadline is None else max(0.0, deadline - time.perf_counter()))
        if thread.is_alive():
            timed_out_s = time.perf_counter() - start
            self.counters.cancel(group)
            if cancelled is not None:
                cancelled.set()
            thread.join(60)
            still = "; its work is still running" if thread.is_alive() else ""
            raise RunTimeout(f"timed out after {timed_out_s:.1f} s in {group.rsplit(':', 1)[1]}{still}")
        if "error" in box:
            exc = box["error"]
            if isinstance(exc, HarnessError):
                raise exc
            raise ExecutionError(f"{type(exc).__name__}: {_first_line(exc)}") from exc
        return time.perf_counter() - start, box.get("value")


def time_breakdown(metrics: dict, python_task_s: dict | None = None) -> dict:
    """Where each timed phase's wall time went: the tasks' critical path (per stage, its slowest
    task) and the rest, scheduling (driver, job and stage overheads, waiting), plus Spark's totals
    over all tasks, and the query tasks' own Python clocks (kernel, pack, I/O) where the
    implementation keeps them. Phases without Spark stages (local-gj) get none."""
    out = {}
    for phase in ("index", "query"):
        spark = (metrics.get("spark_time_by_phase") or {}).get(phase)
        wall = metrics.get(f"{phase}_s")
        if not spark or wall is None:
            continue
        out[phase] = {"wall_s": wall, "critical_path_s": round(spark["slowest_tasks_s"], 4),
                      "scheduling_s": round(max(0.0, wall - spark["slowest_tasks_s"]), 4),
                      **{k: v for k, v in spark.items() if k != "slowest_tasks_s"}}
    if "query" in out and python_task_s:
        out["query"]["python_task_s"] = python_task_s
    return out


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__
