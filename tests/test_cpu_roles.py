"""The CPU sampler behind results/profiles/ci-jit-20261207.md counts a child's CPU under its role."""

import json
import sys

from harness.bench import cpu_roles


def test_a_busy_child_s_cpu_is_counted_under_its_role(tmp_path):
    out = tmp_path / "cpu.json"
    busy = "import time\nend = time.process_time() + 1.5\nwhile time.process_time() < end: pass"
    assert cpu_roles.main([str(out), "--", sys.executable, "-c", busy]) == 0
    report = json.loads(out.read_text())
    assert report["exit"] == 0 and report["wall_s"] >= 1.5
    assert 1.0 <= report["cpu_s"]["other-python"] <= 2.5, report  # 1.5 s, less at most its last second


def test_roles_follow_the_command_line():
    assert cpu_roles.role("java -cp x org.apache.spark.executor.CoarseGrainedExecutorBackend --id 1") == "executor-jvm"
    assert cpu_roles.role("java -cp x org.apache.spark.deploy.SparkSubmit pyspark-shell") == "driver-jvm"
    assert cpu_roles.role("python -m pytest -q") == "pytest" and cpu_roles.role("sh -c true") == "other"
