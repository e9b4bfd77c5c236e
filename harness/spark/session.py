"""The one Spark session factory. Embedded local[*] by default; SPARK_MASTER or --master for a cluster."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Collection
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from harness.core import check_java, store
from harness.core.errors import DataError, ExecutionError
from harness.spark import history, jvm_archive, kernel_cache

_LOG4J = Path(__file__).with_name("log4j2.properties")
_session = None
EXECUTOR_JAVA_OPTIONS = "spark.executor.extraJavaOptions"
QUICK_JIT = "HARNESS_JVM_QUICK"  # "1": the driver and executors compile with C1 alone (tests/conftest.py sets it)
DRIVER_WARM = threading.Event()  # set when a session's driver has warmed its kernels (harness.spark.capped_cluster)
# What the JVM prints to stderr as it starts, which says nothing about a run: Java's warning for the
# incubator module Spark's launcher adds (jdk.incubator.vector) and Spark's notice of a shell's log level.
STARTUP_CHATTER = (
    b"WARNING: Using incubator modules:",
    b'Setting default log level to "',
    b"To adjust logging level use sc.setLogLevel(",
)
_verbose = False  # --verbose: the chatter too
_reported: list[bytes] = []  # lines the harness says in its own words (`quiet`), dropped unless --verbose


def quiet(fragment: bytes) -> None:
    """Drop the JVM's lines containing `fragment` unless --verbose: the harness reports that event itself."""
    if fragment not in _reported:
        _reported.append(fragment)


def set_verbose(verbose: bool) -> None:
    """Let the JVM's start-up chatter through to stderr (run and bench --verbose); dropped otherwise."""
    global _verbose
    _verbose = verbose


def resolve_master(master: str | None = None) -> str:
    return master or os.environ.get("SPARK_MASTER") or "local[*]"


def jit() -> str:
    """The driver's and executors' JIT, as a run records it. C1 alone under HARNESS_JVM_QUICK=1: a JVM
    that lives seconds, as a test's does, spent about a third of its CPU in C2 (a clique4 run on
    rmat-small: 32 s of CPU, 21.5 s with C1 alone); a measured run keeps the JVM's default."""
    return "C1 only (HARNESS_JVM_QUICK=1)" if _quick_jit() else "tiered (C1 and C2)"


def _quick_jit() -> bool:
    return os.environ.get(QUICK_JIT) == "1"


def is_local(master: str) -> bool:
    return master.startswith("local")


def on_loopback(master: str) -> bool:
    """local[*], or a cluster whose master listens on this machine's loopback (`make cluster-up`)."""
    return is_local(master) or master.split("://", 1)[-1].split(":", 1)[0] in ("127.0.0.1", "localhost")


def get_session(
    master: str | None = None,
    workers: int = 2,
    executor_conf: dict[str, str] | None = None,
    kernels: Collection[str] | None = None,
):
    """Create (once) and return the process-wide SparkSession.

    `workers` is the number of logical workers: the partition count of every exchange. It can be
    changed later per run with `set_workers` because it is a runtime SQL setting. `executor_conf`
    overrides the executors' settings (a memory cap's, memory_cap.executor_conf). `kernels`: the kernel
    families (implementations.warm.FAMILIES) the session warms before it returns; None, all of them.
    """
    global _session
    if _session is not None:
        set_workers(_session, workers)
        return _session
    msg = check_java.problem()
    if msg:
        raise ExecutionError(msg)
    master = resolve_master(master)
    store.require_for(master)
    if on_loopback(master):
        # Bind the driver, block manager and UI to loopback (the UI reads SPARK_LOCAL_IP).
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Python workers use this interpreter (and its packages) unless the user says otherwise.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from implementations.warm import FAMILIES

    families = frozenset(FAMILIES if kernels is None else kernels)
    probe = None if is_local(master) else _store_probe()
    try:
        _session = _start(_builder(master, workers, families, probe, executor_conf), workers, families, probe)
    finally:
        if probe is not None:
            probe.unlink(missing_ok=True)
    return _session


