"""A Spark standalone cluster on this machine, run from the Spark distribution inside the pyspark
package (`bin/spark-class ...deploy.master.Master` / `...Worker`): one master on 127.0.0.1 and N workers.

Isolated (`hosts`, the default of `make cluster-up`): worker i binds 127.0.0.(i + 2), so Spark treats
each as its own host, and runs in its own mount namespace (`unshare -m`) with a private /tmp and private,
empty views of the checkout's .cache, .cluster and results/ (but for the host's own copy of the JVM
archive, which a real host's `make venv` writes: its executors start on less CPU). Only the store (HARNESS_STORE) and the
input datasets (HARNESS_SHARED) are shared, as on a real cluster. Not isolated (`--shared-tmp`): every
worker on 127.0.0.1, seeing the same files.

State (pids, URLs, logs, the workers' private directories) lives in one directory (default .cluster/),
so `down` stops exactly what `up` started, executors and their Python workers included."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import NamedTuple

from harness.core import check_java
from harness.core.errors import DataError, ExecutionError
from harness.core.results import write_json_atomic
from harness.spark import jvm_archive, memory_cap

REPO = Path(__file__).resolve().parents[2]
# A master's and a worker's JVM does little once up; its start is what costs (7 s of CPU each here, for
# W workers at once on 2 cores): C1 only and the serial collector bring it to 2.6 s with the JVM archive.
# Not the executors': they run the queries, and a capped one's collector is part of what is measured.
DAEMON_JAVA_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
DEFAULT_DIR = REPO / ".cluster"
HOST = "127.0.0.1"


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


@dataclass
class Cluster:
    directory: str
    port: int
    webui_port: int
    master_pid: int
    worker_pids: list[int] = field(default_factory=list)
    worker_hosts: list[str] = field(default_factory=list)
    store: str | None = None  # the isolated cluster's shared store
    cap_bytes: int | None = None  # each worker's executor tree capped at this (memory_cap)
    cgroups: list[str] = field(default_factory=list)  # the capped workers' cgroups, by worker

    @property
    def url(self) -> str:
        return f"spark://{HOST}:{self.port}"

    @property
    def webui(self) -> str:
        return f"http://{HOST}:{self.webui_port}"

    @property
    def pids(self) -> list[int]:
        return [*self.worker_pids, self.master_pid]

    def caps(self) -> list[memory_cap.Cgroup]:
        return [memory_cap.Cgroup.at(path) for path in self.cgroups]

    def state(self) -> dict:
        """The master's view: its status and its workers (GET /json/)."""
        with urllib.request.urlopen(f"{self.webui}/json/", timeout=5) as resp:
            return json.loads(resp.read())

    def executors(self) -> dict[str, int]:
        """{executor id: pid} of the executor JVMs currently running under the workers."""
        import psutil

        found = {}
        for pid in self.worker_pids:
            try:
                children = psutil.Process(pid).children()
            except psutil.Error:
                continue
            for child in children:
                try:  # one child that is gone or a zombie (a worker leaves a defunct bash) hides no other
                    args = child.cmdline()
                except psutil.Error:
                    continue
                if "org.apache.spark.executor.CoarseGrainedExecutorBackend" in args and "--executor-id" in args:
                    found[args[args.index("--executor-id") + 1]] = child.pid
        return found


def _state_file(directory: Path) -> Path:
    return directory / "cluster.json"


def _save(cluster: Cluster) -> None:
    write_json_atomic(_state_file(Path(cluster.directory)), asdict(cluster))


def state_dir() -> Path:
    """Where `cluster up` keeps its state unless told (--dir): HARNESS_CLUSTER_DIR, else .cluster/."""
    return Path(os.environ.get("HARNESS_CLUSTER_DIR") or DEFAULT_DIR)


def load(directory: Path = DEFAULT_DIR) -> Cluster | None:
    path = _state_file(directory)
    if not path.exists():
        return None
    try:
        return Cluster(**json.loads(path.read_text()))
    except (ValueError, TypeError) as exc:
        raise DataError(f"{path}: not a cluster state file ({exc}); remove it after stopping any Spark daemons") from None


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex((HOST, port)) != 0


