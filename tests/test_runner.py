"""The run lifecycle: Spark-measured counters, memory inside the run's window, published counts,
statuses OK / UNVERIFIED / VAL / TIM / DAT and the exit codes they give, and oracles that are skipped
or time out never counting as a pass."""

import gzip
import json
from dataclasses import replace

import pytest

import implementations
from harness.bench.runner import RunRequest
from harness.core.results import passes
from implementations.binary import BinaryJoin

REQUIRED_KEYS = {
    "schema_version",
    "run_id",
    "timestamp",
    "git",
    "machine",
    "workload",
    "query",
    "semantics",
    "dataset",
    "implementation",
    "params",
    "status",
    "count",
    "oracle",
    "metrics",
}
METRIC_KEYS = {
    "load_s",
    "index_s",
    "query_s",
    "wall_s",
    "graphalytics",
    "shuffle_records",
    "shuffle_bytes",
    "rounds",
    "max_task_records",
    "mean_task_records",
    "peak_exec_memory_bytes",
    "spill_bytes",
    "per_round",
}


def test_ego_facebook_triangles_equal_published_and_duckdb(runner, shared_datasets):
    record = runner.run(RunRequest("triangle", "ego-Facebook", "binary", oracle="duckdb"))
    assert record.status == "OK", record.error
    assert record.count == 1_612_010
    checks = {c["name"]: c for c in record.checks}
    assert checks["published"]["agrees"] and checks["published"]["count"] == 1_612_010
    assert checks["duckdb"]["agrees"] and checks["duckdb"]["count"] == 1_612_010
    assert record.verified is True


def test_record_schema_and_spark_counters(runner):
    record = runner.run(RunRequest("diamond", "rmat:scale=9,ef=8,seed=5", "binary", workers=3, oracle="duckdb"))
    assert record.status == "OK", record.error
    assert set(record.to_json()) >= REQUIRED_KEYS and set(record.metrics) >= METRIC_KEYS
    m = record.metrics
    assert record.params["workers"] == 3
    assert m["shuffle_records"] > 0 and m["shuffle_bytes"] > 0
    assert m["rounds"] == len(m["per_round"]) >= 4  # three joins and the count's exchange
    big = [r for r in m["per_round"] if r["tasks"] > 1]
    assert big and all(r["tasks"] == 3 for r in big)  # one task per logical worker
    assert all(r["max_task_records"] >= r["mean_task_records"] for r in m["per_round"])
    assert sum(r["records"] for r in m["per_round"]) == m["shuffle_read_records"]
    assert m["max_task_records"] == max(r["max_task_records"] for r in m["per_round"])
    assert m["wall_s"] >= m["query_s"] and m["peak_exec_memory_bytes"] > 0
    g = m["graphalytics"]  # LDBC Graphalytics' three times, by their names, in seconds
    assert g["load_time"] == m["load_s"] and g["processing_time"] == round(m["index_s"] + m["query_s"], 4)
    assert g["makespan"] == round(m.get("session_start_s", 0.0) + m["wall_s"], 4) >= g["processing_time"]
    ds = record.dataset
    assert ds["edges"] > 0 and ds["vertices"] > 0 and len(ds["sha256"]) == 64
    t = m["time_breakdown"]["query"]  # units: Spark's CPU and shuffle-write times are ns, the rest ms
    assert t["wall_s"] == m["query_s"] and 0 < t["critical_path_s"] <= t["wall_s"]
    assert abs(t["critical_path_s"] + t["scheduling_s"] - t["wall_s"]) < 1e-3
    assert 0 < t["executor_cpu_s"] <= t["executor_run_s"] * 1.05 + 0.05
    assert 0 < t["shuffle_write_s"] <= t["executor_run_s"] + 0.05 and t["stages"] >= m["rounds"]
    # conftest's HARNESS_JVM_QUICK=1: the record says C1 alone, and the driver's JVM was started so
    assert record.spark["jit"] == "C1 only (HARNESS_JVM_QUICK=1)"
    jvm = runner.spark.sparkContext._jvm
    assert "-XX:TieredStopAtLevel=1" in str(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())


