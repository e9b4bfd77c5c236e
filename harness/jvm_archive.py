"""The driver JVM's class-data-sharing archive (AppCDS): Spark's classes, loaded, parsed and verified
once per checkout and Spark build, then mapped by every later driver JVM, which so starts a session
about 6 s sooner on this machine (19-23 s to 15 s, warm kernels).

Java 17 cannot create the archive on demand, so the first session that finds none (and claims the
writing of it) starts its JVM ready to dump its classes, and has it write them (`jcmd VM.cds
dynamic_dump`, about 9 s here, once) as the session's start-up ends, before anything is timed; the
archive is renamed into place only once whole. The JVM ignores an archive built for another class
path, and with cds logging off says nothing of it. A claim older than CLAIM_S whose archive never
appeared is taken over. Without jcmd (a Java runtime without its tools) there is no archive."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CLAIM_S = 600.0
SETTING = "HARNESS_JVM_ARCHIVE"  # "off": no archive, mapped or written
QUIET = "-Xlog:cds*=off"  # a mismatched archive or an unarchivable class is not the run's business
DUMPED = b" Dynamic dump to file "  # what the JVM prints on its stdout as it writes the archive
_claimed: Path | None = None  # the archive this process's session is to write


def driver_options() -> str:
    """The driver JVM's options (to append to its extraJavaOptions): map the archive if there is one,
    else be ready to write it if this session claims it, else nothing."""
    global _claimed
    if os.environ.get(SETTING) == "off":
        return ""
    archive = _archive()
    if archive.exists():
        return f" -XX:SharedArchiveFile={archive} {QUIET}"
    if _jcmd() is not None and _claim(archive.with_suffix(".claim")):
        _claimed = archive
        return f" -XX:+RecordDynamicDumpInfo {QUIET}"
    return ""


def write(jvm_pid: int) -> None:
    """If this process's session claimed the archive: its JVM, started, writes it now."""
    global _claimed
    if _claimed is None:
        return
    archive, _claimed = _claimed, None
    partial = archive.with_suffix(f".{os.getpid()}.part")
    try:
        done = subprocess.run(
            [str(_jcmd()), str(jvm_pid), "VM.cds", "dynamic_dump", str(partial)], capture_output=True, timeout=300
        )
        if done.returncode == 0 and partial.exists():
            os.replace(partial, archive)
    except (OSError, subprocess.TimeoutExpired):
        pass  # no archive: later sessions claim it again once the claim is stale
    finally:
        partial.unlink(missing_ok=True)
        archive.with_suffix(".claim").unlink(missing_ok=True)


def abandon() -> None:
    """The session this process claimed the archive for did not start: another may write it."""
    global _claimed
    if _claimed is not None:
        _claimed.with_suffix(".claim").unlink(missing_ok=True)
        _claimed = None


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
