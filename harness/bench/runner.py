"""Run one (query, dataset, implementation, parameters) combination: load, prepare, count, measure,
verify, and return the complete result record. Every failure becomes a typed status."""

from __future__ import annotations

import contextlib
import re
import shutil
import threading
import time
import traceback
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from harness.bench import census, listing, memory_model, recompute, shared_index
from harness.bench.record import RunRecord
from harness.core import motifs, results, store
from harness.core.errors import DataError, ExecutionError, HarnessError, MemoryCapExceeded, RunTimeout
from harness.core.params import Param, human, resolve
from harness.core.query import JoinSpec, Query, load_query, make_join_spec
from harness.data import datasets, updates
from harness.spark import capped_cluster, history, memory_cap
from harness.spark import session as spark_factory
from harness.spark.capped_cluster import CappedWorkers
from harness.spark.floor import floor_seconds
from harness.spark.memory import MemorySampler
from harness.spark.metrics import SparkCounters
from harness.verify import dynamic
from harness.verify.check import ORACLE_CHOICES
from harness.verify.oracles import Pattern

if TYPE_CHECKING:
    from implementations import Implementation, Outcome

# Parameters the harness itself reads from a run's params; every other key is the implementation's.
RUN_PARAMS = (
    Param(
        "updates",
        str,
        None,
        "update stream, for an implementation that maintains counts under updates: a spec "
        "(holdback=0.1,batch=1000,batches=5,deletes=0.2,seed=1) or a file of `src dst ±1 batch` "
        "lines (then the dataset is the initial graph)",
    ),
    Param(
        "recompute",
        str,
        None,
        "with updates: also time a fresh run of this implementation on every state "
        "(the recompute an update saves; its count is agreement, not verification)",
    ),
    Param(
        "memory_per_worker",
        str,
        None,
        "cap each worker's memory (its executor JVM and Python workers together) at SIZE, e.g. 2g, "
        "enforced by a cgroup (root); the run goes to W capped worker processes the harness starts, "
        "and a run that exceeds the cap ends MEM",
    ),
    Param(
        "census_method",
        str,
        None,
        "a motif census (--query motifs:3 or motifs:4): 'induced' counts each shape as an induced pattern, "
        "'convert' counts the plain shapes and converts; default induced where the implementation counts "
        "induced patterns, else convert",
    ),
    Param(
        "output",
        str,
        None,
        "write every match as Parquet into this directory (new or empty; it may be on HARNESS_STORE): one "
        "column per pattern vertex, original vertex ids, written where the matches are found",
    ),
    Param(
        "limit",
        int,
        None,
        "stop after N matches (1: an existence query); the run counts min(N, matches) and records the "
        "seconds to the first match (metrics.first_match_s)",
    ),
)


def split_params(impl_cls, params: dict) -> tuple[dict, dict]:
    """(the harness's typed run parameters, the implementation's own as given), both checked against
    their declarations: an undeclared key or a value of the wrong type is a DataError."""
    run_names = {p.name for p in RUN_PARAMS}
    own = {k: v for k, v in params.items() if k not in run_names}
    resolve(impl_cls.params, own, impl_cls.name)
    return resolve(RUN_PARAMS, {k: v for k, v in params.items() if k in run_names}, "the harness"), own


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
    mem_expected: bool = False  # and a MEM (a memory cap too small for it: where it stops is the result)
    spark_floor: bool = False  # also time empty Spark jobs shaped like each phase's (time_breakdown.<phase>.spark_floor_s)
    labels: str | None = None  # a vertex label file for the dataset (--labels, a workload's `labels`), over the registry's
    series: str | None = None  # runs plotted together across graphs (workload.WEAK_SCALING)
    fresh_executors: bool = False  # under a cap: a session of its own (new executors), not the last run's grown ones


def resolve_query(req: RunRequest, impl_cls, run_params: dict) -> tuple[JoinSpec, census.CensusPlan | None, dict]:
    """(the join spec, a census's plan or None, the record's `query`) of a request, checked: a bad
    query, or a parameter it cannot take, is a DataError before Spark starts. A census's spec is
    its first shape's."""
    k = motifs.parse(req.query)
    if k is not None:
        if run_params.get("updates") is not None:
            raise DataError(f"query '{req.query}': a motif census is not maintained under updates")
        plan = census.plan(k, impl_cls, run_params.get("census_method"), req.semantics, req.attribute_order)
        return plan.runs[0].spec, plan, census.query_record(plan)
    if run_params.get("census_method") is not None:
        raise DataError(f"params.census_method: applies to a motif census (motifs:3, motifs:4), not to query '{req.query}'")
    query, options = load_query(req.query)
    spec = make_join_spec(query, req.semantics, req.attribute_order, **options)
    return (
        spec,
        None,
        {
            "name": query.name,
            "pattern": query.describe(),
            "attributes": list(query.attributes),
            "attribute_order": list(spec.attribute_order),
            "less_than": [list(p) for p in spec.less_than],
            "distinct": [list(p) for p in spec.distinct],
        },
    )