def test_spark_floor_repeats_the_phase_shape_with_empty_jobs(runner):
    """spark_floor times empty jobs with the stages of each job of the run's phase, W tasks each."""
    record = runner.run(
        RunRequest(
            "triangle",
            "rmat:scale=8,ef=6,seed=3",
            "bigjoin",
            oracle="networkx",
            spark_floor=True,
            params={"index_build": "spark"},
        )
    )
    assert record.status == "OK", record.error
    m = record.metrics
    for phase in ("index", "query"):
        shape = m["spark_stages_per_job"][phase]
        assert shape and all(n >= 1 for n in shape)
        floor = runner._counters.collect([f"{record.run_id}:floor-{phase}"])
        assert floor["spark_stages_per_job"][f"floor-{phase}"] == shape
        assert m["time_breakdown"][phase]["spark_floor_s"] > 0
    assert sum(m["time_breakdown"]["query"]["python_task_s"].values()) > 0


class _OffByOne(BinaryJoin):
    """A deliberately wrong implementation: the verification must catch it."""

    name = "off-by-one"

    def count(self):
        out = super().count()
        out.count += 1
        return out

    def matches(self, limit):
        return super().matches(limit)[1:]


class _BrokenWorker(BinaryJoin):
    """An implementation whose Python worker raises: the run's one-line error must say what it raised."""

    name = "broken-worker"

    def count(self):
        self.ctx.spark.range(2, numPartitions=1).mapInArrow(_raise, "id long").collect()
        return super().count()


def _raise(batches):
    raise ValueError("the kernel broke")
    yield from batches


def test_a_worker_s_exception_is_the_EXE_line_not_py4j_s(runner, monkeypatch):
    monkeypatch.setitem(implementations.REGISTRY, "broken-worker", _BrokenWorker)
    record = runner.run(RunRequest("triangle", "rmat-small", "broken-worker"))
    assert record.status == "EXE" and record.count is None
    assert record.error.endswith("Python worker: ValueError: the kernel broke"), record.error


def test_wrong_count_is_VAL_with_counterexamples(runner, monkeypatch):
    monkeypatch.setitem(implementations.REGISTRY, "off-by-one", _OffByOne)
    record = runner.run(RunRequest("triangle", "rmat:scale=6,ef=4,seed=2", "off-by-one", oracle="networkx"))
    assert record.status == "VAL" and record.verified is False
    check = record.checks[0]
    assert check["agrees"] is False and check["counterexamples"][0]["kind"] == "missing"


def test_oracle_timeout_is_UNVERIFIED_with_the_reason(runner):
    record = runner.run(RunRequest("clique4", "rmat:scale=11,ef=16,seed=3", "binary", oracle="duckdb", oracle_timeout_s=0.05))
    assert record.status == "UNVERIFIED" and record.verified is False and not passes(record)
    assert record.oracle["status"] == "timeout" and record.oracle["agrees"] is None
    assert record.unverified_reason.startswith("duckdb timeout: no answer within 0.05 s")
    assert passes(replace(record, allow_unverified=True))  # the user may accept it; it stays UNVERIFIED


def test_oracle_none_is_UNVERIFIED_not_passed(runner):
    record = runner.run(RunRequest("triangle", "rmat-small", "binary", oracle="none"))
    assert record.status == "UNVERIFIED" and record.verified is False
    assert record.oracle["status"] == "skipped" and record.unverified_reason == "--oracle none: no independent check was run"


def test_implementation_timeout_is_TIM_and_session_survives(runner):
    record = runner.run(RunRequest("clique5", "rmat:scale=13,ef=16,seed=4", "binary", timeout_s=1.0, oracle="none"))
    assert record.status == "TIM", record.error
    assert "timed out" in record.error and record.count is None and not passes(record)
    assert passes(replace(record, timeout_expected=True))
    after = runner.run(RunRequest("triangle", "rmat-small", "binary"))
    assert after.status == "OK" and after.verified and after.oracle["name"] == "native"