def _builder(master: str, workers: int, families: frozenset[str], probe: Path | None, executor_conf: dict[str, str] | None):
    """The session's settings."""
    from pyspark.sql import SparkSession

    from implementations.warm import FAMILIES_SETTING

    scratch = Path(os.environ.get("HARNESS_SPARK_TMP", Path(tempfile.gettempdir()) / "harness-spark"))
    scratch.mkdir(parents=True, exist_ok=True)
    java_opts = f"-Dlog4j2.configurationFile=file:{_LOG4J}" + (" -XX:TieredStopAtLevel=1" if _quick_jit() else "")
    executor_java_opts = java_opts + (jvm_archive.mapped_options() if on_loopback(master) else "")
    builder = (
        SparkSession.builder.master(master)
        .appName("subgraph-harness")
        .config("spark.driver.memory", os.environ.get("HARNESS_DRIVER_MEMORY", "8g"))
        .config("spark.driver.extraJavaOptions", java_opts + jvm_archive.driver_options())
        # local-gj and the index builders collect the edges (LiveJournal: more than Spark's default 1g).
        .config("spark.driver.maxResultSize", os.environ.get("HARNESS_MAX_RESULT_SIZE", "6g"))
        .config(EXECUTOR_JAVA_OPTIONS, executor_java_opts)
        .config("spark.ui.enabled", "true")
        .config("spark.ui.port", os.environ.get("HARNESS_UI_PORT", "4040"))
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.ui.retainedJobs", "20000")  # a dynamic run's recounts run thousands of stages
        .config("spark.ui.retainedStages", "50000")
        .config("spark.ui.retainedTasks", "500000")
        .config("spark.local.dir", str(scratch))
        .config("spark.sql.warehouse.dir", str(scratch / "warehouse"))
        # Measured exchanges must be real shuffles with exactly `workers` partitions:
        # no broadcast joins and no adaptive re-partitioning.
        .config("spark.sql.autoBroadcastJoinThreshold", "-1")
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.sql.shuffle.partitions", str(workers))
        .config("spark.default.parallelism", str(workers))
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        # Cached edge ids are random longs that Spark's column encoders do not shrink (1,040 MiB either way for
        # the LiveJournal twin), and trying them took 28 s of a 69M-edge load against 10 s without.
        .config("spark.sql.inMemoryColumnarStorage.compressed", "false")
        # Poll executor memory so stage peaks include hash-join build sides, which task metrics miss.
        .config("spark.executor.metrics.pollingInterval", "100ms")
        .config("spark.executor.heartbeatInterval", "2s")
        # Include the Python workers' resident memory in the executor peaks.
        .config("spark.executor.processTreeMetrics.enabled", "true")
    )
    for key, value in history.session_config().items():  # the event log `make history` serves
        builder = builder.config(key, value)
    if on_loopback(master):
        # This machine's Python workers run this checkout's code (a worktree's too).
        builder = (
            builder.config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.executorEnv.PYTHONPATH", str(Path(__file__).resolve().parents[2]))
        )
    if on_loopback(master):
        # Through its daemon, which warms every kernel before it forks a worker and keeps the
        # tracebacks of cancelled tasks (a timed-out run) off the terminal; over Unix domain sockets,
        # which spare each task's small messages TCP's delayed acknowledgements.
        builder = builder.config("spark.python.daemon.module", "harness.spark.daemon").config(
            "spark.python.unix.domain.socket.enabled", "true"
        )
    if probe is not None:  # a cluster
        # Compiled kernels are cached in the store, so one host's compilation serves every host.
        numba_cache = os.environ.get("HARNESS_NUMBA_CACHE", str(store.root() / "numba-cache"))
        builder = (
            builder.config("spark.executor.memory", os.environ.get("HARNESS_EXECUTOR_MEMORY", "2g"))
            .config("spark.executorEnv.NUMBA_CACHE_DIR", numba_cache)
            .config("spark.executorEnv.HARNESS_STORE", str(store.root()))
            .config(f"spark.executorEnv.{store.PROBE_SETTING}", str(probe))
        )
    builder = builder.config(f"spark.executorEnv.{FAMILIES_SETTING}", ",".join(sorted(families)))
    for key, value in (executor_conf or {}).items():
        if key == EXECUTOR_JAVA_OPTIONS:  # added to the session's own (its log settings and the archive)
            value = f"{executor_java_opts} {value}"
        builder = builder.config(key, value)
    return builder