def free_port() -> int:
    """A port nothing listens on, on the loopback."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def free_block(size: int) -> int:
    """A first port such that `size` consecutive ports are free (a master's UI and its workers')."""
    for _ in range(50):
        first = free_port()
        if first + size < 65535 and all(_port_free(first + i) for i in range(size)):
            return first
    raise OSError("no block of free ports on the loopback")


def daemon_env(directory: Path, host: str = HOST, java_home: Path | None = None) -> dict:
    """The environment of a Spark daemon started from the pyspark package: bound to `host`, in the
    foreground, logging under `directory`, and not pointed at any SPARK_MASTER of the caller's."""
    env = dict(
        os.environ,
        SPARK_HOME=str(spark_home()),
        SPARK_LOCAL_IP=host,
        SPARK_LOG_DIR=str(directory / "logs"),
        SPARK_NO_DAEMONIZE="1",
    )
    if java_home is not None:  # a capped worker's: its executors start in the worker's cgroup
        env["JAVA_HOME"] = str(java_home)
    env.pop("SPARK_MASTER", None)
    return env


def _spawn(
    directory: Path,
    name: str,
    args: list[str],
    host: str = HOST,
    private: Path | None = None,
    shared: Sequence[Path] = (),
    java_home: Path | None = None,
) -> int:
    """Start a Spark daemon; with `private`, in its own mount namespace (see `_isolating_script`)."""
    command = [str(spark_home() / "bin" / "spark-class"), *args]
    if private is not None:
        command = [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "--",
            "/bin/sh",
            "-c",
            _isolating_script(private, shared, command),
        ]
    with open(directory / "logs" / f"{name}.log", "ab") as log:
        proc = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=_lean(daemon_env(directory, host, java_home)),
            start_new_session=True,
        )
    return proc.pid


def _lean(env: dict) -> dict:
    """A master's or worker's environment with DAEMON_JAVA_OPTS (before the user's, which win)."""
    options = [DAEMON_JAVA_OPTS + jvm_archive.mapped_options(), env.get("SPARK_DAEMON_JAVA_OPTS", "")]
    return dict(env, SPARK_DAEMON_JAVA_OPTS=" ".join(o.strip() for o in options if o.strip()))


PRIVATE_VIEWS = (".cache", ".cluster", "results")  # the checkout's directories each host gets its own copy of


def _isolating_script(private: Path, shared: Sequence[Path], command: list[str]) -> str:
    """Shell run inside the new mount namespace: a private /tmp (`private`/tmp) in which the `shared`
    paths that live under /tmp (the store, the checkout, the input datasets) stay visible at their own paths, then
    empty private views of the checkout's state directories (the JVM archive copied in), then exec the daemon. `private` is first
    bound to a staging point outside /tmp and the checkout, so no later mount hides a source."""
    q = shlex.quote
    staging = Path("/run/harness-hosts") / private.name
    staging.mkdir(parents=True, exist_ok=True)
    (private / "tmp").mkdir(parents=True, exist_ok=True)
    lines = ["set -e", f"mount --bind {q(str(private))} {q(str(staging))}"]
    for path in shared:  # at the path the harness names it by, and at the path a symlink leads to
        for seen_as in dict.fromkeys((path.absolute(), path.resolve())):
            if seen_as.is_relative_to("/tmp"):
                (private / "tmp" / seen_as.relative_to("/tmp")).mkdir(parents=True, exist_ok=True)
                lines.append(f"mount --rbind {q(str(path.resolve()))} {q(str(staging / 'tmp' / seen_as.relative_to('/tmp')))}")
    lines.append(f"mount --rbind {q(str(staging / 'tmp'))} /tmp")
    for name in PRIVATE_VIEWS:
        (private / "views" / name).mkdir(parents=True, exist_ok=True)
        (REPO / name).mkdir(exist_ok=True)
        lines.append(f"mount --bind {q(str(staging / 'views' / name))} {q(str(REPO / name))}")
    jvm_archive.share_with(private / "views")  # the host's own copy, as each host's `make venv` would write one
    lines.append("exec " + " ".join(q(c) for c in command))
    return "\n".join(lines)


