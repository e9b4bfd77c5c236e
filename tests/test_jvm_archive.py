"""The driver JVM's class-data-sharing archive: claimed by one session, written once by its JVM,
mapped by every later driver; a stale claim is taken over; HARNESS_JVM_ARCHIVE=off turns it off."""

import os
import time

from harness import jvm_archive


def _in(tmp_path, monkeypatch):
    archive = tmp_path / "jvm" / "spark-x.jsa"
    monkeypatch.setattr(jvm_archive, "_archive", lambda: archive)
    monkeypatch.setattr(jvm_archive, "_claimed", None)
    jcmd = tmp_path / "jcmd"
    jcmd.write_text("")
    monkeypatch.setattr(jvm_archive, "_jcmd", lambda: jcmd)
    return archive


def test_one_session_claims_the_writing_and_a_stale_claim_is_taken_over(tmp_path, monkeypatch):
    archive = _in(tmp_path, monkeypatch)
    assert "-XX:+RecordDynamicDumpInfo" in jvm_archive.driver_options()  # no archive: this session writes it
    assert archive.with_suffix(".claim").exists()
    monkeypatch.setattr(jvm_archive, "_claimed", None)
    assert jvm_archive.driver_options() == ""  # claimed by another, which is still starting
    stale = time.time() - jvm_archive.CLAIM_S - 1
    os.utime(archive.with_suffix(".claim"), (stale, stale))
    assert "-XX:+RecordDynamicDumpInfo" in jvm_archive.driver_options()  # its JVM never wrote it
    jvm_archive.abandon()  # that session did not start
    assert not archive.with_suffix(".claim").exists()
    archive.write_bytes(b"x")
    assert jvm_archive.driver_options() == f" -XX:SharedArchiveFile={archive} {jvm_archive.QUIET}"
    monkeypatch.setenv(jvm_archive.SETTING, "off")
    assert jvm_archive.driver_options() == ""


def test_a_failed_dump_leaves_no_archive_and_no_claim(tmp_path, monkeypatch):
    archive = _in(tmp_path, monkeypatch)
    jvm_archive.driver_options()
    jvm_archive.write(2**22 + 1)  # the fake jcmd cannot run: no archive, and the claim is released
    assert not archive.exists() and list(archive.parent.iterdir()) == []


def test_the_test_session_s_driver_wrote_or_maps_the_archive(spark):
    options = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()
    flags = [str(f) for f in options]
    assert any(f.startswith("-XX:SharedArchiveFile=") for f in flags) or "-XX:+RecordDynamicDumpInfo" in flags, flags
    assert jvm_archive._archive().exists()  # written as that session started, or before