def kernels_needed(impl_cls, recompute_cls, spec: JoinSpec, census_plan: census.CensusPlan | None) -> frozenset[str]:
    """The kernel families a run calls (implementations.warm.FAMILIES): its implementation's and its
    recompute's, with their variants for the anti-pairs and vertex labels of the patterns it counts."""
    from implementations import kernels_of

    names = [impl_cls.name] + ([recompute_cls.name] if recompute_cls else [])
    specs = [spec] if census_plan is None else [run.spec for run in census_plan.runs]
    families: frozenset[str] = frozenset()
    for s in specs:
        families |= kernels_of(names, anti=bool(s.anti), labels=bool(s.query.labels))
    return families


def planned_kernels(requests: list[RunRequest]) -> frozenset[str]:
    """The kernel families a workload's runs call, known before its session starts; a request whose
    check fails adds none (its run reports the failure)."""
    from implementations import get as get_impl

    families: frozenset[str] = frozenset()
    for req in requests:
        try:
            impl_cls = get_impl(req.impl)
            run_params, _ = split_params(impl_cls, req.params)
            spec, census_plan, _ = resolve_query(req, impl_cls, run_params)
            families |= kernels_needed(impl_cls, recompute.implementation(run_params["recompute"]), spec, census_plan)
        except DataError:
            continue
    return families


def _query_name(query: str | dict | Query) -> str | None:
    """The query's name as the request gives it: a built-in's or file's name, a spec's `name`."""
    if isinstance(query, Query):
        return query.name
    if isinstance(query, dict):
        return query.get("name")
    return str(query)


def labelled_source(req: RunRequest, spec: JoinSpec) -> datasets.Source:
    """The request's dataset with its vertex labels (`req.labels` over the registry's); a missing label
    file, or a labelled pattern on a graph without labels, is a DataError before Spark starts."""
    source = datasets.resolve(req.dataset)
    if req.labels is not None:
        path = Path(req.labels)
        if not path.exists():
            raise DataError(f"label file {path}: not found")
        source = replace(source, labels=str(path.resolve()))
    elif source.labels is not None and not Path(source.labels).exists():
        raise DataError(f"label file {source.labels}: not found (dataset '{source.name}', registry key 'labels')")
    if spec.query.labels and not source.labelled:
        raise DataError(
            f"query '{spec.query.name}' requires vertex labels (YAML key 'labels', or a:1 in a pattern string): "
            f"dataset '{source.name}' has none (give --labels PATH, or labels=K to a generator)"
        )
    return source


def _new_record(req: RunRequest) -> RunRecord:
    """The result record before anything ran, filled from the request."""
    return RunRecord(
        schema_version=results.SCHEMA_VERSION,
        run_id=results.new_run_id(),
        timestamp=results.now_iso(),
        git=results.git_info(),
        machine=results.machine_info(),
        workload=req.workload,
        trial=req.trial,
        semantics=req.semantics,
        query={"name": _query_name(req.query)},
        dataset={"name": req.dataset},
        implementation=req.impl,
        params={"workers": req.workers, **req.params},
        timeout_s=req.timeout_s,
        allow_unverified=req.allow_unverified,
        timeout_expected=req.timeout_expected,
        mem_expected=req.mem_expected,
        series=req.series,
    )


@dataclass
class _Run:
    """One run's state, handed from step to step; `record` is what the run writes."""

    req: RunRequest
    started: float  # wall_s counts from here (reset once the Spark session has started)
    record: RunRecord
    workdir: Path | None = None  # a dynamic run's scratch for its stream, removed when the run ends
    staging: Path | None = None  # --output: where the matches are written until the run has finished them
    prepared_s: float = 0.0  # seconds spent in prepare so far (every census shape's), charged to its builds

    @property
    def run_id(self) -> str:
        return self.record.run_id

    @property
    def phase_groups(self) -> list[str]:
        """The Spark job groups whose counters are the run's."""
        return [f"{self.run_id}:index", f"{self.run_id}:query", f"{self.run_id}:updates"]


@dataclass
class _Plan:
    """What the check step resolved from the request, before Spark starts."""

    impl_cls: type[Implementation]
    run_params: dict  # the harness's own (RUN_PARAMS), typed
    impl_params: dict  # the implementation's, as given
    recompute: type[Implementation] | None  # the implementation params.recompute names
    spec: JoinSpec
    source: datasets.Source
    census: census.CensusPlan | None = None  # a motif census: its shapes, each run in turn
    listed: listing.Listing | None = None  # --output / --limit: the matches listed (write_matches), not only counted


