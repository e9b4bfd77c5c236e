"""A memory cap per worker, enforced (issue 39). Each capped worker is a Spark standalone worker whose
executor JVM, and every Python worker that executor starts, run in a memory cgroup of their own
limited to the cap, with no swap: whatever the process tree holds resident (JVM heap and off-heap,
Python workers, the page cache their reads and writes charge) is bounded by the kernel, which kills a
process of the tree when the tree would exceed it. Spark's settings bound the parts Spark knows of:
the executor's heap (spark.executor.memory, `HEAP_SHARE` of the cap) fails with an OutOfMemoryError
before the cgroup does when the heap is what grows. spark.executor.pyspark.memory is not used: it sets
RLIMIT_AS, which counts address space (memory-mapped index files, the JIT's reservations), not memory.

The executor joins its cgroup before it starts: the worker launches it through `JAVA_HOME/bin/java`,
and each capped worker's JAVA_HOME is a wrapper whose `java` moves an executor's process into the
worker's cgroup and then execs the real Java. Needs a writable memory cgroup (v1 or v2; root)."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from harness.core import check_java
from harness.core.errors import DataError
from harness.core.params import parse_size

V1_ROOT = Path("/sys/fs/cgroup/memory")
V2_ROOT = Path("/sys/fs/cgroup")
HEAP_SHARE = 0.4  # of the cap, the executor's heap; the rest is the JVM's off-heap and the Python workers
MIN_HEAP = 128 << 20
# Spark keeps 300 MiB of the heap for itself and refuses a heap under 1.5 times that (its usable heap,
# less than -Xmx by a survivor space), which would put every cap under 1.3 GiB below its heap's floor;
# a capped executor keeps a quarter of its heap instead.
RESERVED_SHARE = 0.25
MIN_CAP = 256 << 20  # below the heap's floor the cgroup alone bounds the executor (it will not start)


def _own_cgroup(version: int) -> str:
    """This process's cgroup path in the memory hierarchy (v1) or the unified one (v2)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        number, controllers, path = line.split(":", 2)
        if (version == 1 and "memory" in controllers.split(",")) or (version == 2 and number == "0"):
            return path.lstrip("/")
    return ""


def _parent() -> tuple[Path, int] | None:
    """(directory new cgroups go in, cgroup version), if this process may create limited ones there."""
    candidates = []
    if (V1_ROOT / "memory.limit_in_bytes").exists():
        candidates += [(V1_ROOT / _own_cgroup(1), 1), (V1_ROOT, 1)]
    if (V2_ROOT / "cgroup.controllers").exists():
        own = V2_ROOT / _own_cgroup(2)
        candidates += [(own.parent if own != V2_ROOT else own, 2)]
    for directory, version in candidates:
        if version == 2 and "memory" not in (directory / "cgroup.subtree_control").read_text().split():
            continue
        if os.access(directory, os.W_OK):
            return directory, version
    return None


def problem() -> str | None:
    """Why a cap cannot be enforced here, in one line; None if it can."""
    if _parent() is None:
        return (
            "--memory-per-worker: no writable memory cgroup here (it needs root and /sys/fs/cgroup/memory or "
            "cgroup v2 with the memory controller); run without a cap, or as root"
        )
    return None


