"""The paired gate (the default of `gate` and `make gate`) still catches a real slowdown.

This tree is checked out as a commit of its own (`git stash create`: the tracked files as they are),
a baseline is recorded there from the clean checkout, and then that checkout's local-gj is patched to
run its join twice: a 2x slower query, in code, not a sleep or a mock. `gate` then reruns the
baseline's commit beside the patched checkout, alternating processes, and must fail on query_s alone;
so must `gate --against COMMIT`, which records no baseline. `--against` reaches the same `run_paired`
with the commit and workload its command line names; it is held to the records this test's paired
gate just made (old and new, real processes), so its own part (the commit resolved, the baseline made
from the old side's runs, the comparison) is checked without six more sessions.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness import cli
from harness.bench import gate
from harness.data.datasets import shared_root
from harness.spark import jvm_archive

pytestmark = pytest.mark.thorough

REPO = Path(__file__).resolve().parent.parent
WORKLOAD = """\
name: paired-slowdown
description: local-gj's triangles on rmat-16 (about 0.5 s a query), three trials
min_seconds: 0.2  # the default 0.5 s is about the whole slowdown to catch
queries: [triangle]
semantics: [undirected]
datasets: [rmat-16]
implementations: [local-gj]
trials: 3
timeout_s: 300
"""
JOIN = "        count, _, work = self._run(0)\n"
JOIN_TWICE = "        self._run(0)  # injected by tests/test_gate_paired.py: the join runs twice\n" + JOIN


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(REPO), *args], check=True, capture_output=True, text=True).stdout.strip()


def _harness(tree: Path, *args: str) -> subprocess.CompletedProcess:
    # The shared datasets this tree sees (the checkout has no shared/ beside it); the graph store and
    # event-log directory are conftest's.
    env = dict(os.environ, PYTHONPATH=str(tree), HARNESS_SHARED=str(shared_root()))
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=tree, env=env, capture_output=True, text=True)


@pytest.fixture()
def checkout(tmp_path):
    """This tree as a detached worktree at a commit of its own, removed afterwards."""
    commit = _git("stash", "create") or _git("rev-parse", "HEAD")
    tree = tmp_path / "tree"
    _git("worktree", "add", "--detach", "--quiet", str(tree), commit)
    jvm_archive.share_with(tree)  # as the gate shares it with the baseline's tree: no session writes one
    yield tree, commit
    _git("worktree", "remove", "--force", str(tree))


def test_paired_gate_catches_a_join_made_twice_as_slow(checkout, tmp_path, monkeypatch, capsys):
    tree, commit = checkout
    workload = tmp_path / "paired-slowdown.yaml"
    workload.write_text(WORKLOAD)

    recorded = _harness(tree, "baseline", "--workload", str(workload), "--name", "paired-slowdown")
    assert recorded.returncode == 0, recorded.stderr[-2000:]
    baseline = tree / "results" / "baselines" / "paired-slowdown.json"
    assert json.loads(baseline.read_text())["git"] == {"commit": commit, "dirty": False}

    source = tree / "implementations" / "local_gj.py"
    text = source.read_text()
    assert text.count(JOIN) == 1, "local-gj's count() changed: update the injected slowdown"
    source.write_text(text.replace(JOIN, JOIN_TWICE))

    out_dir = tmp_path / "gate-runs"
    done = _harness(tree, "gate", "--baseline", str(baseline), "--results", str(out_dir))
    assert done.returncode == gate.REGRESSION, done.stdout[-3000:] + done.stderr[-2000:]
    assert "times: paired" in done.stdout and f"trial 3/3, old ({commit[:7]})" in done.stdout

    report = json.loads((out_dir / "gate.json").read_text())
    assert report["paired"] is True and report["timing"] == "binding"
    flagged = {f["what"]: f for f in report["findings"] if f["verdict"] != "ok"}
    assert set(flagged) == {"query_s"}, flagged  # the count, counters and index time all still agree
    query = flagged["query_s"]
    assert query["verdict"] == "regression" and "every trial past the threshold" in query["note"]
    assert query["new"] / query["old"] > 1.6, query  # about 2x: the join ran twice
    # The old side really ran beside the new one: three processes each, at the same commit's code.
    old_runs = sorted(p.name for p in out_dir.glob("old-t*"))
    assert old_runs == ["old-t0", "old-t1", "old-t2"]
    assert all(json.loads(p.read_text())["git"]["commit"] == commit for p in (out_dir / "old-t0").glob("*.json"))

    # No baseline at all: the commit named on the command line; its paired runs are the ones just made.
    asked = []

    def the_runs_just_made(baseline, trials, out_dir, master, log):
        asked.append((baseline, trials, out_dir))
        return tuple([r for d in sorted(out_dir.glob(f"{side}-t*")) for r in gate.read_records(d)] for side in ("old", "new"))

    monkeypatch.setattr(gate, "run_paired", the_runs_just_made)
    code = cli.main(["gate", "--against", commit[:10], "--workload", str(workload), "--trials", "3", "--results", str(out_dir)])
    assert asked == [({"git": {"commit": commit}, "workload": str(workload), "tier": None}, 3, out_dir)]
    assert code == gate.REGRESSION, capsys.readouterr().out[-3000:]
    report = json.loads((out_dir / "gate.json").read_text())
    assert report["paired"] is True and report["timing"] == "binding" and report["baseline"] == f"--against {commit[:10]}"
    flagged = {f["what"]: f for f in report["findings"] if f["verdict"] != "ok"}
    assert set(flagged) == {"query_s"} and flagged["query_s"]["new"] / flagged["query_s"]["old"] > 1.6, flagged
