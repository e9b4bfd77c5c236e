"""A real Spark standalone cluster on 127.0.0.1 (master + 2 workers from the pyspark package): the
same workload gives the same counts there, losing an executor mid-query never gives a wrong count,
and stopping the cluster leaves no process behind. `make test-cluster` runs these (CI too); `make test`
leaves them out to stay within 15 minutes."""
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import networkx as nx
import pytest

from harness import cluster as standalone

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_block(size: int) -> int:
    """A first port such that `size` consecutive ports are free."""
    for _ in range(50):
        first = free_port()
        if all(standalone._port_free(first + i) for i in range(size)) and first + size < 65535:
            return first
    raise RuntimeError("no free block of ports")


def harness(*args, env=None, **kwargs):
    env = dict(os.environ, COLUMNS="200", **(env or {}))
    env.pop("SPARK_MASTER", None)
    return subprocess.Popen([sys.executable, "-m", "harness", *args], cwd=REPO, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **kwargs)


def tree_pids(c: standalone.Cluster) -> set[int]:
    return {p.pid for p in standalone._tree(c.pids)}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    directory = tmp_path_factory.mktemp("cluster")
    c = standalone.up(directory, workers=2, cores=1, memory="3g", port=free_port(), webui_port=free_block(3))
    seen: set[int] = set()
    yield c, seen
    seen |= tree_pids(c)
    stopped = standalone.down(directory)
    assert set(c.pids) <= set(stopped)
    time.sleep(1)
    strays = [pid for pid in seen if standalone._alive(pid)]
    assert strays == [], f"processes left behind: {strays}"
    assert standalone.load(directory) is None


def test_cluster_is_up_on_loopback(cluster):
    c, _ = cluster
    state = c.state()
    assert state["status"] == "ALIVE" and state["url"] == c.url
    assert [w["state"] for w in state["workers"]] == ["ALIVE", "ALIVE"]
    assert all(w["host"] == "127.0.0.1" and w["cores"] == 1 for w in state["workers"])
    with pytest.raises(Exception, match="already running"):
        standalone.up(Path(c.directory), port=c.port, webui_port=c.webui_port)


def test_same_workload_same_counts_on_the_cluster(cluster, runner, tmp_path):
    """`bench --master spark://...` (what `make bench SPARK_MASTER=...` runs) against the embedded session."""
    from harness.runner import RunRequest

    c, seen = cluster
    queries, impls = ["triangle", "a-b,b-c,c-d,d-a"], ["binary", "bigjoin"]
    workload = tmp_path / "mini.yaml"
    workload.write_text(f"name: mini\nqueries: [{queries[0]}, '{queries[1]}']\nsemantics: [undirected]\n"
                        f"datasets: [rmat-small]\nimplementations: [{', '.join(impls)}]\nworkers: [2]\noracle: auto\n")
    out = tmp_path / "cluster"
    proc = harness("bench", str(workload), "--master", c.url, "--results", str(out))
    log, _ = proc.communicate(timeout=600)
    seen |= tree_pids(c)
    assert proc.returncode == 0, log[-3000:]
    records = [json.loads(p.read_text()) for p in sorted(out.glob("*.json"))]
    assert len(records) == 4 and all(r["status"] == "OK" for r in records), [r.get("error") for r in records]
    assert {r["spark"]["master"] for r in records} == {c.url}
    on_cluster = {(r["query"]["pattern"], r["implementation"]): r["count"] for r in records}
    local = {}
    for q in queries:
        for impl in impls:
            r = runner.run(RunRequest(q, "rmat-small", impl, oracle="none"))
            local[(r["query"]["pattern"], r["implementation"])] = r["count"]
    assert on_cluster == local
    assert len(set(local.values())) == 2  # one count per query, across implementations


