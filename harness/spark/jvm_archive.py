"""The driver JVM's class-data-sharing archive (AppCDS): Spark's classes, loaded, parsed and verified
once per checkout and Spark build, then mapped by every later driver JVM, which so starts a session
about 6 s sooner on this machine (19-23 s to 15 s, warm kernels). Executors and a cluster's daemons on
this machine map it too (`mapped_options`): an executor starts on 8 s of CPU instead of 12-13 s.

Java 17 cannot create the archive on demand. `make venv` writes it once the venv is installed
(`python -m harness.spark.jvm_archive`, about 35 s, `ensure`). Otherwise the first session that finds
none (and claims the writing of it) starts without one and starts a process of its own beside it (`python -m
harness.spark.jvm_archive`): a minimal local session whose JVM, once it has run a Python job, writes its
classes (`jcmd VM.cds dynamic_dump`, about 35 s, once). The session's start waits for it (`finish`),
so no timed phase shares the machine with it, and no measured JVM runs ready to dump. The archive is
renamed into place only once whole; the JVM ignores one built for another class path, and with cds
logging off says nothing of it. A claim older than CLAIM_S whose archive never appeared is taken over.
Without jcmd (a Java runtime without its tools) there is no archive."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from harness.core import store

REPO = Path(__file__).resolve().parents[2]
CLAIM_S = 600.0
WRITE_S = 240.0  # the longest a session's start waits for the writer (35 s here), which is then stopped
SETTING = "HARNESS_JVM_ARCHIVE"  # "off": no archive, mapped or written
QUIET = "-Xlog:cds*=off"  # a mismatched archive or an unarchivable class is not the run's business
_writer: subprocess.Popen | None = None  # the process writing the archive, started by this process


def driver_options() -> str:
    """The driver JVM's options (to append to its extraJavaOptions): map the archive if there is one;
    else, if this session claims its writing, start the process that writes it."""
    global _writer
    if os.environ.get(SETTING) == "off":
        return ""
    archive = _archive()
    if archive.exists():
        return _mapping(archive)
    if _jcmd() is not None and _claim(archive.with_suffix(".claim")):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
        command = [sys.executable, "-m", "harness.spark.jvm_archive", str(archive)]
        _writer = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
    return ""


def mapped_options() -> str:
    """Options that map the archive if this checkout has one, and nothing if not: for the JVMs that do
    not write it (executors, a cluster's master and workers). Spark's daemons and executors load the
    same jars as the driver (an isolated host maps its own copy, `share_with`); a JVM that does not see
    the file starts without it, silently."""
    if os.environ.get(SETTING) == "off":
        return ""
    archive = _archive()  # hashes the listing of Spark's jars: once per call
    return _mapping(archive) if archive.exists() else ""


def _mapping(archive: Path) -> str:
    return f" -XX:SharedArchiveFile={archive} {QUIET}"


def finish(wait: bool = True) -> None:
    """The writer this process started, ended: waited for (at most WRITE_S), or stopped at once if not
    `wait` (the session failed to start). A stopped writer leaves its claim to go stale."""
    global _writer
    if _writer is None:
        return
    writer, _writer = _writer, None
    if wait:
        with contextlib.suppress(subprocess.TimeoutExpired):
            writer.wait(WRITE_S)
            return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(writer.pid, signal.SIGKILL)  # its group: the writer and its JVM
    writer.wait()


def share_with(other_tree: Path) -> None:
    """This checkout's archive, hard-linked (or copied) into another checkout's place for it (the gate's
    baseline commit, run with the same Java and Spark): its first session maps it, writing none. Or into
    an isolated host's private views of this checkout (harness.spark.cluster), whose executors map it as
    a real host's would map the one its own `make venv` wrote."""
    archive = _archive()
    target = other_tree / archive.relative_to(REPO)
    if archive.exists() and not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        store.link_or_copy(str(archive), str(target))


def write(archive: Path) -> None:
    """A minimal local session, on loopback, whose JVM writes its classes to `archive` once it has run
    a Python job. The claim goes with success; after a failure it stands until stale, so a broken
    setup costs one attempt per CLAIM_S, not one per session."""
    from pyspark.sql import SparkSession

    partial = archive.with_suffix(f".{os.getpid()}.part")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master("local[1]").appName("jvm-archive")
    for key, value in {
        "spark.driver.extraJavaOptions": f"-XX:+RecordDynamicDumpInfo {QUIET}",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.port": "0",  # any free port: the UI's classes are a session's too
        "spark.sql.execution.arrow.pyspark.enabled": "true",
    }.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    try:
        spark.range(0, 2, 1, 1).mapInArrow(_each, "id long").collect()
        jvm: Any = spark.sparkContext._jvm
        pid = jvm.java.lang.ProcessHandle.current().pid()
        subprocess.run(
            [str(_jcmd()), str(pid), "VM.cds", "dynamic_dump", str(partial)], check=True, capture_output=True, timeout=300
        )
        os.replace(partial, archive)
        archive.with_suffix(".claim").unlink(missing_ok=True)
    finally:
        spark.stop()
        partial.unlink(missing_ok=True)


def _each(batches):
    yield from batches


def _java() -> Path:
    home = os.environ.get("JAVA_HOME")
    found = (home and shutil.which("java", path=str(Path(home) / "bin"))) or shutil.which("java") or "java"
    return Path(os.path.realpath(found))


def _jcmd() -> Path | None:
    jcmd = _java().parent / "jcmd"
    return jcmd if jcmd.exists() else None


def _archive() -> Path:
    """Named after what the archive depends on: the Java runtime and Spark's jars."""
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    listing = sorted(p.name for p in jars.iterdir()) if jars.is_dir() else []
    key = hashlib.sha256("\n".join([str(_java()), str(jars), *listing]).encode()).hexdigest()[:16]
    return REPO / ".cache" / "jvm" / f"spark-{pyspark.__version__}-{key}.jsa"


def _claim(claim: Path) -> bool:
    """True if this session is to write the archive: no other has claimed it in the last CLAIM_S."""
    claim.parent.mkdir(parents=True, exist_ok=True)
    try:
        if time.time() - claim.stat().st_mtime < CLAIM_S:
            return False
        claim.unlink(missing_ok=True)  # a stale claim: its JVM never wrote the archive
    except FileNotFoundError:
        pass
    try:
        os.close(os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except FileExistsError:
        return False
    return True


def ensure() -> str:
    """This checkout's archive written now, if it has none and no session is writing it: `make venv` runs
    this once the venv is installed, so a clone's first session maps an archive instead of waiting for
    its writer. Returns what it did, in a line."""
    archive = _archive()
    if os.environ.get(SETTING) == "off" or _jcmd() is None:
        return "jvm archive: none (HARNESS_JVM_ARCHIVE=off or no jcmd)"
    if archive.exists():
        return f"jvm archive: {archive.relative_to(REPO)} (there already)"
    if not _claim(archive.with_suffix(".claim")):
        return "jvm archive: another process is writing it"
    started = time.monotonic()
    write(archive)
    return f"jvm archive: {archive.relative_to(REPO)} written in {time.monotonic() - started:.0f} s"


if __name__ == "__main__":
    if len(sys.argv) == 1:
        print(ensure())
    else:
        write(Path(sys.argv[1]))