@dataclass
class Cgroup:
    """One capped worker's memory cgroup."""

    path: str
    version: int

    @classmethod
    def create(cls, name: str, limit: int) -> Cgroup:
        parent = _parent()
        if parent is None:
            raise RuntimeError(problem())
        directory, version = parent
        group = cls(str(directory / name), version)
        Path(group.path).mkdir(exist_ok=True)
        if version == 1:
            group._write("memory.limit_in_bytes", limit)
            with contextlib.suppress(OSError):  # absent without swap accounting: no swap to limit then
                group._write("memory.memsw.limit_in_bytes", limit)
        else:
            group._write("memory.max", limit)
            with contextlib.suppress(OSError):
                group._write("memory.swap.max", 0)
        return group

    @classmethod
    def at(cls, path: str) -> Cgroup:
        return cls(path, 1 if Path(path).is_relative_to(V1_ROOT) else 2)

    def _write(self, name: str, value) -> None:
        Path(self.path, name).write_text(str(value))

    def _fields(self, name: str) -> dict[str, int]:
        try:
            lines = Path(self.path, name).read_text().splitlines()
        except OSError:
            return {}
        return {k: int(v) for k, v in (line.split() for line in lines if len(line.split()) == 2)}

    def oom_kills(self) -> int:
        """Processes the kernel has killed for this cgroup's limit (v1's failcnt counts hits, not kills)."""
        return self._fields("memory.oom_control" if self.version == 1 else "memory.events").get("oom_kill", 0)

    def peak(self) -> int:
        """Bytes charged at most since the last `reset_peak` (v2 before Linux 5.19: the current usage)."""
        for name in ("memory.max_usage_in_bytes", "memory.peak", "memory.current"):
            with contextlib.suppress(OSError, ValueError):
                return int(Path(self.path, name).read_text().split()[0])
        return 0

    def resident(self) -> int:
        """Bytes the processes hold now: anonymous memory plus mapped files (the index), not the page
        cache of files they read once, which the kernel reclaims before it kills."""
        stat = self._fields("memory.stat")
        if self.version == 1:
            return stat.get("total_rss", 0) + stat.get("total_mapped_file", 0)
        return stat.get("anon", 0) + stat.get("file_mapped", 0)

    def reset_peak(self) -> None:
        with contextlib.suppress(OSError):
            self._write("memory.max_usage_in_bytes" if self.version == 1 else "memory.peak", 0)

    def pids(self) -> list[int]:
        with contextlib.suppress(OSError):
            return [int(p) for p in Path(self.path, "cgroup.procs").read_text().split()]
        return []

    def remove(self, timeout_s: float = 10.0) -> None:
        """Remove the group once empty: a process the kernel just killed leaves it a moment later."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() > deadline:
                    return
                time.sleep(0.2)


def logged_kills(group: Cgroup, last: int) -> list[tuple[str, int]]:
    """(command, pid) of the last `last` processes the kernel log says it killed for `group`'s limit;
    empty where the log cannot be read."""
    try:
        log = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=10, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    found = re.findall(rf"task_memcg=\S*/{re.escape(Path(group.path).name)},task=([^,]+),pid=(\d+)", log)
    return [(task, int(pid)) for task, pid in found[-last:]] if last > 0 else []


def java_wrapper(directory: Path, group: Cgroup) -> Path:
    """A JAVA_HOME whose `bin/java` puts an executor's process into `group`, then runs the real Java."""
    real = check_java.java_binary()
    if real is None:
        raise RuntimeError(check_java.HOW_TO_INSTALL.format(min=check_java.MIN_JAVA))
    binary = directory / "bin" / "java"
    binary.parent.mkdir(parents=True, exist_ok=True)
    procs = shlex.quote(str(Path(group.path, "cgroup.procs")))
    binary.write_text(
        "#!/bin/sh\n"
        f'case "$*" in *CoarseGrainedExecutorBackend*) echo $$ > {procs} ;; esac\n'
        f'exec {shlex.quote(str(Path(real).resolve()))} "$@"\n'
    )
    binary.chmod(0o755)
    return directory


def parse_cap(text: str, key: str = "--memory-per-worker") -> int:
    cap = parse_size(text, key)
    if cap < MIN_CAP:
        raise DataError(f"{key}: {text} is below the smallest cap a Spark executor can start in ({MIN_CAP >> 20} MiB)")
    return cap


def heap_bytes(cap: int) -> int:
    """The executor heap (-Xmx) a worker capped at `cap` bytes gets (Spark's floor, even over the cap)."""
    return max(MIN_HEAP, int(cap * HEAP_SHARE)) >> 20 << 20


def executor_conf(cap: int) -> dict[str, str]:
    """Spark's settings for executors under a cap of `cap` bytes each."""
    heap = heap_bytes(cap)
    return {
        "spark.executor.memory": f"{heap >> 20}m",
        "spark.testing.reservedMemory": str(int(heap * RESERVED_SHARE)),
        # Netty's direct memory is as large as the heap and must exceed the largest block fetched into it
        # (200 MiB by default); a larger block is fetched to disk.
        "spark.network.maxRemoteBlockSizeFetchToMem": str(heap // 4),
        "spark.executor.cores": "1",
        # C1 only: C2's code cache and compiler arenas grew a capped executor by 20-30 MiB in a run, whatever
        # the run held (measured with -XX:NativeMemoryTracking=summary); times under a cap are not the point.
        "spark.executor.extraJavaOptions": "-XX:TieredStopAtLevel=1",  # after the session's own (harness.spark.session)
    }