def wait_until(what: str, ready, timeout_s: float, logs: Path):
    """Poll `ready()` until it is true; an OSError (nothing listening yet) means not yet."""
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        try:
            if ready():
                return
        except OSError as exc:
            last = exc
        time.sleep(0.3)
    raise ExecutionError(f"{what} not ready after {timeout_s:g} s ({last or 'timed out'}); see {logs}")


def up(
    directory: Path = DEFAULT_DIR,
    workers: int = 2,
    cores: int = 1,
    memory: str = "6g",
    port: int = 7077,
    webui_port: int = 8080,
    timeout_s: float = 60.0,
    isolated: bool = False,
    store: Path | None = None,
    cap_bytes: int | None = None,
) -> Cluster:
    """Start a master and `workers` workers (each offering `cores` cores and `memory`) and wait until
    the master lists every worker ALIVE. Isolated: each worker a host of its own sharing only `store`.
    Capped: each worker's executor and its Python workers in a memory cgroup of `cap_bytes`, one
    executor per worker (one core), offered what its heap needs whatever `memory` says."""
    memory = _checked_start(directory, workers, cores, memory, port, webui_port, cap_bytes)
    (directory / "logs").mkdir(parents=True, exist_ok=True)
    shared: list[Path] = []  # what an isolated host sees of the others'
    if isolated:
        store = _isolated_store(directory, store)
        if os.geteuid() != 0:
            raise DataError("cluster: an isolated cluster mounts a private /tmp per worker (unshare -m), which needs root")
        shared = _shared_paths(store)
    master_pid = _spawn(
        directory,
        "master",
        ["org.apache.spark.deploy.master.Master", "--host", HOST, "--port", str(port), "--webui-port", str(webui_port)],
    )
    cluster = Cluster(str(directory), port, webui_port, master_pid, store=str(store) if isolated else None, cap_bytes=cap_bytes)
    _save(cluster)
    try:
        wait_until("cluster: master", lambda: cluster.state().get("status") == "ALIVE", timeout_s, directory / "logs")
        for i in range(workers):
            _start_worker(cluster, i, WorkerOffer(cores, memory, webui_port + 1 + i), isolated, shared)
        alive = lambda: sum(w.get("state") == "ALIVE" for w in cluster.state().get("workers", [])) >= workers  # noqa: E731
        wait_until(f"cluster: {workers} workers", alive, timeout_s, directory / "logs")
    except BaseException:
        down(directory)
        raise
    return cluster


def _checked_start(
    directory: Path, workers: int, cores: int, memory: str, port: int, webui_port: int, cap_bytes: int | None
) -> str:
    """Refuse a start that cannot work (no Java, no cgroups for a cap, a cluster already running, a
    port in use); returns the memory each worker offers (a capped worker: what its heap needs)."""
    msg = check_java.problem() or (memory_cap.problem() if cap_bytes is not None else None)
    if msg:
        raise ExecutionError(msg)
    if cap_bytes is not None:
        if cores != 1:
            raise DataError("cluster up: --memory-per-worker caps one executor per worker, so --cores must be 1")
        memory = f"{max(cap_bytes, memory_cap.heap_bytes(cap_bytes)) >> 20}m"  # room for Spark's heap floor
    running = load(directory)
    if running is not None and any(_alive(pid) for pid in running.pids):
        raise DataError(
            f"cluster: already running at {running.url} (state in {_state_file(directory)}); `make cluster-down` first"
        )
    busy = [p for p in (port, webui_port, *[webui_port + 1 + i for i in range(workers)]) if not _port_free(p)]
    if busy:
        raise DataError(f"cluster: port {busy[0]} on {HOST} is in use; pick other ports (--port / --webui-port)")
    return memory


class WorkerOffer(NamedTuple):
    """What one worker offers the master, and its UI port."""

    cores: int
    memory: str
    webui_port: int