def busy_query_executor(ui: str) -> str | None:
    """The id of an executor running a task of one of BiGJoin's query jobs right now, if any; a task
    of a stage that is not its job's last is preferred (a later stage then needs the shuffle output
    that dies with it)."""
    with urllib.request.urlopen(f"{ui}/api/v1/applications", timeout=2) as resp:
        app = f"{ui}/api/v1/applications/{json.loads(resp.read())[0]['id']}"
    with urllib.request.urlopen(f"{app}/jobs?status=running", timeout=2) as resp:
        jobs = [j for j in json.loads(resp.read()) if str(j.get("jobGroup", "")).endswith(":query")]
    not_last = {s for j in jobs for s in j["stageIds"] if s != max(j["stageIds"])}
    stages = {s for j in jobs for s in j["stageIds"]}
    with urllib.request.urlopen(f"{app}/stages?status=active", timeout=2) as resp:
        active = sorted((s for s in json.loads(resp.read()) if s["stageId"] in stages),
                        key=lambda s: s["stageId"] not in not_last)
    for stage in active:
        with urllib.request.urlopen(f"{app}/stages/{stage['stageId']}/{stage['attemptId']}/taskList?status=running", timeout=2) as resp:
            for task in json.loads(resp.read()):
                if task.get("status") == "RUNNING":
                    return str(task["executorId"])
    return None


def test_losing_an_executor_during_bigjoin_never_gives_a_wrong_count(cluster, tmp_path):
    """SIGKILL the executor that is running a task of one of BiGJoin's batch jobs: Spark re-executes
    the lost tasks (and the stages whose shuffle output died with it) on a replacement executor. Every
    attempt must end OK with the right count, checked by the test's own networkx count and by the
    run's oracle; a run that ends EXE fails the test, with Spark's message. The UI can report a task
    as running after it has finished, so a kill may land between tasks: such an attempt is still
    checked, and the test retries (at most three attempts) until a kill has hit running work."""
    c, seen = cluster
    hits = []
    for attempt in range(3):
        metrics = _kill_an_executor_mid_query(c, seen, tmp_path / f"fault-{attempt}.json")
        if metrics["failed_tasks"] or metrics["stage_retries"]:
            hits.append(metrics)
            break
    assert hits, "no kill hit a running task or a shuffle output that was still needed in three attempts"


def _kill_an_executor_mid_query(c, seen: set, result) -> dict:
    ui_port = free_port()
    proc = harness("run", "--query", "triangle", "--dataset", "rmat-small", "--impl", "bigjoin", "--batch", "1500",
                   "--oracle", "duckdb", "--master", c.url, "--json", str(result), env={"HARNESS_UI_PORT": str(ui_port)})
    victim = None
    deadline = time.monotonic() + 300
    while victim is None and proc.poll() is None and time.monotonic() < deadline:
        try:
            busy = busy_query_executor(f"http://127.0.0.1:{ui_port}")
        except (OSError, ValueError, IndexError, KeyError):  # the UI is not up yet
            busy = None
        pid = c.executors().get(busy)
        if pid is not None:
            seen |= tree_pids(c)
            os.kill(pid, signal.SIGKILL)
            victim = (busy, pid)
        time.sleep(0.02)
    log, _ = proc.communicate(timeout=600)
    assert victim is not None, f"the query ended before an executor could be killed:\n{log[-2000:]}"
    record = json.loads(result.read_text())
    expected = sum(nx.triangles(nx.Graph(_edges(record))).values()) // 3
    metrics = record["metrics"]
    print(f"executor {victim} killed mid-query: status {record['status']}, count {record['count']} (networkx {expected}); "
          f"lost {metrics.get('executors_lost')}, {metrics.get('failed_tasks')} failed tasks, "
          f"{metrics.get('stage_retries')} stage retries; error {record.get('error')}")
    assert record["status"] == "OK", f"the run did not survive the lost executor: {record['status']} {record.get('error')}"
    assert proc.returncode == 0
    assert record["count"] == expected and record["oracle"]["agrees"] is True and record["verified"] is True
    assert metrics["executors_lost"], metrics  # the kill was seen by Spark during this run
    return metrics


def _edges(record: dict) -> list[tuple[int, int]]:
    import duckdb

    return duckdb.sql(f"SELECT src, dst FROM read_parquet('{record['dataset']['parquet']}/edges.parquet/*.parquet')").fetchall()
