"""A memory cap per worker (issue 39): enforced by a cgroup on worker processes the harness starts, a
run that exceeds it ends MEM (not EXE, not a hang) with the worker, the process and the phase, and a
cap large enough gives OK with the verified count. Refusals are one line, before Spark starts."""

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.bench import tables
from harness.bench.record import RunRecord
from harness.core.errors import DataError
from harness.spark import memory_cap

REPO = Path(__file__).resolve().parent.parent


def harness(*args, env=None, timeout=900):
    env = dict(os.environ, COLUMNS="200", **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "harness", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout
    )


def test_a_cap_is_a_size_an_executor_can_start_in():
    assert memory_cap.parse_cap("2g") == 2 << 30
    with pytest.raises(DataError, match="memory_per_worker: 'lots' is not a size"):
        memory_cap.parse_cap("lots", "memory_per_worker")
    with pytest.raises(DataError, match="below the smallest cap"):
        memory_cap.parse_cap("64m")
    assert memory_cap.executor_conf(2 << 30)["spark.executor.memory"] == "819m"  # HEAP_SHARE of the cap
    small = memory_cap.executor_conf(300 << 20)
    assert small["spark.executor.memory"] == "128m"  # the floor, with a quarter of it reserved, not 300 MiB
    assert int(small["spark.testing.reservedMemory"]) == 32 << 20


def test_a_capped_executor_gets_its_java_options_beside_the_session_s():
    from harness.spark import session as spark

    conf = memory_cap.executor_conf(512 << 20)
    options = spark._builder("spark://127.0.0.1:7077", 2, frozenset(), None, conf)._options["spark.executor.extraJavaOptions"]
    assert "log4j2.configurationFile" in options and options.endswith(conf["spark.executor.extraJavaOptions"])


