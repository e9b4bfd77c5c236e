"""Peak memory of this machine's processes inside one run's own time window, sampled by a thread:
the driver's Python process (where local-gj computes), the driver's JVM, the Python processes the
JVM started (in local mode, Spark's Python workers) and the machine's memory in use. Executors on
other machines are measured by Spark itself (metrics.SparkCounters: per-stage peaks).

Sampling misses short peaks, so for the driver's Python process and its JVM the kernel's own
high-water mark (VmHWM) is reset at the window's start (/proc/PID/clear_refs) and read with every
sample; `*_hwm` in the report says which processes were measured that way."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import NamedTuple

import psutil

INTERVAL_S = 0.1
# The run's own processes: the driver's Python, the driver's JVM and the JVM's Python workers (tables
# and the contest show these three).
PROCESS_FIELDS = ("driver_python_rss", "driver_jvm_rss", "jvm_child_python_rss")
FIELDS = (*PROCESS_FIELDS, "machine_used")


class ProcessPeak(NamedTuple):
    """One process's resident bytes at the window's start and at its peak, as a report holds them."""

    start_bytes: int | None
    peak_bytes: int | None


def _start_key(field: str) -> str:
    return f"{field}_start_bytes"


def _peak_key(field: str) -> str:
    return f"{field}_peak_bytes"


def process_peaks(report: dict) -> dict[str, ProcessPeak]:
    """A report's start and peak of each of the run's own processes (PROCESS_FIELDS), in that order."""
    return {k: ProcessPeak(report.get(_start_key(k)), report.get(_peak_key(k))) for k in PROCESS_FIELDS}


def _rss(proc: psutil.Process | None) -> int:
    try:
        return proc.memory_info().rss if proc is not None else 0
    except psutil.Error:
        return 0


def _children_rss(proc: psutil.Process | None) -> int:
    if proc is None:
        return 0
    try:
        children = proc.children(recursive=True)
    except psutil.Error:
        return 0
    return sum(_rss(c) for c in children)


def _reset_hwm(proc: psutil.Process | None) -> bool:
    """Restart the kernel's peak-RSS counter of proc (Linux 4.0+, own process or as root)."""
    if proc is None:
        return False
    try:
        with open(f"/proc/{proc.pid}/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _hwm(proc: psutil.Process | None) -> int:
    """The kernel's peak RSS of proc since its last reset, in bytes (0 when unreadable)."""
    if proc is None:
        return 0
    try:
        with open(f"/proc/{proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def jvm_process(spark) -> psutil.Process | None:
    """The driver's JVM, when this process launched it (pyspark's gateway)."""
    proc = getattr(getattr(spark.sparkContext, "_gateway", None), "proc", None)
    try:
        return psutil.Process(proc.pid) if proc is not None else None
    except psutil.Error:
        return None


class MemorySampler:
    """`with MemorySampler(spark) as m: ...` then `m.report()`: start and peak of every FIELDS value."""

    def __init__(self, spark, interval_s: float = INTERVAL_S):
        self.interval_s = interval_s
        self.me = psutil.Process()
        self.jvm = jvm_process(spark)
        self.start: dict[str, int] = {}
        self.peak: dict[str, int] = {}
        self.samples = 0
        self._stop = threading.Event()
        self._paused = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="memory-sampler")
        self._tracked = {"driver_python_rss": self.me, "driver_jvm_rss": self.jvm}  # read through VmHWM too
        self.hwm = dict.fromkeys(self._tracked, False)  # whose high-water mark could be reset

    def read(self) -> dict[str, int]:
        vm = psutil.virtual_memory()
        return {
            "driver_python_rss": _rss(self.me),
            "driver_jvm_rss": _rss(self.jvm),
            "jvm_child_python_rss": _children_rss(self.jvm),
            "machine_used": vm.total - vm.available,
        }

    def _take(self) -> None:
        now = self.read()
        for k, reset in self.hwm.items():
            if reset:
                now[k] = max(now[k], _hwm(self._tracked[k]))
        self.samples += 1
        for k, v in now.items():
            self.peak[k] = max(self.peak.get(k, 0), v)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            if not self._paused.is_set():
                self._take()

    @contextmanager
    def paused(self):
        """Leave work outside the run out of its peaks (a dynamic run's recounts)."""
        self._take()  # the high-water marks so far are in the peaks; restart them after the pause
        self._paused.set()
        try:
            yield
        finally:
            self.hwm = {k: reset and _reset_hwm(self._tracked[k]) for k, reset in self.hwm.items()}
            self._paused.clear()

    def __enter__(self) -> MemorySampler:
        self.hwm = {k: _reset_hwm(proc) for k, proc in self._tracked.items()}
        self.start = self.read()
        self.peak = dict(self.start)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._take()

    def report(self) -> dict:
        out = {
            "window": "index + query (and a dynamic run's update batches, not its recounts)",
            "sampled_every_s": self.interval_s,
            "samples": self.samples,
            "driver_jvm_sampled": self.jvm is not None,
            **{f"{k}_hwm": v for k, v in self.hwm.items()},
        }
        for k in FIELDS:
            out[_start_key(k)] = self.start.get(k)
            out[_peak_key(k)] = self.peak.get(k)
        return out