def _start(builder, workers: int, families: frozenset[str], probe: Path | None):
    """The session, started: every kernel of `families` warm in the driver and its Python workers, and
    on a cluster (a `probe`, None in local mode), every executor seeing the store's `probe`.

    The driver's kernels compile (or load) while the JVM starts. A local daemon shares the driver's
    cache and warms the families in the other order (warm.warm_up) beside the driver's dataflow
    warm-up, so on a cold cache each compiles what the other has not reached. A cluster's workers start
    after, once their cache in the store holds what the driver compiled (kernel_cache.seed). A JVM
    archive being written (jvm_archive) is done before the session is returned."""
    from implementations.warm import freeze_what_warming_left

    session = None
    with ThreadPoolExecutor(2, thread_name_prefix="warm-up") as pool:
        warming = pool.submit(_warm_driver, families)
        try:
            _launch_jvm(builder)
            session = builder.getOrCreate()
            session.sparkContext.setLogLevel("ERROR")
            local_workers = pool.submit(_start_python_workers, session, workers, None) if probe is None else None
            warming.result()  # re-raises what the warm-up raised
            _warm_dataflow(families)
            freeze_what_warming_left()
            jvm_archive.finish()
            DRIVER_WARM.set()
            if local_workers is not None:
                local_workers.result()
            if probe is not None:
                executors_cache = session.sparkContext.getConf().get("spark.executorEnv.NUMBA_CACHE_DIR", "")
                if executors_cache:
                    kernel_cache.seed(Path(executors_cache))  # what the driver compiled, no executor compiles again
                _start_python_workers(session, workers, probe)
        except BaseException:
            jvm_archive.finish(wait=False)
            if session is not None:
                session.stop()
            raise
    return session


def _store_probe() -> Path:
    """A file in the store for this session's executors to look for: a host that does not see it does
    not see the store (spark_daemon then compiles nothing, and the session ends with DataError)."""
    probe = store.root() / "scratch" / f".probe-{uuid.uuid4().hex}"
    probe.parent.mkdir(parents=True, exist_ok=True)
    probe.touch()
    return probe


def _launch_jvm(builder) -> None:
    """Launch Spark's JVM with the builder's settings, as getOrCreate would, but with its stderr through
    `_pass_stderr`, which drops the start-up chatter (as the harness's daemon drops cancelled tasks'
    tracebacks), and start the process's first context on it. A later session reuses that JVM."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None:
        return
    conf = SparkConf().setAll(builder._options.items())  # what getOrCreate passes to spark-submit
    gateway = launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})
    threading.Thread(target=_pass_stderr, args=(gateway.proc.stderr,), name="jvm-stderr", daemon=True).start()
    SparkContext(conf=conf, gateway=gateway)  # getOrCreate then builds the session on it


def _pass_stderr(stream) -> None:
    """Copy the JVM's stderr (the executors' Python workers' too) to ours line by line, less its start-up
    chatter unless --verbose."""
    with contextlib.suppress(OSError, ValueError):  # our stderr closed: the process is ending
        for line in iter(stream.readline, b""):
            if _verbose or not (line.startswith(STARTUP_CHATTER) or any(f in line for f in _reported)):
                os.write(2, line)


def _warm_driver(families: frozenset[str]) -> None:
    """The kernels the driver runs (local-gj); not `warm.warm_up`, whose redirect of stdout would take
    the whole process's while the session starts, and whose one-level engine runs only in workers.
    Once per process (`warm.warm_families`), whatever sessions follow."""
    from implementations.warm import base_family, warm_families

    warm_families({f for f in families if base_family(f) == "local-gj"})


def _warm_dataflow(families: frozenset[str]) -> None:
    """The index build that the dataflow's warm-up exercises. After the context exists: its tasks run
    in process under a TaskContext, which a SparkContext being created would take for a worker's."""
    from implementations.warm import DATAFLOW, base_family, warm_families

    warm_families({f for f in families if base_family(f) in DATAFLOW})


def _import_worker_modules(probe: str | None):
    def start(iterator):
        import socket

        import pyarrow as pa

        from implementations.warm import warm_up

        for _ in iterator:
            pass
        if probe is not None and not os.path.exists(probe):  # the store is not the same directory here
            yield pa.RecordBatch.from_pydict({"host": [socket.gethostname() + " " + os.environ.get("SPARK_LOCAL_IP", "")]})
            return
        warm_up()  # the session's kernels: at once in a worker forked from this machine's warmed daemon; elsewhere here

    return start


def _start_python_workers(spark, workers: int, probe: Path | None) -> None:
    """Start the Python worker processes (and their imports) as part of session start-up, so the first
    measured job of a run does not pay for them; on a cluster, check that every executor sees the store's
    `probe`."""
    parallel = max(workers, spark.sparkContext.defaultParallelism)
    blind = (
        spark.range(0, parallel, 1, parallel)
        .mapInArrow(_import_worker_modules(None if probe is None else str(probe)), "host string")
        .collect()
    )
    if blind:
        raise DataError(
            f"{store.SETTING}={store.root()}: not visible from the executor on {blind[0].host.strip()}; "
            f"it must be one directory that every host mounts at the same path"
        )


def set_workers(spark, workers: int) -> None:
    spark.conf.set("spark.sql.shuffle.partitions", str(workers))


def stop_session() -> None:
    global _session
    if _session is not None:
        _session.stop()
        _session = None