@dataclass
class _Loaded:
    """What the load step built: the graph, a dynamic run's update stream, and the implementation on them."""

    graph: datasets.Graph
    stream: updates.UpdateStream | None
    impl: Implementation
    counted: list[census.Counted] = field(default_factory=list)  # a census: each shape's run


class Runner:
    """Holds one Spark session and the graphs loaded so far (a workload loads each dataset once)."""

    def __init__(self, master: str | None = None, workers: int = 2, kernels: frozenset[str] | None = None):
        self.master = master
        self.initial_workers = workers
        # The kernel families the session warms (None: all): those of the runs to come, grown by each run.
        self.kernels = kernels
        self._spark = None
        self._counters: SparkCounters | None = None
        self._graphs: dict[tuple[str, str, str | None, str], tuple[datasets.Graph, float]] = {}
        # Indices built per graph, shared by runs; each reuse charged the build's time (shared_index).
        self._arrangements: dict[tuple[str, str, str], shared_index.Arrangements] = {}
        self._oracle_answers: dict = {}  # an oracle's answer on a graph serves every implementation run on it
        self.live: dict = {}  # the current run's phase and progress, for a live display (`live_status`)
        self._capped: CappedWorkers | None = None  # the session's capped workers, while runs ask for a cap
        # A session of one run's own (fresh executors) warms that run's kernel families alone; else all.
        self._own_session_kernels: frozenset[str] | None = None

    @property
    def spark(self):
        if self._spark is None:
            if self._capped is not None:
                self._spark = self._capped.session(self._own_session_kernels)
            else:
                self._spark = spark_factory.get_session(self.master, self.initial_workers, kernels=self.kernels)
            self._counters = SparkCounters(self._spark)
        return self._spark

    def _use_cap(self, wanted: CappedWorkers | None) -> None:
        """Move to the session a run's cap needs (its capped workers), or the usual one."""
        if (None if self._capped is None else self._capped.key) == (None if wanted is None else wanted.key):
            return
        self.close()
        self._capped = wanted

    def _fresh_executors(self) -> None:
        """A run on capped workers starts on executors of its own: the session stops (its executors, and
        the heaps earlier runs grew in them, go) and the next starts new ones on the same workers, so what
        a run measures does not depend on the runs before it. The graph is loaded again in it."""
        if self._capped is None or self._spark is None:
            return
        spark_factory.stop_session()
        self._spark, self._counters = None, None
        self._graphs.clear()

    def _use_kernels(self, needed: frozenset[str]) -> None:
        """A session whose warm-up left out kernels this run calls is restarted with them (before the run's
        clock starts), so none compiles inside a timed phase."""
        if self.kernels is None or needed <= self.kernels:
            return
        self.kernels = self.kernels | needed
        if self._spark is not None and self._capped is None:  # a capped session warms every family
            self.close()

    def close(self) -> None:
        """Stop the session and any capped workers; the graphs loaded in it go with it."""
        if self._spark is not None:
            spark_factory.stop_session()
        if self._capped is not None:
            self._capped.stop()
        self._spark, self._counters, self._capped = None, None, None
        self._graphs.clear()
        self._arrangements.clear()

    @property
    def counters(self) -> SparkCounters:
        """Tags Spark jobs with job groups and reads their counters; starts the session if need be."""
        spark = self.spark
        if self._counters is None:  # SparkCounters failed when the session started: fail the same way
            self._counters = SparkCounters(spark)
        return self._counters

    def graph(self, source: datasets.Source, semantics: str, workers: int) -> tuple[datasets.Graph, float, bool]:
        """(graph, load seconds, reused) — reused graphs report the load time of their first use."""
        key = (source.kind, source.location, source.labels, semantics)
        if key in self._graphs:
            graph, load_s = self._graphs[key]
            return graph, load_s, True
        start = time.perf_counter()
        with self.counters.job_group(f"load:{source.name}"):
            graph = datasets.load(self.spark, source, semantics, partitions=workers)
        load_s = time.perf_counter() - start
        self._graphs[key] = (graph, load_s)
        return graph, load_s, False

    def run(self, req: RunRequest) -> RunRecord:
        """One run as short steps (gapbs's BenchmarkKernel): check, load, timed prepare and count,
        measure, verify. Every failure becomes a status in the record, which is always complete."""
        run = _Run(req, time.perf_counter(), _new_record(req))
        self.live = {"phase": "check", "started": run.started, "progress": {}}
        try:
            plan = self._check(run)
            self.live["phase"] = "load"
            loaded = self._load(run, plan)
            self.live["progress"] = loaded.impl.ctx.progress
            window_start, outcome = self._prepare_and_count(run, plan, loaded)
            self._measure(run, outcome, window_start)
            self.live["phase"] = "verify"
            self._verify(run, plan, loaded)
        except HarnessError as exc:
            run.record.status = exc.status
            run.record.error = str(exc)
            if exc.__cause__ is not None:
                run.record.traceback = "".join(traceback.format_exception(exc.__cause__, limit=8))
        except Exception as exc:  # an implementation or Spark failure
            run.record.status = "EXE"
            run.record.error = f"{type(exc).__name__}: {_first_line(exc)}"
            run.record.traceback = traceback.format_exc(limit=8)
        finally:
            if run.workdir is not None:
                shutil.rmtree(run.workdir, ignore_errors=True)
            listing.discard(run.staging)  # a listing moved into place has left it; a failed one goes
        if self._capped is not None:
            self._cap_verdict(run)
        self._finish(run)
        if self._capped is not None and run.record.status == "EXE" and lost_to_a_heap(run.record.metrics):
            self._mark_mem(run, None)  # seen in the failed run's Spark counters, which _finish read
        self.live = {}
        return run.record

    def live_status(self) -> str:
        """One line on the current run: its phase, how far it has got (the BiGJoin family: level and
        batches), its elapsed time and the Spark UI's address while the session is up."""
        live = self.live
        if not live:
            return ""
        parts = [live["phase"]]
        progress = live.get("progress") or {}
        if "level" in progress:
            parts.append(f"level {progress['level']}")
        if "batches_done" in progress:
            parts.append(
                f"batch {progress['batches_done'] + 1} of ~{max(progress.get('batches_estimate', 0), progress['batches_done'] + 1)}"
            )
        parts.append(f"{time.perf_counter() - live['started']:.0f} s")
        url = self._spark.sparkContext.uiWebUrl if self._spark is not None else None
        if url:
            parts.append(f"Spark UI {url}")
        return " · ".join(parts)

    def _check(self, run: _Run) -> _Plan:
        """Check every name and parameter of the request before Spark starts; resolve the join spec."""
        from implementations import get as get_impl

        req, record = run.req, run.record
        stream_spec = req.params.get("updates")
        choices = dynamic.DYNAMIC_ORACLES if stream_spec is not None else ORACLE_CHOICES
        if req.oracle not in choices:
            raise DataError(f"unknown oracle '{req.oracle}' (expected one of {', '.join(choices)})")
        if req.workers < 1:
            raise DataError(f"workers must be at least 1, got {req.workers}")
        impl_cls = get_impl(req.impl)
        if stream_spec is not None and not impl_cls.maintains_updates:
            raise DataError(f"--updates: {req.impl} does not maintain counts under updates ({_maintainers()})")
        run_params, impl_params = split_params(impl_cls, req.params)
        recompute_cls = recompute.implementation(run_params["recompute"])
        spec, census_plan, record.query = resolve_query(req, impl_cls, run_params)
        listed = listing.check(run_params, impl_cls, census_plan is not None)
        self._use_cap(self._capped_workers(run_params["memory_per_worker"], impl_cls, req.workers))
        needed = kernels_needed(impl_cls, recompute_cls, spec, census_plan)
        self._own_session_kernels = needed if req.fresh_executors and self._capped is not None else None
        if req.fresh_executors:
            self._fresh_executors()
        self._use_kernels(needed)
        return _Plan(impl_cls, run_params, impl_params, recompute_cls, spec, labelled_source(req, spec), census_plan, listed)

    def _capped_workers(self, size: str | None, impl_cls, workers: int) -> CappedWorkers | None:
        """The capped workers a run asks for: W of its own in local mode, or those of the capped
        cluster it names; a one-line refusal where a cap could not bind."""
        if size is None:
            return None
        cap = memory_cap.parse_cap(size, "memory_per_worker")
        if impl_cls.runs_in_driver:
            raise DataError(f"memory_per_worker: {impl_cls.name} computes in the driver, which a per-worker cap does not bound")
        master = spark_factory.resolve_master(self.master)
        if not spark_factory.is_local(master):
            return capped_cluster.attached(master, cap)
        problem = memory_cap.problem()
        if problem:
            raise DataError(problem)
        return CappedWorkers(cap, workers)

    def _cap_verdict(self, run: _Run) -> None:
        """MEM if a capped worker lost a process to its cap, or an executor's heap ran out; and each
        worker's peak beside the cap, whatever the status."""
        capped, record = self._capped, run.record
        assert capped is not None
        hit = capped.hit() or capped.start_hit
        if hit is not None or "OutOfMemoryError" in f"{record.error}\n{record.traceback}":
            self._mark_mem(run, hit)
        resident = capped.resident_peaks()
        record.metrics["memory_cap"] = {
            "cap_bytes": capped.cap,
            "heap_bytes": memory_cap.heap_bytes(capped.cap),
            "peak_per_worker_bytes": capped.peaks(),
            "resident_peak_per_worker_bytes": resident,
            "resident_idle_per_worker_bytes": capped.idle,
            "executor_jvm_growth_per_worker_bytes": capped.executor_growth_peaks(),
            "model": memory_model.beside_model(record, resident, capped.idle),
            "enforced_by": "memory cgroup per worker (executor JVM + Python workers)",
        }

    def _mark_mem(self, run: _Run, hit: capped_cluster.CapHit | None) -> None:
        """The run ended MEM: the cap killed a process (`hit`), or (None) an executor's heap ran out."""
        capped, record = self._capped, run.record
        assert capped is not None
        phase = "start-up" if capped.start_hit else self.live.get("phase", "start-up")
        record.status = "MEM"
        heap = f"an executor's heap (-Xmx {human(memory_cap.heap_bytes(capped.cap))}) ran out"
        again = capped_cluster.REPEATED if capped.start_repeated else ""
        record.error = f"{hit.describe(capped.cap) if hit else heap} in {phase}{again}"
        record.memory_cap_hit = {
            "worker": hit.worker if hit else None,
            "killed": hit.killed if hit else [],
            "phase": phase,
        }

    def _load(self, run: _Run, plan: _Plan) -> _Loaded:
        """Start Spark (reported apart, outside wall_s), load the graph, the driver's edge arrays and the
        update stream, and build the implementation on them."""
        from implementations import RunContext, WorkerCap

        req, record, metrics, source = run.req, run.record, run.record.metrics, plan.source
        if self._spark is None:  # session start-up is reported on its own, outside wall_s
            session_start = time.perf_counter()
            _ = self.spark  # starts the session
            metrics["session_start_s"] = round(time.perf_counter() - session_start, 4)
            run.started = time.perf_counter()
        spark = self.spark
        if self._capped is not None:
            self._capped.begin()
        spark_factory.set_workers(spark, req.workers)
        record.spark = {
            "master": spark.sparkContext.master,
            "version": spark.version,
            "app_id": spark.sparkContext.applicationId,
            "event_log": history.event_log_of(spark),  # `make history` serves it
            "jit": spark_factory.jit(),  # the tests' C1 alone is not a measured run's JVM
        }
        graph, load_s, reused = self.graph(source, req.semantics, req.workers)
        record.dataset = graph.describe()
        metrics.update(load_s=round(load_s, 4), load_reused=reused)
        if plan.impl_cls.wants_driver_edges(graph.edges, plan.impl_params):
            started_driver_load = time.perf_counter()
            reused_arrays = graph.edge_arrays_read
            graph.edge_arrays()
            metrics.update(driver_load_s=round(time.perf_counter() - started_driver_load, 4), driver_load_reused=reused_arrays)
        arrangements = self._arrangements.setdefault((source.kind, source.location, req.semantics), shared_index.Arrangements())
        stream = None
        if plan.run_params["updates"] is not None:  # the initial graph is a set of directed edges in every semantics
            # The stream samples the directed relation (both orientations, self-loops): directed, this is the
            # run's graph again (reused); undirected, other rows the run's simple graph cannot give back.
            directed, _, _ = self.graph(source, "directed", req.workers)
            run.workdir = workdir = store.new_scratch("stream")  # Spark's tasks write it: the store, not /tmp
            with self.counters.job_group(f"load:{source.name}"):
                stream = updates.load_stream(spark, plan.run_params["updates"], directed.df, workdir)
        capped = self._capped
        worker_cap = None
        if capped is not None:
            heap = memory_cap.heap_bytes(capped.cap)
            worker_cap = WorkerCap(capped.cap, max(capped.idle, default=0), capped.executor_growth, heap)
        context = RunContext(spark, graph, plan.spec, req.workers, plan.impl_params, arrangements, stream, worker_cap=worker_cap)
        impl = plan.impl_cls(context)
        return _Loaded(graph, stream, impl)

    def _prepare_and_count(self, run: _Run, plan: _Plan, loaded: _Loaded) -> tuple[float, Outcome]:
        """Time prepare (index_s) and count (query_s), then any update batches, under the memory sampler.
        Returns when the run's window of Spark counters opened (epoch seconds) and count's outcome."""
        req, record, metrics, impl = run.req, run.record, run.record.metrics, loaded.impl
        deadline = None if req.timeout_s is None else time.perf_counter() + req.timeout_s
        window_start = time.time()
        arrangements = impl.ctx.arrangements
        assert isinstance(arrangements, shared_index.Arrangements)  # as _load made it
        built_before = arrangements.begin()
        with MemorySampler(self.spark) as memory:
            metrics["memory"] = memory  # its report replaces it once it has stopped
            try:
                if plan.census is None:
                    index_s, query_s, outcome = self._index_and_count(run, impl, deadline, listed=plan.listed)
                    index_reused = impl.index_reused
                else:
                    index_s, query_s, outcome = self._census(run, plan, loaded, deadline)
                    index_reused = loaded.counted[0].index_reused
            except BaseException:
                # An index built by a run that then failed (MEM in its query) is still its build: a later
                # run that reuses it is charged its seconds.
                arrangements.settle(built_before, req.impl, req.trial, run.prepared_s)
                raise
            metrics.update(index_s=round(index_s, 4), query_s=round(query_s, 4), index_reused=index_reused)
            shared_index.charge(metrics, arrangements.settle(built_before, req.impl, req.trial, index_s))
            metrics["wall_s"] = round(time.perf_counter() - run.started, 4)
            record.count = int(outcome.count)
            record.logical = outcome.counters
            if plan.listed is not None:
                self._listed(run, plan.listed, outcome)
            if loaded.stream is not None:
                self._run_batches(run, plan, impl, loaded.stream, deadline, memory)
        metrics["memory"] = memory.report()
        return window_start, outcome

    def _index_and_count(
        self, run: _Run, impl: Implementation, deadline: float | None, shape: str = "", listed: listing.Listing | None = None
    ) -> tuple[float, float, Outcome]:
        """(index_s, query_s, outcome): prepare, then count (or, listed, write_matches), each timed under
        the run's job groups."""
        self.live["phase"] = f"index{shape}"
        index_s, _ = self.timed(f"{run.run_id}:index", impl.prepare, deadline, impl.ctx.cancelled)
        run.prepared_s += index_s
        self.live["phase"] = f"query{shape}"
        query = impl.count
        if listed is not None:
            run.staging = listing.staging_dir(listed, run.run_id)
            staging = None if run.staging is None else str(run.staging)
            query = lambda: impl.write_matches(staging, listed.limit)  # noqa: E731
        query_s, outcome = self.timed(f"{run.run_id}:query", query, deadline, impl.ctx.cancelled)
        return index_s, query_s, outcome

    def _listed(self, run: _Run, listed: listing.Listing, outcome) -> None:
        """A listing's record: its limit, the seconds to its first match, and the written file (moved into
        place once its row count, read from its footers, equals the run's count)."""
        record = run.record
        record.limit = listed.limit
        record.metrics["first_match_s"] = None if outcome.first_match_s is None else round(outcome.first_match_s, 4)
        if run.staging is not None:
            assert record.count is not None  # counted before it is listed
            record.output = listing.publish(run.staging, listed, record.count, record.query["attributes"])
            run.staging = None

    def _census(self, run: _Run, plan: _Plan, loaded: _Loaded, deadline: float | None) -> tuple[float, float, Outcome]:
        """A motif census: each shape prepared and counted in turn by its own instance of the implementation,
        all on the same graph, indices (arrangements) and deadline; the record's `census` section, and
        the run's index_s, query_s and outcome summed over the shapes."""
        from implementations import Outcome

        assert plan.census is not None
        shapes = plan.census.runs
        for i, shape in enumerate(shapes):
            impl = loaded.impl if i == 0 else plan.impl_cls(census.with_spec(loaded.impl.ctx, shape.spec))
            try:
                index_s, query_s, outcome = self._index_and_count(run, impl, deadline, f" {shape.motif.name}")
            except HarnessError as exc:  # which shape it stopped at, in the same status
                raise type(exc)(f"{exc} (census shape {shape.motif.name}, {i + 1} of {len(shapes)})") from exc.__cause__
            loaded.counted.append(
                census.Counted(
                    shape, impl, index_s, query_s, impl.index_reused, int(outcome.count), outcome.counters, outcome.metrics
                )
            )
        run.record.census, total, counters, own = census.summarize(plan.census, loaded.counted)
        return sum(c.index_s for c in loaded.counted), sum(c.query_s for c in loaded.counted), Outcome(total, counters, own)

    def _measure(self, run: _Run, outcome: Outcome, window_start: float) -> None:
        """Spark's counters for the run's window, the time breakdown (and Spark floors), and the
        implementation's own metrics, which may not replace the harness's."""
        req, metrics = run.req, run.record.metrics
        metrics.update(self.counters.collect(run.phase_groups, since=window_start))
        metrics["time_breakdown"] = time_breakdown(metrics, outcome.metrics.get("python_task_s"))
        for phase, breakdown in metrics["time_breakdown"].items() if req.spark_floor else ():
            shape = metrics["spark_stages_per_job"][phase]
            floor_s, _ = self.timed(f"{run.run_id}:floor-{phase}", lambda: floor_seconds(self.spark, shape, req.workers), None)  # noqa: B023 (called at once)
            breakdown["spark_floor_s"] = round(floor_s, 4)
        clash = sorted(set(outcome.metrics) & set(metrics))
        if clash:
            raise ExecutionError(f"{req.impl} reports metric '{clash[0]}', which the harness already measures")
        metrics.update(outcome.metrics)

    def _verify(self, run: _Run, plan: _Plan, loaded: _Loaded) -> None:
        """Check the count with the chosen oracle (a dynamic run: the batch recounts' verdict; a census:
        each shape's induced count) and set the status."""
        from harness.verify.check import verify

        req, record, graph = run.req, run.record, loaded.graph

        def check(spec: JoinSpec, count: int, matches) -> dict:
            """verify(), listing the implementation's matches (`matches(limit)`, None: none to compare)
            under the run's verify job group: their Spark jobs are not the run's."""

            def fetch(limit: int) -> list[tuple]:
                with self.counters.job_group(f"{run.run_id}:verify"):
                    return matches(limit)

            return verify(
                graph.published,
                graph.parquet_glob(),
                graph.edges,
                spec,
                count,
                None if matches is None else fetch,
                req.oracle,
                req.oracle_timeout_s,
                answers=self._oracle_answers,
                limit=record.limit,
                labels_glob=graph.labels_glob(),
            )

        if loaded.stream is not None:  # verified batch by batch
            assert record.oracle is not None  # _run_batches set it
            disagrees = record.oracle["agrees"] is False
            record.unverified_reason = None if record.verified or disagrees else record.oracle.get("reason")
        else:
            assert record.count is not None  # counted before it is verified
            if plan.census is None:
                written = record.output  # a listing's own rows are what it found: those are compared
                listed = loaded.impl.matches if written is None else lambda n: listing.read_back(written["path"], n)
                verdict = check(plan.spec, record.count, listed)
            else:
                assert record.census is not None
                verdict = census.verify(record.census, loaded.counted, check, plan.census.method)
            disagrees = verdict["disagrees"]
            record.oracle, record.checks = verdict["oracle"], verdict["checks"]
            record.verified, record.unverified_reason = verdict["verified"], verdict["unverified_reason"]
        record.status = "VAL" if disagrees else "OK" if record.verified else "UNVERIFIED"

    def _finish(self, run: _Run) -> None:
        """Complete the record whatever happened: the memory report, Spark's counters of a failed run, wall_s and
        Graphalytics' times."""
        metrics = run.record.metrics
        if isinstance(metrics.get("memory"), MemorySampler):
            metrics["memory"] = metrics["memory"].report()
        if run.record.status in ("TIM", "EXE") and self._counters is not None:
            with contextlib.suppress(Exception):
                metrics.update(self._counters.collect(run.phase_groups, settle_s=5))
        metrics.setdefault("wall_s", round(time.perf_counter() - run.started, 4))
        metrics["graphalytics"] = graphalytics_times(metrics)

    def _run_batches(
        self,
        run: _Run,
        plan: _Plan,
        impl: Implementation,
        stream: updates.UpdateStream,
        deadline: float | None,
        memory: MemorySampler,
    ) -> None:
        """Apply the stream batch by batch (each timed), recounting the graph with an oracle after each
        one. With params `recompute: NAME`, a fresh run of registered implementation NAME on each state
        is timed too (the recompute an update saves); its count is agreement, not verification."""
        req, record, run_id, workdir = run.req, run.record, run.run_id, run.workdir
        assert workdir is not None  # _load wrote the stream there
        metrics = record.metrics
        pattern = Pattern.of(plan.spec.query, plan.spec.semantics)

        def recount(name: str) -> dict:
            with memory.paused(), self.counters.job_group(f"{run_id}:verify"):
                return dynamic.recount(reference, pattern, req.oracle, req.oracle_timeout_s, name)

        def recompute_state(name: str) -> dict | None:
            if plan.recompute is None:
                return None
            with memory.paused(), self.counters.job_group(f"{run_id}:recompute"):
                return recompute.on_state(plan.recompute, self.spark, reference.export(name), plan.spec, name, req.workers)

        reference = dynamic.Reference(stream, workdir, req.semantics)
        try:
            initial = recount("initial")
            initial.update(
                count=record.count,
                agrees=None if initial["oracle_count"] is None else initial["oracle_count"] == record.count,
            )
            assert record.count is not None  # counted before the batches
            count, entries, sizes = record.count, [], stream.sizes()
            for batch in stream.batches:
                seconds, outcome = self.timed(f"{run_id}:updates", lambda: impl.apply_updates(stream.batch(batch)), deadline)  # noqa: B023 (called at once)
                count += outcome.delta
                reference.apply(batch)
                check = recount(f"batch-{batch}")
                entries.append(
                    dynamic.batch_entry(batch, sizes[batch], seconds, outcome, count, check, recompute_state(f"batch-{batch}"))
                )
        finally:
            reference.close()
        check = dynamic.summary(initial, entries)
        total_s = sum(e["seconds"] for e in entries)
        recounts = [e["recompute_agrees"] for e in entries if "recompute_agrees" in e]
        record.count, record.initial, record.batches, record.checks, record.oracle = count, initial, entries, [check], check
        record.verified = check["status"] == "ok" and bool(check["agrees"])
        record.agreement = recompute.agreement(plan.recompute.name, recounts) if plan.recompute and recounts else None
        metrics.update(
            batches=len(entries),
            updates_s=round(total_s, 4),
            updates_per_s=round(sum(e["updates"] for e in entries) / total_s, 1) if total_s else None,
            output_changes_per_s=round(sum(e["output_changes"] for e in entries) / total_s, 1) if total_s else None,
            stream=stream.source,
        )

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
        hit = self._join(thread, deadline)
        if thread.is_alive() or hit is not None:
            timed_out_s = time.perf_counter() - start
            self.counters.cancel(group)
            if cancelled is not None:
                cancelled.set()
            thread.join(60)
            still = "; its work is still running" if thread.is_alive() else ""
            if hit is not None:
                assert self._capped is not None
                raise MemoryCapExceeded(f"{hit.describe(self._capped.cap)} in {group.rsplit(':', 1)[1]}{still}")
            raise RunTimeout(f"timed out after {timed_out_s:.1f} s in {group.rsplit(':', 1)[1]}{still}")
        if "error" in box:
            exc = box["error"]
            if isinstance(exc, HarnessError):
                raise exc
            raise ExecutionError(f"{type(exc).__name__}: {_first_line(exc)}") from exc
        return time.perf_counter() - start, box.get("value")

    def _join(self, thread: threading.Thread, deadline: float | None):
        """Wait for thread until the deadline; capped, stop early at a worker's first kill (its CapHit)."""
        if self._capped is not None:
            return self._capped.watch(thread, deadline)
        thread.join(None if deadline is None else max(0.0, deadline - time.perf_counter()))
        return None


