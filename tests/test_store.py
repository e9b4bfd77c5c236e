"""The storage model (issue 20): the store is the one directory every process sees; a process's own
copies are rebuilt from it on a miss; a missing or unusable store is one clear line."""

from pathlib import Path

import numpy as np
import pytest

from harness.core import store
from harness.core.errors import DataError


@pytest.fixture
def places(tmp_path, monkeypatch):
    shared, local = tmp_path / "store", tmp_path / "executor"
    monkeypatch.setenv("HARNESS_STORE", str(shared))
    monkeypatch.setenv("SPARK_LOCAL_DIRS", f"{local},{tmp_path / 'second-disk'}")
    return shared, local


def test_a_written_file_is_in_the_store_and_kept_locally(places):
    shared, local = places
    stored = str(shared / "scratch" / "index-x" / "p0" / "keys.npy")
    kept = store.save_array(stored, np.arange(5, dtype=np.int32))
    assert kept.startswith(str(local / "harness-local")) and kept.endswith(stored)
    assert np.array_equal(np.load(stored), np.arange(5)) and np.array_equal(np.load(kept), np.arange(5))
    assert not list((shared / "scratch" / "index-x" / "p0").glob("*.tmp"))


def test_a_miss_is_filled_from_the_store(places, monkeypatch, tmp_path):
    """Another executor (another local disk) reads the same bytes, copied once."""
    shared, _ = places
    stored = str(shared / "scratch" / "v" / "changed.npz")
    store.save_array(stored, None, codes=np.array([3, 1], np.int64), present=np.array([True, False]))
    monkeypatch.setenv("SPARK_LOCAL_DIRS", str(tmp_path / "replacement"))
    copy = store.local_copy(stored)
    assert copy.startswith(str(tmp_path / "replacement"))
    with np.load(copy) as z:
        assert z["codes"].tolist() == [3, 1] and z["present"].tolist() == [True, False]
    assert store.local_copy(stored) == copy


def test_a_queue_chunk_is_read_locally_where_written_and_from_the_store_elsewhere(places, monkeypatch, tmp_path):
    """Batch queues and stage state: read once, so a miss reads the checkpoint without keeping a copy,
    and the reader drops its copy when the data is used up."""
    shared, _local = places
    stored = str(shared / "scratch" / "run-x" / "L2" / "p0" / "j000001-g0-s3-a0.bin")
    store.write_bytes(stored, b"queued prefixes")
    kept = store.cached_path(stored)
    assert Path(kept).read_bytes() == Path(stored).read_bytes() == b"queued prefixes"
    Path(stored).rename(f"{stored}.away")
    assert store.read_bytes(stored) == b"queued prefixes"  # this executor's copy
    Path(f"{stored}.away").rename(stored)
    store.drop_local(stored)
    assert not Path(kept).exists()
    assert store.read_bytes(stored) == b"queued prefixes"  # the checkpoint
    assert not Path(kept).exists()
    monkeypatch.setenv("SPARK_LOCAL_DIRS", str(tmp_path / "other-host"))
    assert store.read_bytes(stored) == b"queued prefixes"
    assert not (tmp_path / "other-host").exists()
    with pytest.raises(FileNotFoundError, match="not in the store \\(HARNESS_STORE="):
        store.read_bytes(str(shared / "scratch" / "run-x" / "gone.bin"))


def test_local_copies_of_consumed_files_are_pruned(places):
    """A chunk written on this executor but consumed on another leaves a copy here; once the driver has
    removed it from the store it goes, but never a file a running task may still be writing."""
    shared, _ = places
    run = str(shared / "scratch" / "run-y")
    paths = {name: f"{run}/L1/p0/{name}" for name in ("j000001-a.bin", "j000002-b.bin", "j000004-c.bin")}
    for path in paths.values():
        store.write_bytes(path, b"x")
    for name in ("j000001-a.bin", "j000004-c.bin"):
        Path(paths[name]).unlink()  # consumed: the driver removed the checkpoint
    store.prune_local(run, lambda relative: int(Path(relative).name[1:7]) < 3)
    assert not Path(store.cached_path(paths["j000001-a.bin"])).exists()
    assert Path(store.cached_path(paths["j000002-b.bin"])).exists()  # still queued
    assert Path(store.cached_path(paths["j000004-c.bin"])).exists()  # not settled


def test_a_file_missing_from_the_store_names_the_setting(places):
    shared, _ = places
    with pytest.raises(FileNotFoundError, match="not in the store \\(HARNESS_STORE="):
        store.local_copy(str(shared / "scratch" / "never-written.npy"))


def test_store_settings(monkeypatch, tmp_path):
    monkeypatch.delenv("HARNESS_STORE", raising=False)
    monkeypatch.delenv("HARNESS_CACHE", raising=False)
    assert store.root() == store.REPO / ".cache"  # local mode's default
    store.require_for("local[*]")
    with pytest.raises(DataError, match=r"^HARNESS_STORE is not set: the cluster master spark://h:7077 needs a store"):
        store.require_for("spark://h:7077")
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path))  # the older name
    assert store.root() == tmp_path
    monkeypatch.setenv("HARNESS_STORE", f"file://{tmp_path}/s")
    assert store.root() == tmp_path / "s"
    store.require_for("spark://h:7077")
    monkeypatch.setenv("HARNESS_STORE", "hdfs://nn:8020/harness")
    with pytest.raises(DataError, match=r"^HARNESS_STORE=hdfs://nn:8020/harness: .* mount the hdfs store"):
        store.root()
