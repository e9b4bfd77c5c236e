"""Spark's history: a run names its event log, the log is capped, and `history` serves it on loopback."""

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from harness.spark import history
from harness.spark.cluster import free_port

REPO = Path(__file__).resolve().parent.parent


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as resp:
        assert resp.status == 200
        return resp.read().decode()


def test_prune_drops_the_oldest_logs_down_to_the_cap_and_keeps_the_newest(tmp_path):
    for i, size in enumerate([400, 300, 200, 100]):
        path = tmp_path / f"app-{i}.zstd"
        path.write_bytes(b"x" * size)
        os.utime(path, (1000 + i, 1000 + i))
    removed = history.prune(tmp_path, limit=350)
    assert [p.name for p in removed] == ["app-0.zstd", "app-1.zstd"]  # 1000 -> 600 -> 300 bytes
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app-2.zstd", "app-3.zstd"]
    history.prune(tmp_path, limit=1)
    assert [p.name for p in tmp_path.iterdir()] == ["app-3.zstd"]  # the newest stays, whatever its size


# A minute (a run's process, then the History Server's JVM), so CI runs it in make test-thorough. make test checks
# that a record names its event log (test_runner's test_live_status_follows_a_bigjoin_run_...) and the cap (above).
@pytest.mark.thorough
def test_a_run_names_its_event_log_and_the_history_server_shows_it(tmp_path):
    logs = tmp_path / "eventlogs"
    env = dict(os.environ, COLUMNS="200", HARNESS_EVENTLOG_DIR=str(logs))
    out = tmp_path / "result.json"
    run = subprocess.run(
        [sys.executable, "-m", "harness", "run", "--query", "triangle", "--dataset", "rmat:scale=7,ef=8,seed=1"]
        + ["--impl", "bigjoin", "--oracle", "networkx", "--json", str(out)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    record = json.loads(out.read_text())
    app_id, event_log = record["spark"]["app_id"], Path(record["spark"]["event_log"])
    assert event_log.parent == logs and event_log.name.startswith(app_id)
    assert event_log.is_file() and event_log.stat().st_size > 0  # complete: the session stopped, no .inprogress
    assert [p.name for p in logs.iterdir()] == [event_log.name]

    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "harness", "history", "--dir", str(logs), "--port", str(port)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    jvm = None
    try:
        assert server.stdout is not None
        line = server.stdout.readline()  # printed once the server answers
        assert line.startswith(f"history: http://127.0.0.1:{port} (1 event logs"), line
        jvm = psutil.Process(int(line.split("pid ")[1].split(";")[0]))
        listening = {  # Java's IPv6 sockets show 127.0.0.1 as ::ffff:127.0.0.1
            c.laddr.ip.removeprefix("::ffff:") for c in jvm.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN
        }
        assert listening == {"127.0.0.1"}, listening  # loopback only
        deadline = time.monotonic() + 60
        apps: list = []
        while time.monotonic() < deadline and not apps:  # the server scans its directory every 2 s
            apps = [a for a in json.loads(_get(f"http://127.0.0.1:{port}/api/v1/applications")) if a["id"] == app_id]
            time.sleep(0.5)
        assert apps and apps[0]["name"] == "subgraph-harness" and apps[0]["attempts"][0]["completed"]
        page = _get(f"http://127.0.0.1:{port}/history/{app_id}/jobs/")
        assert "Spark Jobs" in page and "subgraph-harness" in page
        jobs = json.loads(_get(f"http://127.0.0.1:{port}/api/v1/applications/{app_id}/jobs"))
        assert jobs and all(j["status"] == "SUCCEEDED" for j in jobs)
    finally:
        server.send_signal(signal.SIGTERM)  # stopped by process id; the harness stops its server
        server.wait(60)
    assert server.returncode == 0
    assert jvm is not None
    gone = not jvm.is_running() or jvm.status() == psutil.STATUS_ZOMBIE
    assert gone, f"History Server pid {jvm.pid} still running"