def test_local_gj_stops_at_its_deadline(runner):
    """The driver-side kernel releases the GIL and runs in slices that check the run's cancel flag:
    a timed-out local-gj stops (house on this graph needs minutes) instead of running on."""
    record = runner.run(RunRequest("house", "rmat:scale=13,ef=16,seed=4", "local-gj", timeout_s=1.0, oracle="none"))
    assert record.status == "TIM", record.error
    assert "timed out" in record.error and "still running" not in record.error
    assert record.metrics["memory"]["samples"] >= 5  # the sampler ran beside the kernel


@pytest.mark.parametrize(
    "request_kwargs,message",
    [
        (dict(query="nope"), "unknown query"),
        (dict(impl="nope"), "unknown implementation"),
        (dict(dataset="nope"), "unknown dataset"),
        (dict(query="a-b,c-d"), "disconnected"),
        (dict(oracle="sql"), "unknown oracle"),
    ],
)
def test_bad_input_is_DAT(runner, request_kwargs, message):
    args = {**dict(query="triangle", dataset="rmat-small", impl="binary"), **request_kwargs}
    record = runner.run(RunRequest(**args))
    assert record.status == "DAT" and message in record.error
    assert set(record.to_json()) >= REQUIRED_KEYS


def test_oracle_published_without_a_published_count_is_UNVERIFIED(runner):
    record = runner.run(RunRequest("triangle", "rmat-small", "binary", oracle="published"))
    assert record.status == "UNVERIFIED" and record.verified is False
    assert record.oracle["status"] == "skipped" and "no published count" in record.oracle["reason"]


@pytest.mark.parametrize("impl", sorted(implementations.REGISTRY))
def test_every_implementation_rejects_a_disconnected_pattern(runner, impl):
    record = runner.run(RunRequest("a-b,b-c,d-e", "rmat-small", impl))
    assert record.status == "DAT" and record.count is None
    assert record.error == (
        "query a-b,b-c,d-e: pattern is disconnected ({a,b,c} and {d,e}); no implementation "
        "counts a disconnected pattern: count each connected part as a query of its own"
    )


class _Hungry(BinaryJoin):
    """Allocates (and touches) 400 MiB on the driver while it builds its index, then frees it."""

    name = "hungry"

    def prepare(self):
        import numpy as np

        block = np.ones(400 << 20, dtype=np.uint8)
        block[::4096] = 2
        del block


def test_memory_is_measured_inside_the_run(runner, monkeypatch):
    """The driver's processes are sampled during the run only: a run that holds 400 MiB on the driver
    shows it in its own peak; Spark's per-stage peaks give the executors'; the application-lifetime
    heap is labelled as such."""
    monkeypatch.setitem(implementations.REGISTRY, "hungry", _Hungry)
    record = runner.run(RunRequest("triangle", "rmat-small", "hungry"))
    assert record.status == "OK", record.error
    memory = record.metrics["memory"]
    assert memory["samples"] >= 1 and memory["driver_jvm_sampled"] and memory["driver_jvm_rss_peak_bytes"] > 0
    assert memory["driver_python_rss_peak_bytes"] - memory["driver_python_rss_start_bytes"] >= 350 << 20
    assert memory["machine_used_peak_bytes"] >= memory["driver_python_rss_peak_bytes"]
    m = record.metrics
    assert "executor_peak_rss_bytes" in m and "application_driver_peak_jvm_heap_bytes" in m
    assert "driver_peak_jvm_heap_bytes" not in m
    plain = runner.run(RunRequest("triangle", "rmat-small", "binary"))  # the next run does not inherit that peak
    assert plain.metrics["memory"]["driver_python_rss_peak_bytes"] < memory["driver_python_rss_peak_bytes"] - (200 << 20)


