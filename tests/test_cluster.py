"""A real multi-host Spark standalone cluster on this machine (issue 20): a master on 127.0.0.1 and two
workers on 127.0.0.2 and 127.0.0.3, each in its own mount namespace with a private /tmp and private
views of the checkout's .cache, .cluster and results/; only the store (HARNESS_STORE) is shared.

Everything runs there with every count checked by an oracle; losing an executor in the middle of a
query (or of an update batch) never gives a wrong count; a misconfigured store fails in one line; and
stopping the cluster leaves no process behind. `make test-cluster` runs these (CI too)."""

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections import defaultdict
from pathlib import Path

import pytest

from harness.spark import cluster as standalone
from harness.spark.cluster import free_block, free_port

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parent.parent


def tree_pids(c: standalone.Cluster) -> set[int]:
    return {p.pid for p in standalone._tree(c.pids)}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    directory = tmp_path_factory.mktemp("cluster")
    store = tmp_path_factory.mktemp("store")
    c = standalone.up(
        directory, workers=2, cores=1, memory="3g", port=free_port(), webui_port=free_block(3), isolated=True, store=store
    )
    seen: set[int] = set()
    yield c, seen
    seen |= tree_pids(c)
    stopped = standalone.down(directory)
    assert set(c.pids) <= set(stopped)
    time.sleep(1)
    strays = [pid for pid in seen if standalone._alive(pid)]
    assert strays == [], f"processes left behind: {strays}"
    assert standalone.load(directory) is None


def harness(c, *args, env=None, store: bool = True):
    """`python -m harness ...` against the cluster, with the cluster's store unless told otherwise."""
    base = {k: v for k, v in os.environ.items() if k not in ("SPARK_MASTER", "HARNESS_CACHE", "HARNESS_STORE")}
    env = dict(base, COLUMNS="200", **({"HARNESS_STORE": c.store} if store else {}), **(env or {}))
    return subprocess.Popen(
        [sys.executable, "-m", "harness", *args, "--master", c.url],
        cwd=REPO,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def finish(proc, c, seen, timeout=1800) -> str:
    log, _ = proc.communicate(timeout=timeout)
    seen |= tree_pids(c)
    return log


def records(directory: Path) -> list[dict]:
    return [r for r in (json.loads(p.read_text()) for p in sorted(directory.glob("*.json"))) if "implementation" in r]


def test_cluster_is_up_on_separate_loopback_hosts(cluster):
    c, _ = cluster
    state = c.state()
    assert state["status"] == "ALIVE" and state["url"] == c.url
    assert sorted(w["host"] for w in state["workers"]) == ["127.0.0.2", "127.0.0.3"] == c.worker_hosts
    assert all(w["state"] == "ALIVE" and w["cores"] == 1 for w in state["workers"])
    with pytest.raises(Exception, match="already running"):
        standalone.up(Path(c.directory), port=c.port, webui_port=c.webui_port)


PROBE = """
import os, sys, time
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master(sys.argv[1]).config("spark.driver.host", "127.0.0.1")
         .config("spark.driver.bindAddress", "127.0.0.1").config("spark.executor.memory", "1g").getOrCreate())
driver_file, store_file, cache = sys.argv[2:5]  # values: the executors' sys.argv is their own
def look(i):
    time.sleep(1.5)
    return (os.environ.get("SPARK_LOCAL_IP"), os.path.exists(driver_file), os.path.exists(store_file),
            tuple(os.listdir(cache)) if os.path.isdir(cache) else None)
print("SEEN", sorted(set(spark.sparkContext.parallelize(range(8), 8).map(look).collect())))
spark.stop()
"""


def test_hosts_share_nothing_but_the_store(cluster, tmp_path):
    """An executor sees neither the driver's /tmp nor the checkout's .cache, only the store."""
    c, seen = cluster
    driver_file = tmp_path / "driver-only"
    driver_file.write_text("x")
    store_file = Path(c.store) / "visible-everywhere"
    store_file.write_text("x")
    (REPO / ".cache").mkdir(exist_ok=True)
    marker = REPO / ".cache" / f"driver-only-{os.getpid()}"
    marker.write_text("x")
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    try:
        proc = subprocess.run(
            [sys.executable, str(script), c.url, str(driver_file), str(store_file), str(REPO / ".cache")],
            capture_output=True,
            text=True,
            timeout=300,
            env=dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable),
        )
    finally:
        marker.unlink()  # not left in the checkout's .cache, whatever the probe did
    seen |= tree_pids(c)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("SEEN")), None)
    assert line is not None, proc.stderr[-3000:]
    found = eval(line[5:])  # a list of tuples printed by the probe
    assert {host for host, *_ in found} == {"127.0.0.2", "127.0.0.3"}, found
    assert all(not driver and in_store for _, driver, in_store, _ in found), found
    # Its own view of .cache: empty but for the host's copy of the JVM archive (jvm_archive.share_with).
    assert all(set(cache) <= {"jvm"} for *_, cache in found), f"an executor saw the checkout's .cache: {found}"


