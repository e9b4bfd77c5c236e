"""A Spark standalone cluster on this machine: one master and N workers on 127.0.0.1, run from the
Spark distribution inside the pyspark package (`bin/spark-class ...deploy.master.Master` / `...Worker`).

State (pids, URLs, logs, the workers' work directories) lives in one directory (default .cluster/),
so `down` stops exactly what `up` started, executors and their Python workers included."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import check_java
from .errors import DataError, ExecutionError
from .results import write_json_atomic

REPO = Path(__file__).resolve().parent.parent
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

    @property
    def url(self) -> str:
        return f"spark://{HOST}:{self.port}"

    @property
    def webui(self) -> str:
        return f"http://{HOST}:{self.webui_port}"

    @property
    def pids(self) -> list[int]:
        return [*self.worker_pids, self.master_pid]

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
                for child in psutil.Process(pid).children():
                    args = child.cmdline()
                    if "org.apache.spark.executor.CoarseGrainedExecutorBackend" in args and "--executor-id" in args:
                        found[args[args.index("--executor-id") + 1]] = child.pid
            except psutil.Error:
                pass
        return found


def _state_file(directory: Path) -> Path:
    return directory / "cluster.json"


def _save(cluster: Cluster) -> None:
    write_json_atomic(_state_file(Path(cluster.directory)), asdict(cluster))


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


def _env(directory: Path) -> dict:
    env = dict(os.environ, SPARK_HOME=str(spark_home()), SPARK_LOCAL_IP=HOST, SPARK_LOG_DIR=str(directory / "logs"),
               SPARK_NO_DAEMONIZE="1")
    env.pop("SPARK_MASTER", None)
    return env


def _spawn(directory: Path, name: str, args: list[str]) -> int:
    log = open(directory / "logs" / f"{name}.log", "ab")
    proc = subprocess.Popen([str(spark_home() / "bin" / "spark-class"), *args], stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, env=_env(directory), start_new_session=True)
    log.close()
    return proc.pid


def _wait(what: str, ready, timeout_s: float, logs: Path):
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        try:
            if ready():
                return
        except OSError as exc:
            last = exc
        time.sleep(0.3)
    raise ExecutionError(f"cluster: {what} not ready after {timeout_s:g} s ({last or 'timed out'}); see {logs}")


def up(directory: Path = DEFAULT_DIR, workers: int = 2, cores: int = 1, memory: str = "6g", port: int = 7077,
       webui_port: int = 8080, timeout_s: float = 60.0) -> Cluster:
    """Start a master and `workers` workers (each offering `cores` cores and `memory`) and wait until
    the master lists every worker ALIVE."""
    msg = check_java.problem()
    if msg:
        raise ExecutionError(msg)
    running = load(directory)
    if running is not None and any(_alive(pid) for pid in running.pids):
        raise DataError(f"cluster: already running at {running.url} (state in {_state_file(directory)}); `make cluster-down` first")
    busy = [p for p in (port, webui_port, *[webui_port + 1 + i for i in range(workers)]) if not _port_free(p)]
    if busy:
        raise DataError(f"cluster: port {busy[0]} on {HOST} is in use; pick other ports (--port / --webui-port)")
    (directory / "logs").mkdir(parents=True, exist_ok=True)
    master_pid = _spawn(directory, "master", ["org.apache.spark.deploy.master.Master", "--host", HOST,
                                               "--port", str(port), "--webui-port", str(webui_port)])
    cluster = Cluster(str(directory), port, webui_port, master_pid)
    _save(cluster)
    try:
        _wait("master", lambda: cluster.state().get("status") == "ALIVE", timeout_s, directory / "logs")
        for i in range(workers):
            work = directory / "work" / f"worker-{i}"
            work.mkdir(parents=True, exist_ok=True)
            cluster.worker_pids.append(_spawn(directory, f"worker-{i}", [
                "org.apache.spark.deploy.worker.Worker", "--host", HOST, "--webui-port", str(webui_port + 1 + i),
                "--cores", str(cores), "--memory", memory, "--work-dir", str(work), cluster.url]))
            _save(cluster)
        alive = lambda: sum(w.get("state") == "ALIVE" for w in cluster.state().get("workers", [])) >= workers  # noqa: E731
        _wait(f"{workers} workers", alive, timeout_s, directory / "logs")
    except BaseException:
        down(directory)
        raise
    return cluster


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
        try:
            proc.send_signal(signal.SIGTERM)
        except psutil.Error:
            pass
    _, still = psutil.wait_procs(procs, timeout=timeout_s)
    for proc in still:
        try:
            proc.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(still, timeout=5)
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
    return (f"cluster: {cluster.url} ({state.get('status')}), UI {cluster.webui}, "
            f"{len(workers)} workers: {'; '.join(workers)}; {len(cluster.executors())} executors running")
