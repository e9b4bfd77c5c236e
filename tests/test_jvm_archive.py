"""The driver JVM's class-data-sharing archive: its writing claimed by one session, done by a process of
its own that the session's start waits for (or stops), then mapped by every later driver; a stale claim
is taken over; HARNESS_JVM_ARCHIVE=off turns it off."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.spark import jvm_archive

REPO = Path(__file__).resolve().parent.parent


def test_one_session_claims_the_writing_and_a_stale_claim_is_taken_over(tmp_path, monkeypatch):
    archive = tmp_path / "jvm" / "spark-x.jsa"
    monkeypatch.setattr(jvm_archive, "_archive", lambda: archive)
    monkeypatch.setattr(jvm_archive, "_jcmd", lambda: Path("/usr/bin/jcmd"))
    started: list[list[str]] = []
    monkeypatch.setattr(jvm_archive.subprocess, "Popen", lambda command, **_: started.append(command))
    assert jvm_archive.driver_options() == ""  # no archive yet: this session runs without one...
    assert started == [[sys.executable, "-m", "harness.spark.jvm_archive", str(archive)]]  # ...and has it written
    assert archive.with_suffix(".claim").exists()
    assert jvm_archive.driver_options() == "" and len(started) == 1  # claimed, being written
    stale = time.time() - jvm_archive.CLAIM_S - 1
    os.utime(archive.with_suffix(".claim"), (stale, stale))
    assert jvm_archive.driver_options() == "" and len(started) == 2  # that writer never finished: again
    archive.write_bytes(b"x")
    assert jvm_archive.driver_options() == f" -XX:SharedArchiveFile={archive} {jvm_archive.QUIET}"
    monkeypatch.setenv(jvm_archive.SETTING, "off")
    assert jvm_archive.driver_options() == ""


def test_the_session_s_start_waits_for_its_writer_or_stops_it(monkeypatch):
    writer = subprocess.Popen(["sleep", "1"], start_new_session=True)
    monkeypatch.setattr(jvm_archive, "_writer", writer)
    jvm_archive.finish()
    assert writer.returncode == 0 and jvm_archive._writer is None  # waited for: it ended on its own
    writer = subprocess.Popen(["sleep", "60"], start_new_session=True)
    monkeypatch.setattr(jvm_archive, "_writer", writer)
    started = time.monotonic()
    jvm_archive.finish(wait=False)
    assert writer.returncode == -9 and time.monotonic() - started < 10  # the session failed: stopped at once


MAPS = """
import sys
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
         .config("spark.driver.extraJavaOptions", f"-XX:SharedArchiveFile={sys.argv[1]} -Xlog:class+load=info:file={sys.argv[2]}")
         .getOrCreate())
spark.stop()
"""


@pytest.mark.thorough
def test_the_written_archive_is_whole_and_a_later_driver_maps_spark_s_classes_from_it(tmp_path):
    archive = tmp_path / "spark.jsa"
    archive.with_suffix(".claim").touch()
    env = dict(os.environ, PYTHONPATH=str(REPO), SPARK_LOCAL_IP="127.0.0.1")
    done = subprocess.run(
        [sys.executable, "-m", "harness.spark.jvm_archive", str(archive)], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert archive.stat().st_size > 10 << 20 and sorted(p.name for p in tmp_path.iterdir()) == ["spark.jsa"]  # no claim, no part
    loads = tmp_path / "class-load.log"
    script = tmp_path / "maps.py"
    script.write_text(MAPS)
    done = subprocess.run(
        [sys.executable, str(script), str(archive), str(loads)], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    shared = [line for line in loads.read_text().splitlines() if "org.apache.spark.SparkContext " in line]
    assert shared and "source: shared objects file (top)" in shared[0], shared


def test_another_checkout_gets_this_one_s_archive(tmp_path, monkeypatch):
    here, there = tmp_path / "here", tmp_path / "there"
    archive = here / ".cache" / "jvm" / "spark-x.jsa"
    monkeypatch.setattr(jvm_archive, "REPO", here)
    monkeypatch.setattr(jvm_archive, "_archive", lambda: archive)
    jvm_archive.share_with(there)
    assert not there.exists()  # none to share
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"classes")
    jvm_archive.share_with(there)
    assert (there / ".cache" / "jvm" / "spark-x.jsa").read_bytes() == b"classes"


def test_executors_and_a_cluster_s_daemons_map_the_archive_when_there_is_one(tmp_path, monkeypatch):
    from harness.spark import cluster

    archive = tmp_path / "spark-x.jsa"
    monkeypatch.setattr(jvm_archive, "_archive", lambda: archive)
    monkeypatch.delenv(jvm_archive.SETTING, raising=False)
    assert jvm_archive.mapped_options() == ""  # none written yet: nothing to map, nothing written
    archive.write_bytes(b"classes")
    assert jvm_archive.mapped_options() == f" -XX:SharedArchiveFile={archive} {jvm_archive.QUIET}"
    lean = cluster._lean({"SPARK_DAEMON_JAVA_OPTS": "-XX:TieredStopAtLevel=4"})["SPARK_DAEMON_JAVA_OPTS"]
    assert lean == f"{cluster.DAEMON_JAVA_OPTS} -XX:SharedArchiveFile={archive} {jvm_archive.QUIET} -XX:TieredStopAtLevel=4"
    monkeypatch.setenv(jvm_archive.SETTING, "off")
    assert jvm_archive.mapped_options() == ""


def test_make_venv_writes_the_archive_once_unless_it_is_there_claimed_or_off(tmp_path, monkeypatch):
    """`ensure`, which `make venv` runs: it writes a missing archive itself (the real writing is the test
    above's), and writes nothing where there is one, where a session is writing it, or where it is off."""
    here = tmp_path / "here"
    archive = here / ".cache" / "jvm" / "spark-x.jsa"
    monkeypatch.setattr(jvm_archive, "REPO", here)
    monkeypatch.setattr(jvm_archive, "_archive", lambda: archive)
    monkeypatch.setattr(jvm_archive, "_jcmd", lambda: Path("/usr/bin/jcmd"))
    written: list[Path] = []
    monkeypatch.setattr(jvm_archive, "write", lambda path: (written.append(path), path.write_bytes(b"classes")))
    assert jvm_archive.ensure().startswith("jvm archive: .cache/jvm/spark-x.jsa written in ")
    assert written == [archive]
    assert jvm_archive.ensure() == "jvm archive: .cache/jvm/spark-x.jsa (there already)" and len(written) == 1
    archive.unlink()
    archive.with_suffix(".claim").touch()  # a session's writer has it
    assert jvm_archive.ensure() == "jvm archive: another process is writing it" and len(written) == 1
    monkeypatch.setenv(jvm_archive.SETTING, "off")
    assert jvm_archive.ensure().startswith("jvm archive: none") and len(written) == 1