def test_a_misconfigured_store_fails_in_one_line(cluster, tmp_path):
    c, seen = cluster
    out = tmp_path / "r.json"
    proc = harness(
        c, "run", "--query", "triangle", "--dataset", "rmat-small", "--impl", "bigjoin", "--json", str(out), store=False
    )
    log = finish(proc, c, seen, 300)
    assert proc.returncode == 2 and _complete_dat_or_none(out), log[-2000:]
    assert "error: HARNESS_STORE is not set" in log and "Traceback" not in log, log[-2000:]
    hidden = tmp_path / "driver-private-store"  # under the driver's /tmp, which no worker sees
    proc = harness(
        c,
        "run",
        "--query",
        "triangle",
        "--dataset",
        "rmat-small",
        "--impl",
        "bigjoin",
        "--json",
        str(out),
        env={"HARNESS_STORE": str(hidden)},
        store=False,
    )
    log = finish(proc, c, seen, 300)
    assert proc.returncode == 2 and _complete_dat_or_none(out), log[-2000:]
    assert f"error: HARNESS_STORE={hidden}: not visible from the executor" in log and "Traceback" not in log, log[-2000:]


def _complete_dat_or_none(path: Path) -> bool:
    """Bad input leaves no result file, or a complete one with status DAT naming the setting."""
    if not path.exists():
        return True
    record = json.loads(path.read_text())
    return record["status"] == "DAT" and "HARNESS_STORE" in record["error"] and record["count"] is None


def _same_and_verified(found: list[dict]) -> None:
    bad = [
        (r["implementation"], r["query"]["pattern"], r["status"], r.get("error"))
        for r in found
        if r["status"] != "OK" or r.get("verified") is not True
    ]
    assert bad == [], bad
    counts = defaultdict(set)
    for r in found:
        counts[(r["query"]["pattern"], r["semantics"], r["dataset"]["name"])].add(r["count"])
    assert all(len(v) == 1 for v in counts.values()), counts


def test_every_implementation_and_semantics_on_two_graphs(cluster, tmp_path):
    """workloads/cluster.yaml's quick tier: 6 implementations x 3 queries (3, 4 and 5 attributes) x 2
    semantics x 2 graphs, each count verified by an oracle that shares no code with the implementations.
    The default tier's 120 runs (every query) take CI's time: `bench cluster --master` runs them."""
    c, seen = cluster
    out = tmp_path / "all"
    log = finish(harness(c, "bench", "cluster", "--tier", "quick", "--results", str(out)), c, seen)
    found = records(out)
    assert len(found) == 72, log[-3000:]
    assert {r["spark"]["master"] for r in found} == {c.url}
    _same_and_verified(found)


def test_delta_bigjoin_under_an_update_stream(cluster, tmp_path):
    c, seen = cluster
    out = tmp_path / "updates"
    log = finish(harness(c, "bench", "cluster", "--tier", "updates", "--results", str(out)), c, seen)
    found = records(out)
    assert len(found) == 12, log[-3000:]  # 3 queries x 2 semantics x 2 graphs
    _same_and_verified(found)
    for r in found:
        batches = r["batches"]
        assert len(batches) == 2 and all(b["agrees"] is True for b in batches), (r["query"]["pattern"], batches)


def test_compare_and_the_gate_on_the_cluster(cluster, tmp_path):
    c, seen = cluster
    proc = harness(c, "compare", "--query", "triangle", "--dataset", "rmat-small", "--results", str(tmp_path / "cmp"))
    log = finish(proc, c, seen)
    assert proc.returncode == 0, log[-3000:]
    # Unpaired: the paired gate (the baseline's commit rerun beside this tree) is tests/test_gate_paired.py's.
    proc = harness(c, "gate", "--unpaired", "--results", str(tmp_path / "gate"))
    log = finish(proc, c, seen)
    assert proc.returncode == 0, log[-3000:]
    assert "gate: PASS" in log, log[-3000:]