def graphalytics_times(metrics: dict) -> dict:
    """The run's times as LDBC Graphalytics names them, in seconds. `load_time`: the graph's load (a
    graph an earlier run of the session loaded reports that load, which this run did not wait for);
    `makespan`: what this run waited for from the start of the Spark session it needed (zero once the
    session is up: a later run counts from its own start) to its answer, load, index and query
    included; `processing_time`: index + query (null when the run stopped before its answer)."""
    index_s, query_s = metrics.get("index_s"), metrics.get("query_s")
    return {
        "load_time": metrics.get("load_s"),
        "makespan": round(metrics.get("session_start_s", 0.0) + metrics["wall_s"], 4),
        "processing_time": None if index_s is None or query_s is None else round(index_s + query_s, 4),
    }


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
        out[phase] = {
            "wall_s": wall,
            "critical_path_s": round(spark["slowest_tasks_s"], 4),
            "scheduling_s": round(max(0.0, wall - spark["slowest_tasks_s"]), 4),
            **{k: v for k, v in spark.items() if k != "slowest_tasks_s"},
        }
    if "query" in out and python_task_s:
        out["query"]["python_task_s"] = python_task_s
    return out


def _maintainers() -> str:
    """Which registered implementations do maintain counts, for the error that says one does not."""
    from implementations import REGISTRY

    names = [name for name, cls in REGISTRY.items() if cls.maintains_updates]
    return f"{', '.join(names)} {'does' if len(names) == 1 else 'do'}"