def test_a_run_on_capped_workers_starts_without_the_python_workers_the_last_one_left():
    import psutil

    from harness.spark.capped_cluster import _stop_idle_python_workers

    # as on a capped worker: a shell for the executor, its Python daemon, and the worker the daemon forked
    code = "import os, signal, time\nsignal.signal(signal.SIGCHLD, lambda *_: os.waitpid(-1, 0))\nos.fork()\ntime.sleep(60)"
    executor = subprocess.Popen(["sh", "-c", f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}; true"])
    try:
        deadline = time.time() + 10
        tree = []
        while len(tree) < 2 and time.time() < deadline:
            tree = psutil.Process(executor.pid).children(recursive=True)
            time.sleep(0.05)
        daemon = psutil.Process(executor.pid).children()[0]
        (worker,) = daemon.children()
        _stop_idle_python_workers([executor.pid, daemon.pid, worker.pid])
        assert not psutil.pid_exists(worker.pid) or worker.status() == psutil.STATUS_ZOMBIE
        assert daemon.is_running() and executor.poll() is None  # the daemon stays, to fork fresh workers
    finally:
        for process in psutil.Process(executor.pid).children(recursive=True):
            process.kill()
        executor.kill()
        executor.wait()


def test_the_grid_has_a_row_per_implementation_and_W_and_a_column_per_cap_largest_first():
    def record(impl, workers, cap, cap_bytes, status, peaks):
        return RunRecord.from_json(
            {
                "implementation": impl,
                "status": status,
                "params": {"workers": workers, "memory_per_worker": cap},
                "query": {"name": "clique4"},
                "dataset": {"name": "g"},
                "metrics": {"memory_cap": {"cap_bytes": cap_bytes, "peak_per_worker_bytes": peaks}},
            }
        )

    records = [
        record("shares", 2, "1g", 1 << 30, "MEM", [1 << 30, 1 << 29]),
        record("shares", 2, "4g", 4 << 30, "OK", [3 << 29, 1 << 30]),
        record("bigjoin", 4, "1g", 1 << 30, "OK", [700 << 20, 1 << 29]),
        RunRecord.from_json({"implementation": "bigjoin", "status": "OK", "params": {"workers": 2}, "metrics": {}}),  # not capped
    ]
    caps, grid = tables.memory_grid(records)
    assert caps == ["4g", "1g"]
    assert grid == {
        ("clique4 on g", "shares", 2): {"1g": "MEM", "4g": "OK 1.5 GiB"},
        ("clique4 on g", "bigjoin", 4): {"1g": "OK 700 MiB"},
    }


def test_the_capacity_rows_put_each_run_s_resources_beside_what_the_workload_expects():
    def record(impl, status, mem_expected, logical, count=None):
        return RunRecord.from_json(
            {
                "implementation": impl,
                "status": status,
                "mem_expected": mem_expected,
                "count": count,
                "params": {"workers": 8, "memory_per_worker": "1g"},
                "query": {"name": "triangle"},
                "dataset": {"name": "g"},
                "logical": logical,
                "metrics": {
                    "shuffle_bytes": 5 << 20,
                    "spill_bytes": 0,
                    "memory_cap": {
                        "resident_peak_per_worker_bytes": [600 << 20, 700 << 20],
                        "model": {"predicted_bytes": 90 << 20},
                    },
                },
            }
        )

    bigjoin = {"index": {"bytes_per_worker": [80 << 20, 81 << 20]}, "prefixes_per_level": {"1": 400, "2": 1000}}
    records = [
        record("bigjoin", "OK", False, bigjoin, count=100),
        record("replicated", "MEM", True, {}),
        record("shares", "OK", True, {"max_cell_load": 1 << 20}, count=100),  # the workload expected MEM
        record("binary", "MEM", False, {}),  # and OK
    ]
    timed_out = record("binary", "TIM", True, {})
    timed_out.timeout_expected = True
    assert (
        tables.capacity_rows([timed_out])[0]["expected"] == "MEM or TIM" and tables.capacity_rows([timed_out])[0]["as_expected"]
    )
    rows = {x["implementation"]: x for x in tables.capacity_rows(records)}
    assert rows["bigjoin"]["index_share_bytes"] == 81 << 20 and rows["bigjoin"]["largest_over_output"] == 10.0
    assert rows["bigjoin"]["peak_bytes"] == 700 << 20 and rows["bigjoin"]["predicted_bytes"] == 90 << 20
    assert rows["shares"]["index_share_bytes"] == 16 << 20  # its cell's tuples, 16 bytes each
    assert {i: (x["expected"], x["as_expected"]) for i, x in rows.items()} == {
        "bigjoin": ("OK", True),
        "replicated": ("MEM", True),
        "shares": ("MEM", False),
        "binary": ("OK", False),
    }
    lines = tables.unexpected_capacity_lines(records)
    assert lines == [
        "not as expected: shares ended OK on triangle on g at W=8 under 1g per worker, where the workload expects MEM",
        "not as expected: binary ended MEM on triangle on g at W=8 under 1g per worker, where the workload expects OK",
    ]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--impl", "local-gj"], "memory_per_worker: local-gj computes in the driver"),
        (["--impl", "binary", "--master", "spark://127.0.0.1:1"], "memory_per_worker: spark://127.0.0.1:1 is not a cluster this"),
    ],
)
def test_a_cap_that_could_not_bind_is_refused_in_one_line(tmp_path, args, message):
    out = tmp_path / "r.json"
    proc = harness(
        "run", "--query", "triangle", "--dataset", "rmat-small", "--memory-per-worker", "1g", *args, "--json", str(out)
    )
    assert proc.returncode == 2
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and message in errors[0]
    assert json.loads(out.read_text())["status"] == "DAT"


needs_cgroup = pytest.mark.skipif(memory_cap.problem() is not None, reason="no writable memory cgroup (needs root)")


