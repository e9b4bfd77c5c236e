"""Where a command's CPU goes: `python -m harness.bench.cpu_roles OUT.json -- COMMAND...` runs COMMAND,
samples /proc every second and writes the CPU seconds (utime + stime) of every process it saw, by role
(driver JVM, executor JVM, Python worker, pytest...), with the command's wall time. Linux only. A process
that ends between two samples loses at most its last second; processes already running when it starts
are counted from then on. This is how results/profiles/ci-jit-20261207.md was measured."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

ROLES = (  # the first fragment of the command line that matches names the role
    ("CoarseGrainedExecutorBackend", "executor-jvm"),
    ("deploy.master.Master", "master-jvm"),
    ("deploy.worker.Worker", "worker-jvm"),
    ("HistoryServer", "history-jvm"),
    ("SparkSubmit", "driver-jvm"),
    ("pyspark.daemon", "python-daemon"),
    ("harness.spark.daemon", "python-daemon"),
    ("pyspark.worker", "python-worker"),
    ("pytest", "pytest"),
    ("-m harness", "harness-cli"),
    ("java", "other-jvm"),
    ("python", "other-python"),
)
TICK = os.sysconf("SC_CLK_TCK")


def role(command: str) -> str:
    return next((name for fragment, name in ROLES if fragment in command), "other")


def _cpu_and_start(pid: str) -> tuple[float, str]:
    with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK, fields[19]


def sample(last: dict, roles: dict, totals: dict) -> None:
    """Add every process's CPU since the last sample to its role's total."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) == os.getpid():
            continue
        try:
            cpu, started = _cpu_and_start(pid)
            key = (pid, started)  # a recycled pid is another process
            if key not in roles:
                command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                roles[key] = role(command)
            totals[roles[key]] += cpu - last.get(key, 0.0)  # a new process: all of its CPU
            last[key] = cpu
        except (OSError, ValueError, IndexError):  # it ended while being read
            continue


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m harness.bench.cpu_roles OUT.json -- COMMAND...", file=sys.stderr)
        return 2
    out, command = Path(argv[0]), argv[2:]
    last: dict = {}
    roles: dict = {}
    totals: dict = defaultdict(float)
    sample(last, roles, totals)  # what runs already: counted from here on
    totals.clear()
    started = time.monotonic()
    proc = subprocess.Popen(command)
    while proc.poll() is None:
        time.sleep(1)
        sample(last, roles, totals)
    wall = time.monotonic() - started
    by_role = dict(sorted(((r, round(v, 1)) for r, v in totals.items() if v >= 0.05), key=lambda kv: -kv[1]))
    out.write_text(
        json.dumps({"command": command, "exit": proc.returncode, "wall_s": round(wall, 1), "cpu_s": by_role}, indent=1)
    )
    print(f"cpu_roles: {wall:.0f} s wall, {sum(by_role.values()):.0f} CPU s: {by_role}", file=sys.stderr)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