_WORKER_RAISED = "An exception was thrown from the Python worker"
_LOST_TASK = re.compile(r"most recent failure: Lost task [^)]*\)[^:]*: (.*)")


def lost_to_a_heap(metrics: dict) -> bool:
    """Whether Spark lost an executor to an OutOfMemoryError (its exit code 52, SparkExitCode.OOM): a
    failure that reaches the driver as another exception (a collect's socket, a lost stage) is MEM."""
    return any(reason.endswith("exited with code 52") for reason in metrics.get("executors_lost") or [])


def _first_line(exc: BaseException) -> str:
    """What went wrong, in one line: for a failed Spark task, the Python worker's exception or the JVM's
    cause, not py4j's "An error occurred while calling o137.collectToPython"."""
    lines = [line for line in str(exc).strip().splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    if lines[0].startswith(_WORKER_RAISED):  # pyspark's PythonException: the worker's traceback follows
        return f"Python worker: {lines[-1].strip()[:300]}"
    cause = next((line[2:] for line in lines[1:] if line.startswith(": ")), None)  # py4j: the JVM's exception
    if cause is None:
        return lines[0][:300]
    lost = _LOST_TASK.search(cause)  # Spark's "Job aborted ...: Lost task 1.0 in stage 0.0 (...): <why>"
    return (lost.group(1) if lost else cause).strip()[:300]
