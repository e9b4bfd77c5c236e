"""Where data lives (issue 20), shared-nothing: the only storage that every process sees is the store,
named by HARNESS_STORE; everything else is on the local disk of the process that wrote it.

- The store holds the canonical graph cache, update streams and the checkpoints of per-worker state
  (index partitions, update overlays, batch queues), under `scratch/`. It is a directory every host
  mounts (NFS, a FUSE mount of HDFS or S3); local mode defaults to the checkout's .cache.
- Each executor keeps a memory-mapped local copy of the immutable files it reads, filled from the
  store on a miss (`local_copy`), so a replacement executor on another host rebuilds what it needs.
  Files read once (queue chunks, stage state) are kept locally by the writer and read from the store
  only by a task on another host (`write_bytes`, `read_bytes`, `drop_local`).
  The local copies live in the executor's own Spark scratch directory (SPARK_LOCAL_DIRS), which
  Spark removes with the executor."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
from pathlib import Path

from harness.core.errors import DataError

REPO = Path(__file__).resolve().parents[2]
SETTING = "HARNESS_STORE"
PROBE_SETTING = "HARNESS_STORE_PROBE"  # executors' environment: a file in the store every host must see
_OLD_SETTING = "HARNESS_CACHE"  # the store's name before issue 20; still honoured


def configured() -> str | None:
    return os.environ.get(SETTING) or os.environ.get(_OLD_SETTING)


def root() -> Path:
    """The store as a path on this host."""
    value = configured()
    if not value:
        return REPO / ".cache"
    return as_path(value)


def as_path(value: str) -> Path:
    if value.startswith("file://"):
        return Path(value[len("file://") :] or "/")
    if "://" in value:
        scheme = value.split("://", 1)[0]
        raise DataError(
            f"{SETTING}={value}: the harness reads the store as files on every host; mount the {scheme} "
            f"store (e.g. with a FUSE client) and set {SETTING} to the mount path or a file:// URI"
        )
    return Path(value)


def require_for(master: str) -> None:
    """A cluster has no directory every process sees unless the user names one."""
    if not master.startswith("local") and not configured():
        raise DataError(
            f"{SETTING} is not set: the cluster master {master} needs a store (a directory every host mounts, "
            f"e.g. {SETTING}=/shared/harness); see docs/cluster.md, 'Running on a real cluster'"
        )


def new_scratch(kind: str) -> Path:
    """A fresh directory in the store for one piece of per-run state (the driver that made it removes it)."""
    path = root() / "scratch" / f"{kind}-{uuid.uuid4().hex[:12]}"
    path.mkdir(parents=True)
    return path


def local_root() -> Path:
    """This process's local disk: the executor's Spark scratch directory inside a task, else the temp dir."""
    dirs = os.environ.get("SPARK_LOCAL_DIRS")
    base = Path(dirs.split(",")[0]) if dirs else Path(tempfile.gettempdir())
    return base / "harness-local"


def cached_path(stored: str) -> str:
    """Where this host keeps its copy of the store file `stored`."""
    return str(local_root()) + os.path.abspath(stored)


def local_copy(stored: str) -> str:
    """A local path holding the same bytes as the immutable store file `stored`, copied on a miss."""
    local = cached_path(stored)
    if not os.path.exists(local):
        os.makedirs(os.path.dirname(local), exist_ok=True)
        tmp = f"{local}.{os.getpid()}.tmp"
        try:
            link_or_copy(stored, tmp)  # immutable: a hard link when the store is on this disk
        except FileNotFoundError:
            raise _not_in_store(stored) from None
        os.replace(tmp, local)
    return local


def _not_in_store(stored: str) -> FileNotFoundError:
    return FileNotFoundError(
        f"{stored}: not in the store ({SETTING}={configured() or root()}); is it the same directory on every host?"
    )


def _atomic(path: str, write) -> None:
    """`write(tmp)` then rename: a reader sees the whole file or none (a re-executed task rewrites the same bytes)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    write(tmp)
    os.replace(tmp, path)


def write_through(stored: str, write) -> str:
    """`write(path)` writes an immutable file: kept as this host's local copy, then copied into the
    store (a hard link when both are on one mount, as in local mode). Returns the local path."""
    local = cached_path(stored)
    _atomic(local, write)
    _atomic(stored, lambda tmp: link_or_copy(local, tmp))
    return local


def link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:  # another mount (EXDEV), or a store that has no hard links
        shutil.copyfile(source, target)


def write_bytes(stored: str, blob) -> None:
    """`write_through` of one blob, e.g. a batch queue chunk or a stage's saved state."""

    def write(path: str) -> None:
        with open(path, "wb") as fh:
            fh.write(blob)

    write_through(stored, write)


def read_bytes(stored: str) -> bytes:
    """A store file read once: from this host's copy when it wrote it, else from the store (no copy kept)."""
    for path in (cached_path(stored), stored):
        try:
            with open(path, "rb") as fh:
                return fh.read()
        except FileNotFoundError:
            continue
    raise _not_in_store(stored)


def map_bytes(stored: str):
    """A store file read once, as a read-only uint8 array mapped from this host's copy when it wrote
    it, else from the store: no copy of its bytes (the mapping lives as long as the array)."""
    import mmap

    import numpy as np

    for path in (cached_path(stored), stored):
        try:
            with open(path, "rb") as fh:
                if os.fstat(fh.fileno()).st_size == 0:
                    return np.zeros(0, np.uint8)
                return np.frombuffer(mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ), dtype=np.uint8)
        except FileNotFoundError:
            continue
    raise _not_in_store(stored)


def drop_local(stored: str) -> None:
    """Forget this host's copy of a store file nobody will read again here (the store keeps its own)."""
    with contextlib.suppress(FileNotFoundError):
        os.remove(cached_path(stored))


def prune_local(stored_dir: str, settled) -> None:
    """Drop this host's copies of the files under `stored_dir` that are gone from the store, among
    those `settled(relative path)` says no running task still writes: a file written here but consumed
    on another host leaves its local copy behind."""
    local_dir = cached_path(stored_dir)
    for folder, _, names in os.walk(local_dir):
        for name in names:
            relative = os.path.relpath(os.path.join(folder, name), local_dir)
            stored = os.path.join(stored_dir, relative)
            if settled(relative) and not os.path.exists(stored):
                drop_local(stored)


def _array_writer(array, more: dict):
    import numpy as np

    def write(path: str) -> None:
        with open(path, "wb") as fh:
            if more:
                np.savez(fh, **more)
            else:
                np.save(fh, array)

    return write


def save_array(stored: str, array, **more) -> str:
    """np.save (or np.savez, given `more` arrays by name) through `write_through`."""
    return write_through(stored, _array_writer(array, more))


def save_to_store(stored: str, array) -> None:
    """np.save into the store only: for the driver, which keeps no local copies."""
    _atomic(stored, _array_writer(array, {}))
