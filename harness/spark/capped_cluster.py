"""The workers a capped run runs on: W Spark standalone workers on this machine, one core each, each
with its executor and Python workers in a memory cgroup of the cap (memory_cap), started by the
harness when a run asks for `memory_per_worker` and stopped when it is done with them (or at exit).
They see the same files as the driver (the store included); what they do not share is memory."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from harness.core import store
from harness.core.errors import DataError, ExecutionError, MemoryCapExceeded
from harness.core.params import human
from harness.spark import cluster, memory_cap
from harness.spark import session as spark_factory

START_S = 180.0  # a session on capped workers that has not started by then will not
REPEATED = " (as these workers last started; not started again)"
# What the JVMs print when the kernel kills an executor (its exit code, and the driver's requests to it
# that the closed connection dropped), which the run reports as MEM, with the worker and the process.
KILL_ECHOES = (b"Command exited with code 137", b"TransportResponseHandler: Still have", b"TransportClient: Failed to send RPC")
POLL_S = 0.25  # how often a capped run looks for a worker's kill and samples its resident memory


@dataclass
class CapHit:
    """Why a run stopped: the worker whose cgroup killed a process, and which processes went."""

    worker: int
    killed: list[str]

    def describe(self, cap: int) -> str:
        what = ", ".join(self.killed) or "a process"
        return f"worker {self.worker} exceeded its memory cap of {human(cap)}: the kernel killed {what}"


def attached(master: str, cap: int) -> CappedWorkers:
    """The capped workers of the cluster `cluster up --memory-per-worker` started at `master`."""
    state = cluster.load(cluster.state_dir())
    if state is None or state.url != master:
        raise DataError(
            f"memory_per_worker: {master} is not a cluster this harness started with `cluster up "
            f"--memory-per-worker`; elsewhere the cluster manager gives executors their memory"
        )
    if state.cap_bytes != cap:
        have = human(state.cap_bytes) if state.cap_bytes else "nothing"
        raise DataError(f"memory_per_worker: the cluster at {master} caps its workers at {have}, not {human(cap)}")
    return CappedWorkers(cap, len(state.worker_pids), handle=state, owned=False)


@dataclass
class CappedWorkers:
    cap: int
    workers: int
    handle: cluster.Cluster | None = None
    owned: bool = True  # started for these runs (and stopped after them), not a cluster the user started
    _kills: list[int] = field(default_factory=list)
    _members: list[dict[int, str]] = field(default_factory=list)
    start_hit: CapHit | None = None  # the kill that stopped the session's start, if one did
    start_repeated: bool = False  # a run that found start_hit and so did not start the workers again
    _last_peaks: list[int] = field(default_factory=list)
    _resident: list[int] = field(default_factory=list)  # each worker's largest resident sample since `begin`
    idle: list[int] = field(default_factory=list)  # each worker's resident bytes when the run began
    _jvm_idle: list[int] = field(default_factory=list)  # each worker's executor JVM's resident bytes then
    _jvms: list[list[psutil.Process]] = field(default_factory=list)  # each worker's executor JVM, sampled
    _jvm_peak: list[int] = field(default_factory=list)  # each worker's executor JVM's largest resident sample

    def session(self, kernels: frozenset[str] | None = None):
        """Start the workers and a Spark session on them, warming the kernel families `kernels` (None:
        every family, for a session that serves runs to come). A kill while it starts is MEM; a session
        not started in START_S (executors that cannot launch) is EXE, not a hang. Workers killed as they
        started are not started again for the next run at this cap and W: theirs is the same start."""
        if self.start_hit is not None and self.handle is None:
            self.start_repeated = True
            raise MemoryCapExceeded(f"{self.start_hit.describe(self.cap)} in start-up{REPEATED}")
        url = self.start()
        for echo in KILL_ECHOES:  # the kernel's kill: the run says MEM and names it
            spark_factory.quiet(echo)
        os.environ.setdefault(store.SETTING, str(store.root()))  # the workers see the driver's store
        box: dict = {}

        def open_session():
            try:
                box["spark"] = spark_factory.get_session(url, self.workers, self.executor_conf(), kernels)
            except BaseException as exc:  # re-raised below, in the caller's thread
                box["error"] = exc

        spark_factory.DRIVER_WARM.clear()
        thread = threading.Thread(target=open_session, daemon=True)
        thread.start()
        # START_S is the workers' start: the driver compiling its kernels first (a fresh clone's cold
        # cache, minutes on a busy machine) is not counted in it.
        hit = self.watch(thread, None, until=spark_factory.DRIVER_WARM.is_set)
        if hit is None:
            hit = self.watch(thread, time.perf_counter() + START_S)
        if thread.is_alive() or hit is not None:
            logs = self.handle.directory if self.handle else "?"
            self.stop()  # its executors gone, the start-up job fails and the thread ends
            _cancel_jobs()
            thread.join(60)
            spark_factory.stop_session()
            if hit is not None:
                self.start_hit = hit
                raise MemoryCapExceeded(f"{hit.describe(self.cap)} in start-up")
            raise ExecutionError(f"capped workers: no Spark session after {START_S:.0f} s; executor logs under {logs}/work")
        if "error" in box:
            raise box["error"]
        return box["spark"]

    @property
    def key(self) -> tuple:
        """What a run's cap asks for: the same key, the same workers."""
        return (self.cap, self.workers) if self.owned else (self.cap, self.handle.url if self.handle else None)

    def start(self) -> str:
        """Start the workers (a cluster the user started: already running); returns the master's URL."""
        if self.handle is not None:  # a cluster the user started, or these workers again (a fresh session)
            self.begin()
            return self.handle.url
        directory = store.new_scratch("capped-workers")
        self.handle = cluster.up(
            directory,
            workers=self.workers,
            cores=1,
            port=cluster.free_port(),
            webui_port=cluster.free_block(self.workers + 1),
            cap_bytes=self.cap,
        )
        atexit.register(self.stop)
        if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so that atexit stops the workers
        self.begin()  # a kill while the session starts is the first run's
        return self.handle.url

    def executor_conf(self) -> dict[str, str]:
        if not self.owned:  # a cluster the user started (its hosts may be isolated): the store's cache, as any cluster's
            return memory_cap.executor_conf(self.cap)
        # Workers this started share the driver's machine: they load the kernels this checkout compiled.
        return {**memory_cap.executor_conf(self.cap), "spark.executorEnv.NUMBA_CACHE_DIR": os.environ.get("NUMBA_CACHE_DIR", "")}

    def begin(self) -> None:
        """A run starts: without the Python workers the last run left, counting kills from now, each
        worker's peak restarted."""
        self.start_hit = None
        groups = self.handle.caps() if self.handle else []
        for g in groups:
            _stop_idle_python_workers(g.pids())
        members = [g.pids() for g in groups]  # once the idle Python workers are gone
        self._kills = [g.oom_kills() for g in groups]
        self._members = [self._named(pids) for pids in members]
        self.idle = [g.resident() for g in groups]
        self._jvms = [_jvm_processes(pids) for pids in members]
        self._jvm_idle = [_rss(jvms) for jvms in self._jvms]
        self._jvm_peak = list(self._jvm_idle)
        self._resident = list(self.idle)
        for g in groups:
            g.reset_peak()

    def hit(self) -> CapHit | None:
        """The first worker whose cgroup has killed a process since `begin`, if any."""
        for i, group in enumerate(self.handle.caps() if self.handle else []):
            now, kills = set(group.pids()), group.oom_kills() - self._kills[i]
            if kills > 0:
                logged = [f"{_role(task)} (pid {pid})" for task, pid in memory_cap.logged_kills(group, kills)]
                gone = sorted({name for pid, name in self._members[i].items() if pid not in now})
                return CapHit(i, logged or gone)
            self._members[i] = {pid: self._members[i].get(pid) or self._named([pid])[pid] for pid in now}
        return None

    def watch(self, thread: threading.Thread, deadline: float | None, until: Callable[[], bool] | None = None) -> CapHit | None:
        """Wait for `thread` until `deadline` (perf_counter seconds) or `until()`; a worker's first kill
        ends the wait."""
        while thread.is_alive() and (deadline is None or time.perf_counter() < deadline) and not (until and until()):
            self.sample()
            hit = self.hit()
            if hit is not None:
                return hit
            thread.join(POLL_S if deadline is None else min(POLL_S, max(0.0, deadline - time.perf_counter())))
        return None

    def sample(self) -> None:
        groups = self.handle.caps() if self.handle else []
        if len(self._resident) == len(groups):
            self._resident = [max(seen, g.resident()) for seen, g in zip(self._resident, groups)]
            self._jvm_peak = [max(seen, _rss(jvms)) for seen, jvms in zip(self._jvm_peak, self._jvms)]

    def executor_growth(self) -> int:
        """The most any worker's executor JVM has grown since `begin`, in resident bytes (the JVMs `begin`
        found, as `sample` reads them)."""
        return max((_rss(jvms) - idle for jvms, idle in zip(self._jvms, self._jvm_idle)), default=0)

    def executor_growth_peaks(self) -> list[int]:
        """Each worker's executor JVM: its largest resident sample since `begin` less its size then (heap
        grown by shuffles and caches, which the JVM keeps; a JVM started after `begin` is not sampled)."""
        self.sample()
        return [peak - idle for peak, idle in zip(self._jvm_peak, self._jvm_idle)]

    def resident_peaks(self) -> list[int]:
        """Each worker's largest resident sample (every POLL_S) since `begin`: a sampled peak, so a
        spike shorter than POLL_S can be missed; the charged peak (`peaks`) cannot miss one."""
        self.sample()
        return list(self._resident)

    def peaks(self) -> list[int]:
        """Each worker's peak charged bytes since `begin` (as they were when stopped, once stopped)."""
        return [g.peak() for g in self.handle.caps()] if self.handle else self._last_peaks

    @staticmethod
    def _named(pids: list[int]) -> dict[int, str]:
        names = {}
        for pid in pids:
            try:
                name = psutil.Process(pid).name()
            except psutil.Error:
                name = "a process"
            names[pid] = _role(name)
        return names

    def stop(self) -> None:
        """Stop the workers this started (a cluster the user started stays up)."""
        if self.handle is None:
            return
        self._last_peaks = self.peaks()
        if self.owned:
            cluster.down(Path(self.handle.directory))
            shutil.rmtree(self.handle.directory, ignore_errors=True)
            self.handle = None