def capped_bench(tmp_path, yaml_text: str) -> tuple[subprocess.CompletedProcess, dict]:
    """Run a workload; its records by (implementation, cap), and check that the workers are gone."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    workload = tmp_path / "capped.yaml"
    workload.write_text(yaml_text)
    parent = memory_cap._parent()
    assert parent is not None
    others = set(parent[0].glob("harness-*-w*"))  # another harness's on this machine, not this bench's
    proc = harness("bench", str(workload), "--results", str(tmp_path / "out"))
    runs = [json.loads(p.read_text()) for p in sorted((tmp_path / "out").glob("*.json"))]
    assert set(parent[0].glob("harness-*-w*")) <= others  # every cgroup of this bench removed
    return proc, {(r["implementation"], r["params"]["memory_per_worker"]): r for r in runs if "implementation" in r}


def assert_mem(record: dict, cap: str, phases: tuple[str, ...]) -> None:
    assert record["status"] == "MEM", (record["status"], record["error"])
    assert f"exceeded its memory cap of {cap}" in record["error"] and record["count"] is None
    assert record["memory_cap_hit"]["phase"] in phases and record["memory_cap_hit"]["killed"]


@needs_cgroup
# A capped cluster's start, about 30 s, so CI runs it in make test-thorough; make test keeps the workers' restart
# rule (test_a_run_on_capped_workers_starts_without_the_python_workers_the_last_one_left).
@pytest.mark.thorough
def test_too_small_a_cap_ends_MEM_in_start_up_expected_by_the_workload(tmp_path):
    proc, by = capped_bench(
        tmp_path,
        "queries: [triangle]\ndatasets: [rmat-small]\nimplementations: [shares, binary]\nparams: {memory_per_worker: 300m}\n"
        "expected_mem: [shares, binary]\n",
    )
    assert set(by) == {("shares", "300m"), ("binary", "300m")}, proc.stdout + proc.stderr
    for impl in ("shares", "binary"):  # Spark's executor and a Python worker need more
        assert_mem(by[(impl, "300m")], "300.0 MiB", ("start-up",))
        assert by[(impl, "300m")]["mem_expected"]
    # binary's run did not start the workers that were killed as they started for shares' run
    assert "not started again" in by[("binary", "300m")]["error"] and "not started again" not in by[("shares", "300m")]["error"]
    assert "MEM shares triangle on rmat-small: worker" in proc.stderr and "(expected by the workload)" in proc.stderr
    assert proc.returncode == 0
    grid = proc.stdout[proc.stdout.index("who finishes under a memory cap") :].splitlines()
    assert any("triangle on rmat-small" in line and "binary" in line and "MEM" in line for line in grid)


@needs_cgroup
def test_replicated_ends_MEM_where_a_worker_cannot_hold_the_whole_graph(tmp_path):
    # make test's one capped start (issue 60: at most 30 s more): one worker, capped at 512m, about 430
    # MiB of it idle; replicated's task reads the whole edge list of rmat-16 and builds the index of it
    proc, by = capped_bench(
        tmp_path,
        "queries: [triangle]\ndatasets: [rmat-16]\nimplementations: [replicated]\nworkers: [1]\n"
        "params: {memory_per_worker: 512m}\nexpected_mem: [replicated]\n",
    )
    assert set(by) == {("replicated", "512m")}, proc.stdout + proc.stderr
    assert_mem(by[("replicated", "512m")], "512.0 MiB", ("index", "query"))
    assert by[("replicated", "512m")]["mem_expected"] and proc.returncode == 0, proc.stderr


@needs_cgroup
@pytest.mark.cluster
def test_a_cap_is_hit_mid_query_and_a_large_one_gives_OK_with_the_same_count(tmp_path):
    # Shares' cells on rmat-16, in Python: about 380 MiB above an idle worker of about 430 MiB, so
    # 512m is clearly too small (on rmat-small, 512m was a coin toss between MEM and the page cache)
    proc, by = capped_bench(
        tmp_path / "small",
        "queries: [triangle]\ndatasets: [rmat-16]\nimplementations: [shares]\nparams: {memory_per_worker: 512m}\n",
    )
    assert set(by) == {("shares", "512m")}, proc.stdout + proc.stderr
    assert_mem(by[("shares", "512m")], "512.0 MiB", ("index", "query"))
    assert "ERROR Transport" not in proc.stderr  # the driver's echoes of the kill: the run says MEM
    assert proc.returncode != 0  # a MEM the workload did not expect
    proc, by = capped_bench(
        tmp_path / "large",
        "queries: [clique4]\ndatasets: [rmat-small]\nimplementations: [shares, binary]\nparams: {memory_per_worker: 3g}\n",
    )
    assert set(by) == {("shares", "3g"), ("binary", "3g")} and proc.returncode == 0, proc.stdout + proc.stderr
    for impl in ("binary", "shares"):
        large = by[(impl, "3g")]
        assert large["status"] == "OK" and large["verified"], (large["status"], large["error"])
        cap = large["metrics"]["memory_cap"]
        assert cap["cap_bytes"] == 3 << 30 and len(cap["peak_per_worker_bytes"]) == 2
        assert 0 < max(cap["peak_per_worker_bytes"]) <= 3 << 30
        grown = cap["executor_jvm_growth_per_worker_bytes"]  # the executor JVMs, sampled through the run
        assert len(grown) == 2 and max(grown) > 0 and min(grown) >= 0 and max(grown) < max(cap["resident_peak_per_worker_bytes"])
    assert by[("binary", "3g")]["count"] == by[("shares", "3g")]["count"]
    binary = by[("binary", "3g")]
    # binary's intermediates, from Spark's executed plan: the largest outgrows the input (clique4)
    assert binary["logical"]["largest_intermediate_rows"] > binary["dataset"]["edges"]
    assert binary["logical"]["join_output_rows"][-1] >= binary["count"]  # the last join, before any filter
    model = binary["metrics"]["memory_cap"]["model"]
    assert model["predicted_from"] == "largest intermediate / W" and model["measured_bytes"] > 0


@needs_cgroup
@pytest.mark.cluster
def test_a_capped_isolated_cluster_runs_capped_and_ends_MEM_there(tmp_path):
    from harness.spark import cluster as standalone
    from harness.spark.cluster import free_block, free_port

    directory, store = tmp_path / "cluster", tmp_path / "store"
    c = standalone.up(directory, 2, 1, "1g", free_port(), free_block(3), isolated=True, store=store, cap_bytes=512 << 20)
    try:
        env = {"HARNESS_STORE": str(store), "HARNESS_CLUSTER_DIR": str(directory)}  # run finds this cluster
        runs = {}
        for impl, cap, query, dataset in (
            ("shares", "512m", "triangle", "rmat-16"),  # clearly too small a cap for its cells
            ("binary", "512m", "clique4", "rmat-small"),
            ("binary", "1g", "clique4", "rmat-small"),
        ):
            out = tmp_path / f"{impl}-{cap}.json"
            args = ["--query", query, "--dataset", dataset, "--master", c.url, "--impl", impl, "--memory-per-worker", cap]
            proc = harness("run", *args, "--json", str(out), env=env)
            runs[(impl, cap)] = (proc, json.loads(out.read_text()))
    finally:
        standalone.down(directory)
    assert_mem(runs[("shares", "512m")][1], "512.0 MiB", ("index", "query"))
    binary = runs[("binary", "512m")][1]
    assert binary["status"] == "OK" and binary["verified"] and binary["spark"]["master"] == c.url
    assert len(binary["metrics"]["memory_cap"]["peak_per_worker_bytes"]) == 2
    refused, record = runs[("binary", "1g")]
    assert (
        refused.returncode == 2 and record["status"] == "DAT" and "caps its workers at 512.0 MiB, not 1.0 GiB" in record["error"]
    )
    assert not [g for g in c.cgroups if Path(g).exists()]


def test_an_executor_s_growth_counts_its_jvm_and_not_its_python(tmp_path):
    """What a capped worker's executor JVM grew is read from the JVM alone (its Python workers
    allocate the budget's copies themselves): a real JVM that grows 48 MiB, beside a real Python process."""
    import psutil

    from harness.core.check_java import java_binary
    from harness.spark.capped_cluster import _jvm_processes, _rss

    source = tmp_path / "Hold.java"
    grow = "byte[] b = new byte[48 << 20]; java.util.Arrays.fill(b, (byte) 1); new java.io.File(a[0]).createNewFile();"
    source.write_text(
        f"class Hold {{ public static void main(String[] a) throws Exception {{ Thread.sleep(1500); {grow} Thread.sleep(60000); }} }}"
    )
    grown = tmp_path / "grown"
    java = subprocess.Popen([java_binary() or "java", "-Xmx128m", "-Xms16m", str(source), str(grown)])
    python = subprocess.Popen([sys.executable, "-c", "import time; b = bytearray(64 << 20); time.sleep(60)"])
    try:
        time.sleep(1)
        jvms = _jvm_processes([java.pid, python.pid])
        before = _rss(jvms)
        deadline = time.monotonic() + 30
        while not grown.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert grown.exists(), "the JVM did not allocate in 30 s"
        jvm, alone = _rss(_jvm_processes([java.pid, python.pid])), psutil.Process(java.pid).memory_info().rss
        assert [p.pid for p in jvms] == [java.pid] and _rss(_jvm_processes([python.pid])) == 0
        assert abs(jvm - alone) < 8 << 20, (jvm, alone)  # the JVM's own, not the 64 MiB of Python beside it
        assert _rss(jvms) - before > 40 << 20, (before, _rss(jvms))  # its 48 MiB array, seen through the processes begin keeps
    finally:
        for process in (java, python):
            process.kill()
            process.wait()


def test_an_executor_lost_to_its_heap_makes_a_capped_run_MEM():
    # Shares at W = 4 under 1280m (results/runs/20261208T002003Z-3f4522-capacity): every executor exited
    # with Spark's OutOfMemoryError code while the driver waited on a collect's socket, and the error
    # it got named neither; the lost executors' reasons are what say MEM.
    from harness.bench.runner import lost_to_a_heap

    assert lost_to_a_heap({"executors_lost": ["0: Command exited with code 52", "1: Command exited with code 52"]})
    assert not lost_to_a_heap({"executors_lost": ["3: Command exited with code 137", "4: worker lost"]})
    assert not lost_to_a_heap({"executors_lost": []}) and not lost_to_a_heap({})
    assert not lost_to_a_heap({"executors_lost": ["5: Command exited with code 520"]})