def test_exit_codes_follow_statuses_and_allow_unverified(runner, tmp_path):
    from harness import cli

    args = ["run", "--query", "triangle", "--dataset", "rmat-small", "--impl", "binary", "--oracle", "none"]
    assert cli.main([*args, "--json", str(tmp_path / "a.json")]) == 2
    assert cli.main([*args, "--allow-unverified", "--json", str(tmp_path / "b.json")]) == 0
    allowed = json.loads((tmp_path / "b.json").read_text())
    assert allowed["status"] == "UNVERIFIED" and allowed["allow_unverified"] is True
    workload = tmp_path / "w.yaml"
    workload.write_text("name: w\nqueries: [triangle]\ndatasets: [rmat-small]\nimplementations: [binary]\noracle: none\n")
    assert cli.main(["bench", str(workload), "--results", str(tmp_path / "r1")]) == 2
    workload.write_text(workload.read_text() + "allow_unverified: true\n")
    assert cli.main(["bench", str(workload), "--results", str(tmp_path / "r2")]) == 0
    [record] = [json.loads(p.read_text()) for p in (tmp_path / "r2").glob("*.json")]
    assert record["status"] == "UNVERIFIED" and record["allow_unverified"]


def test_bench_from_runs_the_real_graph_in_place_of_its_twin_and_checks_the_published_count(runner, tmp_path, monkeypatch):
    """`bench --from FILE` reads FILE as soc-LiveJournal1 (lj-twin's real graph) and checks the count
    against LiveJournal's published one: a stand-in file is caught as VAL, with nothing faked."""
    from harness import cli

    monkeypatch.setenv("HARNESS_DATA", str(tmp_path / "data"))
    standin = tmp_path / "soc-LiveJournal1.txt.gz"
    standin.write_bytes(gzip.compress(b"# a stand-in, not LiveJournal\n0\t1\n1\t2\n2\t0\n2\t3\n"))
    workload = tmp_path / "s.yaml"
    workload.write_text("name: s\nqueries: [triangle]\ndatasets: [lj-twin]\nimplementations: [local-gj]\noracle: published\n")
    out = tmp_path / "out"
    assert cli.main(["bench", str(workload), "--from", str(standin), "--results", str(out)]) == 2
    [record] = [json.loads(p.read_text()) for p in out.glob("*.json")]
    assert record["dataset"]["name"] == "soc-LiveJournal1" and record["count"] == 1
    assert record["status"] == "VAL"
    [check] = record["checks"]
    assert check["name"] == "published" and check["count"] == 285_730_264 and check["agrees"] is False


def test_live_status_follows_a_bigjoin_run_through_its_phases_levels_and_batches(runner):
    """What `bench` shows while a run is live: sampled from another thread, as the display does."""
    import threading

    seen: list[str] = []
    done = threading.Event()

    def watch():
        while not done.is_set():
            seen.append(runner.live_status())
            done.wait(0.005)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:  # a small batch (B' = 128), so the query runs several batches at levels 1 and 2
        record = runner.run(
            RunRequest("triangle", "rmat:scale=8,ef=8,seed=3", "bigjoin", oracle="networkx", params={"batch": 128})
        )
    finally:
        done.set()
        watcher.join()
    assert record.status == "OK", record.error
    phases = [s.split(" · ")[0] for s in seen if s]
    assert {"load", "query", "verify"} <= set(phases), sorted(set(phases))
    assert phases.index("load") < phases.index("query") < phases.index("verify")
    query = [s for s in seen if s.startswith("query · level")]
    assert {s.split(" · ")[1] for s in query} >= {"level 1", "level 2"}, sorted(set(query))[:5]
    batches = [int(s.split(" · ")[2].split()[1]) for s in query]
    assert max(batches) > 3 and all(" of ~" in s for s in query)
    live = [s for s in seen if s and not s.startswith(("check", "load"))]  # the session is up from here on
    assert all("Spark UI http://127.0.0.1:" in s for s in live), [s for s in live if "Spark UI" not in s][:3]
    assert runner.live_status() == ""  # nothing is live between runs
    assert record.spark["event_log"] and record.spark["app_id"] in record.spark["event_log"]
