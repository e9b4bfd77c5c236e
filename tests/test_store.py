"""The storage model (issue 20): the store is the one directory every process sees; a process's own
copies are rebuilt from it on a miss; a missing or unusable store is one clear line."""
import numpy as np
import pytest

from harness import store
from harness.errors import DataError


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


def test_a_file_missing_from_the_store_names_the_setting(places):
    shared, _ = places
    with pytest.raises(FileNotFoundError, match="not in the store \\(HARNESS_STORE="):
        store.local_copy(str(shared / "scratch" / "never-written.npy"))


def test_store_settings(monkeypatch, tmp_path):
    monkeypatch.delenv("HARNESS_STORE", raising=False)
    monkeypatch.delenv("HARNESS_CACHE", raising=False)
    assert store.root() == store.REPO / ".cache"  # local mode's default
    store.require_for("local[*]")
    with pytest.raises(DataError, match="^HARNESS_STORE is not set: the cluster master spark://h:7077 needs a store"):
        store.require_for("spark://h:7077")
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path))  # the older name
    assert store.root() == tmp_path
    monkeypatch.setenv("HARNESS_STORE", f"file://{tmp_path}/s")
    assert store.root() == tmp_path / "s"
    store.require_for("spark://h:7077")
    monkeypatch.setenv("HARNESS_STORE", "hdfs://nn:8020/harness")
    with pytest.raises(DataError, match="^HARNESS_STORE=hdfs://nn:8020/harness: .* mount the hdfs store"):
        store.root()
