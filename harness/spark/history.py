"""Spark's history of every run: each session writes its compressed event log to one flat directory
(Spark's History Server does not recurse), capped in size, and `make history` serves that directory
with the History Server inside the pyspark package, on loopback only."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

from harness.core.errors import DataError, ExecutionError
from harness.core.results import RESULTS_DIR
from harness.spark import cluster

SETTING = "HARNESS_EVENTLOG_DIR"  # where event logs go; empty string: none are written
CAP_SETTING = "HARNESS_EVENTLOG_CAP_MB"
DEFAULT_CAP_MB = 1024
DEFAULT_PORT = 18080


def log_dir() -> Path | None:
    """The event log directory (git-ignored results/eventlogs/ unless HARNESS_EVENTLOG_DIR says), or
    None when HARNESS_EVENTLOG_DIR is set empty."""
    setting = os.environ.get(SETTING)
    if setting == "":
        return None
    return Path(setting).resolve() if setting else RESULTS_DIR / "eventlogs"


def cap_bytes() -> int:
    text = os.environ.get(CAP_SETTING, str(DEFAULT_CAP_MB))
    try:
        megabytes = int(text)
    except ValueError:
        raise DataError(f"{CAP_SETTING}={text!r}: not a whole number of megabytes") from None
    if megabytes < 1:
        raise DataError(f"{CAP_SETTING}={text!r}: must be at least 1")
    return megabytes << 20


def prune(directory: Path, limit: int, keep_newest: int = 1) -> list[Path]:
    """Delete the oldest event logs until the directory holds at most `limit` bytes, never the newest
    `keep_newest` (a session about to start, or still writing, keeps its own). Returns what went."""
    logs = sorted((p for p in directory.iterdir() if p.is_file()), key=lambda p: p.stat().st_mtime)
    total = sum(p.stat().st_size for p in logs)
    removed = []
    for path in logs[: max(0, len(logs) - keep_newest)]:
        if total <= limit:
            break
        total -= path.stat().st_size
        path.unlink(missing_ok=True)
        removed.append(path)
    return removed


def session_config() -> dict[str, str]:
    """The Spark settings that write this session's event log (none when logging is off); prunes the
    directory to its cap first, so the logs never grow past it by more than one run's log."""
    directory = log_dir()
    if directory is None:
        return {}
    directory.mkdir(parents=True, exist_ok=True)
    prune(directory, cap_bytes())
    return {
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": directory.as_uri(),
        "spark.eventLog.compress": "true",  # zstd: a run of thousands of stages stays a few MB
        "spark.eventLog.rolling.enabled": "false",  # one file per application, as the cap counts them
    }


def event_log_of(spark) -> str | None:
    """The event log file of a running session, as Spark names it (appId + codec suffix; while the
    application runs it ends in .inprogress)."""
    conf = spark.sparkContext.getConf()
    if conf.get("spark.eventLog.enabled", "false") != "true":
        return None
    directory = conf.get("spark.eventLog.dir").removeprefix("file:")
    codec = conf.get("spark.eventLog.compression.codec", "zstd") if conf.get("spark.eventLog.compress") == "true" else ""
    name = spark.sparkContext.applicationId + (f".{codec}" if codec else "")
    return str(Path(directory) / name)


def start(directory: Path, port: int, log: Path) -> subprocess.Popen:
    """Spark's History Server over `directory`, bound to 127.0.0.1:`port`; its output goes to `log`."""
    from harness.core import check_java

    problem = check_java.problem()
    if problem:
        raise ExecutionError(problem)
    if not directory.is_dir():
        raise DataError(f"history: {directory} does not exist (no bench has written an event log yet)")
    options = [
        f"-Dspark.history.fs.logDirectory={directory.as_uri()}",
        f"-Dspark.history.ui.port={port}",
        "-Dspark.history.fs.update.interval=2s",
        "-Dspark.history.fs.cleaner.enabled=false",  # the harness caps the directory itself
    ]
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        return subprocess.Popen(
            [str(cluster.spark_home() / "bin" / "spark-class"), "org.apache.spark.deploy.history.HistoryServer"],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=dict(cluster.daemon_env(log.parent), SPARK_HISTORY_OPTS=" ".join(options)),
            start_new_session=True,  # stopped as a group: spark-class execs java, but a wrapper may not
        )


def wait_ready(proc: subprocess.Popen, url: str, log: Path, timeout_s: float = 90.0) -> None:
    def ready() -> bool:
        if proc.poll() is not None:
            raise ExecutionError(f"history: the History Server exited with code {proc.returncode}; see {log}")
        with urllib.request.urlopen(f"{url}/api/v1/version", timeout=2):
            return True

    try:
        cluster.wait_until("history: the History Server", ready, timeout_s, log)
    except ExecutionError:
        stop(proc)
        raise


def stop(proc: subprocess.Popen, timeout_s: float = 20.0) -> None:
    """SIGTERM to the server's process group, SIGKILL if it lingers."""
    for sig, wait_s in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 5.0)):
        if proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait_s)
        except subprocess.TimeoutExpired:
            continue


def serve(directory: Path, port: int, print_line=print) -> int:
    """`make history`: start the server, print its URL, and keep it until Ctrl-C or SIGTERM."""
    log = RESULTS_DIR / "tmp" / "history-server.log"
    proc = start(directory, port, log)
    url = f"http://{cluster.HOST}:{port}"

    def finish(*_):
        stop(proc)
        sys.exit(0)

    signal.signal(signal.SIGTERM, finish)
    try:
        wait_ready(proc, url, log)
        logs = sum(1 for p in directory.iterdir() if p.is_file())
        print_line(f"history: {url} ({logs} event logs in {directory}); pid {proc.pid}; Ctrl-C stops it")
        sys.stdout.flush()
        proc.wait()
        return proc.returncode or 0
    except KeyboardInterrupt:
        return 0
    finally:
        stop(proc)
