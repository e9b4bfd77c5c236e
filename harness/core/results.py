"""Result records: provenance (git, machine), ids, what a run measures (`run_key`), and atomic JSON files."""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import socket
import subprocess
import tempfile
import uuid
from functools import lru_cache
from pathlib import Path
from typing import Protocol

SCHEMA_VERSION = 1
REPO = Path(__file__).resolve().parents[2]
RESULTS_DIR = REPO / "results"
STATUSES = ("OK", "UNVERIFIED", "VAL", "TIM", "MEM", "EXE", "DAT")


class Record(Protocol):
    """What the functions here read of a run's record (harness.bench.record.RunRecord, a layer above)."""

    @property
    def status(self) -> str | None: ...
    @property
    def allow_unverified(self) -> bool: ...
    @property
    def timeout_expected(self) -> bool: ...
    @property
    def mem_expected(self) -> bool: ...
    @property
    def implementation(self) -> str: ...
    @property
    def semantics(self) -> str: ...
    @property
    def query(self) -> dict: ...
    @property
    def dataset(self) -> dict: ...
    @property
    def params(self) -> dict: ...


def passes(record: Record) -> bool:
    """Whether a run lets `run`/`bench` exit 0: OK; UNVERIFIED only where the user allowed it
    (allow_unverified); TIM or MEM only where the workload declared it expected."""
    status = record.status
    return status == "OK" or (status == "UNVERIFIED" and record.allow_unverified) or expected_failure(record)


def expected_failure(record: Record) -> bool:
    """A TIM or a MEM the workload declared an expected result of this run."""
    status = record.status
    return (status == "TIM" and record.timeout_expected) or (status == "MEM" and record.mem_expected)


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def new_run_id() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:6]


@lru_cache(maxsize=1)
def git_info() -> dict:
    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--", ".", ":(exclude)results")
    return {"commit": commit, "dirty": bool(status) if status is not None else None}


@lru_cache(maxsize=1)
def machine_info() -> dict:
    from harness.core import check_java

    mem = None
    try:
        with open("/proc/meminfo") as fh:
            mem = int(fh.readline().split()[1]) * 1024
    except OSError:
        pass
    java = check_java.java_version()
    cpu_model = None
    try:
        with open("/proc/cpuinfo") as fh:
            cpu_model = next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), None)
    except OSError:
        pass
    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "cpu_model": cpu_model,
        "memory_bytes": mem,
        "python": platform.python_version(),
        "java": java[1] if java else None,
    }


def write_json_atomic(path: Path, data: dict) -> Path:
    """Write to a temporary file in the same directory, then rename: a reader never sees half a file."""
    return write_text_atomic(path, json.dumps(data, indent=1, default=str) + "\n")


def write_text_atomic(path: Path, text: str) -> Path:
    """Write to a temporary file in the same directory, then rename: a reader never sees half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def run_key(record: Record) -> str:
    """What a run measures: implementation, query, dataset, semantics, W and parameters (the gate's
    and the report's name for a run)."""
    params = {k: v for k, v in sorted(record.params.items()) if k != "workers"}
    extra = "" if not params else " " + ",".join(f"{k}={v}" for k, v in params.items())
    return (
        f"{record.implementation} {record.query.get('name')} {record.dataset.get('name')} "
        f"{record.semantics} W={record.params.get('workers')}{extra}"
    )
