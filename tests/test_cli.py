"""The command line as a user runs it: exit codes, one-line errors, complete result files."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.spark import session as spark

REPO = Path(__file__).resolve().parent.parent


def harness(*args, cwd=REPO, timeout=600):
    env = dict(os.environ, COLUMNS="200")
    return subprocess.run(
        [sys.executable, "-m", "harness", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


CHATTER = ("Using incubator modules", "Setting default log level", "sc.setLogLevel")


def error_lines(proc) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.startswith("error")]


def test_run_malformed_edge_line_exits_2_and_writes_a_complete_DAT_result(tmp_path):
    edges = tmp_path / "bad.txt"
    edges.write_text("1 2\n2 3\n3 x4\n")
    out = tmp_path / "result.json"
    proc = harness("run", "--query", "triangle", "--dataset", str(edges), "--impl", "binary", "--json", str(out))
    assert proc.returncode == 2
    [line] = error_lines(proc)
    assert f"{edges}:3: non-integer vertex id 'x4'" in line
    record = json.loads(out.read_text())
    assert record["status"] == "DAT" and record["count"] is None and "bad.txt:3" in record["error"]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary leftovers


def test_run_unknown_names_fail_fast(tmp_path):
    for flag, value, message in [
        ("--impl", "nope", "unknown implementation 'nope'"),
        ("--query", "nope", "unknown query 'nope'"),
        ("--dataset", "nope", "unknown dataset 'nope'"),
    ]:
        args = {"--query": "triangle", "--dataset": "rmat-small", "--impl": "binary", flag: value}
        proc = harness("run", *[x for kv in args.items() for x in kv], "--json", str(tmp_path / "r.json"))
        assert proc.returncode == 2 and len(error_lines(proc)) == 1 and message in error_lines(proc)[0]


def test_run_prints_a_table_that_fits_100_columns_and_no_start_up_chatter(tmp_path):
    """Every column (--wide) and the JVM's chatter (--verbose) are the bench test's: run and bench print alike."""
    args = ["run", "--query", "triangle", "--dataset", "rmat-small", "--impl", "binary"]
    proc = harness(*args, "--json", str(tmp_path / "r.json"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "binary ran triangle on rmat-small (undirected, W=2) alone: OK in" in proc.stdout
    assert "verified by" in proc.stdout and "shuffle rec" not in proc.stdout  # the full table only with --wide
    assert max(len(line) for line in proc.stdout.splitlines()) <= 100  # COLUMNS=200: it fits by itself
    for chatter in CHATTER:  # Spark's start-up messages: only with --verbose
        assert chatter not in proc.stderr, proc.stderr


def test_bench_yaml_error_names_the_key_and_writes_nothing(tmp_path):
    workload = tmp_path / "broken.yaml"
    workload.write_text("queries: [triangle]\ndatasets: [rmat-small]\nimplementations: [binary]\ntrails: 3\n")
    out = tmp_path / "results"
    proc = harness("bench", str(workload), "--results", str(out))
    assert proc.returncode == 2
    [line] = error_lines(proc)
    assert "broken.yaml: unknown key 'trails'" in line
    assert not out.exists()


def test_bench_runs_a_workload_end_to_end_with_every_column_and_the_jvm_s_chatter(tmp_path):
    workload = tmp_path / "mini.yaml"
    workload.write_text(
        "name: mini\nqueries: ['a-b,b-c,c-d,d-a']\nsemantics: [directed]\n"
        "datasets: ['rmat:scale=8,ef=8,a=0.57,b=0.19,c=0.19,seed=1']\nimplementations: [binary]\nworkers: [2]\n"
        "oracle: duckdb\n"
    )
    out = tmp_path / "results"
    proc = harness("bench", str(workload), "--wide", "--verbose", "--results", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    files = sorted(out.glob("*.json"))
    assert len(files) == 1
    for f in files:
        record = json.loads(f.read_text())
        assert record["status"] == "OK" and record["verified"] and record["workload"] == "mini"
        assert record["metrics"]["shuffle_records"] > 0
    assert "verified by" in proc.stdout and "duckdb" in proc.stdout  # the contest table
    assert "binary ran a-b,b-c,c-d,d-a on rmat:scale=8" in proc.stdout and "alone: OK in" in proc.stdout
    assert "duckdb ✓" in proc.stdout and "shuffle rec" in proc.stdout  # --wide: every column
    assert "WARNING: Using incubator modules" in proc.stderr  # --verbose; the JVM's own: log4j cannot silence it


# About 50 s (an 8 s timeout, then shares' clique5), so CI runs it in make test-thorough; make test keeps an
# expected timeout's TIM in one process (test_runner's test_implementation_timeout_is_TIM_and_session_survives).
@pytest.mark.thorough
def test_a_contest_with_an_expected_timeout_prints_no_worker_tracebacks(tmp_path):
    """BiGJoin-S timing out on clique5 (the clique5 contest's case) has its Python tasks cancelled
    mid-write. pyspark's own daemon printed a BrokenPipeError traceback for such a worker into the
    contest's output; the harness's daemon (harness.spark.daemon) does not. The run is TIM, expected."""
    workload = tmp_path / "tim.yaml"
    workload.write_text(
        "name: tim\nqueries: [clique5]\nsemantics: [undirected]\ndatasets: [rmat-13]\n"
        "implementations: [bigjoin-s, shares]\nexpected_timeouts: {bigjoin-s: 8}\nworkers: [2]\noracle: auto\n"
    )
    proc = harness("bench", str(workload), "--results", str(tmp_path / "results"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "timed out after" in proc.stderr and "(expected by the workload)" in proc.stderr
    assert "Traceback" not in proc.stderr and "BrokenPipeError" not in proc.stderr, proc.stderr[-3000:]
    assert "shares won clique5 on rmat-13" in proc.stdout


def test_the_subgraph_harness_command_is_the_harness(tmp_path):
    """`pip install -e .` installs `subgraph-harness` beside the interpreter; it is `python -m harness`."""
    command = Path(sys.executable).parent / "subgraph-harness"
    assert command.is_file(), f"{command}: not installed (pyproject.toml [project.scripts])"
    usage = subprocess.run([str(command), "--help"], capture_output=True, text=True, timeout=120)
    assert usage.returncode == 0 and usage.stdout.startswith("usage: subgraph-harness")
    for name in ("run", "bench", "gate", "report", "history", "compare"):
        assert name in usage.stdout
    args = ["run", "--query", "triangle", "--dataset", "rmat-small", "--impl", "nope", "--json", str(tmp_path / "r.json")]
    env = dict(os.environ, COLUMNS="200")
    installed = subprocess.run([str(command), *args], env=env, capture_output=True, text=True, timeout=120)
    module = harness(*args)
    assert installed.returncode == module.returncode == 2
    assert error_lines(installed) == error_lines(module) == [error_lines(module)[0]]
    assert "unknown implementation 'nope'" in error_lines(installed)[0]


def test_the_jvm_s_start_up_chatter_is_dropped_and_every_other_line_passed_on(capfd, monkeypatch):
    """What the JVM writes to stderr goes through harness.spark.session._pass_stderr: tracebacks and errors pass."""
    lines = [
        b"WARNING: Using incubator modules: jdk.incubator.vector\n",
        b'Setting default log level to "WARN".\n',
        b"To adjust logging level use sc.setLogLevel(newLevel). For SparkR, use setLogLevel(newLevel).\n",
        b"12:00:01 ERROR Executor: Exception in task 0.0 in stage 3.0\n",
        b"Traceback (most recent call last):\n",
    ]
    for verbose, shown in ((False, lines[3:]), (True, lines)):
        monkeypatch.setattr(spark, "_verbose", verbose)
        read, write = os.pipe()
        os.write(write, b"".join(lines))
        os.close(write)
        with os.fdopen(read, "rb") as stream:
            spark._pass_stderr(stream)
        assert capfd.readouterr().err == b"".join(shown).decode()