def _stop_idle_python_workers(pids: list[int]) -> None:
    """Stop the Python workers the last run left idle (Spark reuses them, and each keeps the heap its
    tasks grew, so the next run would start on it); their daemon stays and forks fresh ones."""
    workers = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            process = psutil.Process(pid)
            parent = process.parent()
            if process.name().startswith("python") and parent is not None and parent.name().startswith("python"):
                workers.append(process)
    for process in workers:
        with contextlib.suppress(psutil.Error):
            process.terminate()
    psutil.wait_procs(workers, timeout=5)


def _jvm_processes(pids: list[int]) -> list[psutil.Process]:
    """The executor JVM among `pids` (a worker's cgroup holds one, and its Python workers)."""
    found = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            process = psutil.Process(pid)
            if process.name() == "java":
                found.append(process)
    return found


def _rss(processes: list[psutil.Process]) -> int:
    total = 0
    for process in processes:
        with contextlib.suppress(psutil.Error):
            total += process.memory_info().rss
    return total


def _role(command: str) -> str:
    return "the executor JVM" if command == "java" else "a Python worker" if command.startswith("python") else command


def _cancel_jobs() -> None:
    """Cancel whatever the session being started is waiting for (its workers are gone)."""
    from pyspark import SparkContext

    sc = SparkContext._active_spark_context  # the session factory has not returned it yet
    if sc is not None:
        sc.cancelAllJobs()