def _start_worker(cluster: Cluster, i: int, offer: WorkerOffer, isolated: bool, shared: list[Path]) -> None:
    """Worker i: on a loopback host of its own with a private /tmp (isolated), or beside the master."""
    directory = Path(cluster.directory)
    host = f"127.0.0.{i + 2}" if isolated else HOST
    private = (directory / "hosts" / host) if isolated else None
    work = Path("/tmp/spark-work") if isolated else directory / "work" / f"worker-{i}"
    if not isolated:
        work.mkdir(parents=True, exist_ok=True)
    java_home = _capped_java(cluster, i, private) if cluster.cap_bytes is not None else None
    command = ["org.apache.spark.deploy.worker.Worker", "--host", host, "--webui-port", str(offer.webui_port)]
    command += ["--cores", str(offer.cores), "--memory", offer.memory, "--work-dir", str(work), cluster.url]
    cluster.worker_pids.append(_spawn(directory, f"worker-{i}", command, host, private, shared, java_home))
    cluster.worker_hosts.append(host)
    _save(cluster)


def _capped_java(cluster: Cluster, i: int, private: Path | None) -> Path:
    """Worker i's cgroup (named after the master's port, unique on this machine) and its JAVA_HOME,
    as the worker sees it: an isolated host's is in its private /tmp."""
    assert cluster.cap_bytes is not None
    group = memory_cap.Cgroup.create(f"harness-{cluster.port}-w{i}", cluster.cap_bytes)
    cluster.cgroups.append(group.path)
    _save(cluster)
    if private is not None:
        memory_cap.java_wrapper(private / "tmp" / "harness-java", group)
        return Path("/tmp/harness-java")
    return memory_cap.java_wrapper(Path(cluster.directory) / "java" / f"w{i}", group)


def _shared_paths(store: Path) -> list[Path]:
    """What every isolated host sees: the store, the checkout (the code, installed on every node) and
    the input datasets (HARNESS_SHARED, standing in for shared storage that holds the input)."""
    from harness.data.datasets import shared_root

    return [store, REPO] + [p for p in (shared_root(),) if p.exists()]


def _isolated_store(directory: Path, store: Path | None) -> Path:
    """The one directory an isolated cluster's hosts share: HARNESS_STORE if set, else <directory>-store."""
    from harness.core import store as shared

    default = directory.parent / f"{directory.name}-store"
    configured = shared.configured()
    path = (shared.as_path(configured) if configured else default) if store is None else store
    path = Path(path).resolve()
    for name in PRIVATE_VIEWS:
        if path.is_relative_to((REPO / name).resolve()):
            raise DataError(
                f"cluster: the store {path} lies in the checkout's {name}/, which each host sees privately; "
                f"set {shared.SETTING} elsewhere"
            )
    path.mkdir(parents=True, exist_ok=True)
    return path


def _alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _tree(pids: list[int]) -> list:
    import psutil

    procs = []
    for pid in pids:
        try:
            root = psutil.Process(pid)
            procs += [root, *root.children(recursive=True)]
        except psutil.Error:
            pass
    return procs


def down(directory: Path = DEFAULT_DIR, timeout_s: float = 20.0) -> list[int]:
    """Stop the workers (and everything under them: executors, Python workers), then the master.
    Returns the pids that were still running and had to be stopped."""
    import psutil

    cluster = load(directory)
    if cluster is None:
        return []
    procs = _tree(cluster.pids)
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.send_signal(signal.SIGTERM)
    _, still = psutil.wait_procs(procs, timeout=timeout_s)
    for proc in still:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(still, timeout=5)
    for group in cluster.caps():
        group.remove()
    _state_file(directory).unlink(missing_ok=True)
    return [p.pid for p in procs]


def status(directory: Path = DEFAULT_DIR) -> str:
    cluster = load(directory)
    if cluster is None or not _alive(cluster.master_pid):
        return "cluster: not running"
    try:
        state = cluster.state()
    except OSError as exc:
        return f"cluster: master pid {cluster.master_pid} does not answer at {cluster.webui} ({exc})"
    workers = [f"{w['host']}:{w['port']} {w['state']} {w['cores']} cores" for w in state.get("workers", [])]
    shared = f"; isolated hosts sharing HARNESS_STORE={cluster.store}" if cluster.store else "; shared /tmp"
    return (
        f"cluster: {cluster.url} ({state.get('status')}), UI {cluster.webui}, "
        f"{len(workers)} workers: {'; '.join(workers)}; {len(cluster.executors())} executors running{shared}"
    )