def busy_executor(ui: str, group_suffix: str) -> str | None:
    """The id of an executor running a task of a job whose group ends with `group_suffix` (":query",
    ":updates") right now, if any; a task of a stage that is not its job's last is preferred (a later
    stage then needs the shuffle output that dies with it)."""
    with urllib.request.urlopen(f"{ui}/api/v1/applications", timeout=2) as resp:
        app = f"{ui}/api/v1/applications/{json.loads(resp.read())[0]['id']}"
    with urllib.request.urlopen(f"{app}/jobs?status=running", timeout=2) as resp:
        jobs = [j for j in json.loads(resp.read()) if str(j.get("jobGroup", "")).endswith(group_suffix)]
    not_last = {s for j in jobs for s in j["stageIds"] if s != max(j["stageIds"])}
    stages = {s for j in jobs for s in j["stageIds"]}
    with urllib.request.urlopen(f"{app}/stages?status=active", timeout=2) as resp:
        active = sorted(
            (s for s in json.loads(resp.read()) if s["stageId"] in stages), key=lambda s: s["stageId"] not in not_last
        )
    for stage in active:
        with urllib.request.urlopen(
            f"{app}/stages/{stage['stageId']}/{stage['attemptId']}/taskList?status=running", timeout=2
        ) as resp:
            for task in json.loads(resp.read()):
                if task.get("status") == "RUNNING":
                    return str(task["executorId"])
    return None


FAULTS = {  # implementation: (extra arguments, the job group to strike)
    "bigjoin": (["--batch", "1500"], ":query"),
    "bigjoin-s": (["--batch", "1500"], ":query"),
    "shares": (["--query", "clique4"], ":query"),
    "delta-bigjoin": (["--updates", "holdback=0.2,batch=400,batches=4,deletes=0.2,seed=1"], ":updates"),
}


@pytest.mark.parametrize("impl", list(FAULTS))
def test_losing_an_executor_mid_run_never_gives_a_wrong_count(cluster, tmp_path, impl):
    """SIGKILL the executor running a task of the query (delta-bigjoin: of an update batch): Spark
    re-executes the lost tasks, and the stages whose shuffle output died with it, on a replacement
    executor, which fills its local copies from the store. The run must end OK with the count its
    oracle gives; a run that ends EXE fails the test, with Spark's message. The UI can report a task
    as running after it has finished, so a kill may land between tasks: such an attempt is still
    checked, and the test retries (at most five attempts) until a kill has hit running work."""
    c, seen = cluster
    hits = []
    for attempt in range(5):
        metrics = _kill_an_executor_mid_run(c, seen, tmp_path / f"fault-{attempt}.json", impl)
        if metrics["failed_tasks"] or metrics["stage_retries"]:
            hits.append(metrics)
            break
    assert hits, "no kill hit a running task or a shuffle output that was still needed in five attempts"
    print(f"{impl}: recorded {hits[0]['failed_tasks']} failed tasks, {hits[0]['stage_retries']} stage retries")


def _kill_an_executor_mid_run(c, seen: set, result: Path, impl: str) -> dict:
    extra, group = FAULTS[impl]
    args = ["run", "--dataset", "rmat-small", "--impl", impl, "--json", str(result), *extra]
    if "--query" not in extra:
        args += ["--query", "triangle"]
    ui_port = free_port()
    proc = harness(c, *args, env={"HARNESS_UI_PORT": str(ui_port)})
    victim = None
    deadline = time.monotonic() + 300
    while victim is None and proc.poll() is None and time.monotonic() < deadline:
        try:
            busy = busy_executor(f"http://127.0.0.1:{ui_port}", group)
        except (OSError, ValueError, IndexError, KeyError):  # the UI is not up yet
            busy = None
        pid = c.executors().get(busy)
        if pid is not None:
            seen |= tree_pids(c)
            os.kill(pid, signal.SIGKILL)
            victim = (busy, pid)
        time.sleep(0.02)
    log = finish(proc, c, seen, 600)
    assert victim is not None, f"the run ended before an executor could be killed:\n{log[-2000:]}"
    record = json.loads(result.read_text())
    metrics = record["metrics"]
    print(
        f"{impl}: executor {victim} killed: status {record['status']}, count {record['count']}, oracle "
        f"{(record.get('oracle') or {}).get('name')} agrees {(record.get('oracle') or {}).get('agrees')}; lost "
        f"{metrics.get('executors_lost')}, {metrics.get('failed_tasks')} failed tasks, {metrics.get('stage_retries')} "
        f"stage retries; error {record.get('error')}"
    )
    assert record["status"] == "OK", f"the run did not survive the lost executor: {record['status']} {record.get('error')}"
    assert proc.returncode == 0
    assert record["verified"] is True and record["oracle"]["agrees"] is True
    if impl == "delta-bigjoin":
        assert all(b["agrees"] is True for b in record["batches"]), record["batches"]
    assert metrics["executors_lost"], metrics  # the kill was seen by Spark during this run
    return metrics
