"""The regression gate: the comparison rules on hand-made summaries, baseline files, and the CLI end to
end on real runs with regressions injected into the driver (a doubled proposal count, a slower join)."""

from __future__ import annotations

import copy
import json
import statistics
import time
from pathlib import Path

import pytest

from harness import cli
from harness.bench import gate
from harness.bench.record import RunRecord
from harness.core import results
from harness.core.errors import DataError

RUNS_DIR = Path(__file__).resolve().parent.parent / "results" / "runs"

MACHINE = {"cpus": 2, "cpu_model": "X", "machine": "x86_64", "memory_bytes": 24 * 2**30, "hostname": "a"}
KEY = "bigjoin triangle g undirected W=2"


def _baseline(times=(1.0, 1.1, 1.05), **logical) -> dict:
    counters = {"proposals": 1000, "tuples_exchanged": 5000, "rounds": 6, "prefixes_per_level.P1": 40, **logical}
    run = {
        "status": ["OK"] * 3,
        "count": [77] * 3,
        "logical": [dict(counters) for _ in range(3)],
        "times": {"index_s": [0.5, 0.5, 0.5], "query_s": list(times)},
    }
    return {
        "schema": gate.SCHEMA,
        "workload": "w",
        "tier": None,
        "machine": MACHINE,
        "trials": 3,
        "time_threshold": 0.25,
        "git": {"commit": "abc1234"},
        "runs": {KEY: run},
    }


def _current(baseline: dict) -> dict:
    return copy.deepcopy(baseline["runs"])


def test_identical_runs_pass():
    b = _baseline()
    c = gate.compare(b, _current(b), MACHINE)
    assert c.exit_code == gate.PASS
    assert not c.problems()
    assert {f.what for f in c.findings} >= {"count", "proposals", "rounds", "query_s", "index_s"}


def test_count_change_is_a_regression():
    b = _baseline()
    cur = _current(b)
    cur[KEY]["count"][1] = 78
    c = gate.compare(b, cur, MACHINE)
    assert c.exit_code == gate.REGRESSION
    assert [(f.what, f.verdict) for f in c.problems()] == [("count", "regression")]


def test_doubled_proposals_is_a_regression_and_small_drift_is_not():
    b = _baseline()
    cur = _current(b)
    for t in cur[KEY]["logical"]:
        t["proposals"] *= 2
        t["tuples_exchanged"] = 5090  # +1.8%: inside the 2% tolerance
    c = gate.compare(b, cur, MACHINE)
    assert c.exit_code == gate.REGRESSION
    flagged = {f.what: f for f in c.problems()}
    assert set(flagged) == {"proposals"}
    text = "\n".join(gate.render(c, b, "b.json"))
    assert "proposals" in text and "+100.0%" in text and "REGRESSION" in text and "exit 1" in text


def test_counter_that_disappears_is_a_regression():
    b = _baseline()
    cur = _current(b)
    for t in cur[KEY]["logical"]:
        del t["rounds"]
    assert gate.compare(b, cur, MACHINE).exit_code == gate.REGRESSION


def test_the_process_s_counters_and_the_budget_s_settings_are_never_gated():
    logical = {"kernels_compiled": 20, "memory_budget_bytes": 1 << 30, "batch_per_level": {"L1": 9}, "proposals": 5}
    assert gate.logical_scalars(logical) == {"proposals": 5}
    b = _baseline(kernels_compiled=0, memory_budget_bytes=1 << 30, **{"batch_per_level.L1": 9})  # recorded before
    cur = _current(b)
    for trial, t in enumerate(cur[KEY]["logical"]):
        t["kernels_compiled"] = 20 if trial == 0 else 0  # a first run compiles, the next do not
        t["memory_budget_bytes"], t["batch_per_level.L1"] = 1 << 29, 4  # a cluster's executors have less memory
    c = gate.compare(b, cur, MACHINE)
    assert c.exit_code == gate.PASS
    assert not {"kernels_compiled", "memory_budget_bytes", "batch_per_level.L1"} & {f.what for f in c.findings}


def test_consistently_slower_runs_regress_and_noise_does_not():
    b = _baseline(times=(1.0, 1.1, 1.05))
    slow = _current(b)
    slow[KEY]["times"]["query_s"] = [1.8, 1.75, 1.9]
    c = gate.compare(b, slow, MACHINE)
    assert c.exit_code == gate.REGRESSION
    assert [f.what for f in c.problems()] == ["query_s"]
    # The same medians with one trial as fast as the baseline: noise, not a regression.
    noisy = _current(b)
    noisy[KEY]["times"]["query_s"] = [1.8, 1.0, 1.9]
    assert gate.compare(b, noisy, MACHINE).exit_code == gate.PASS
    # Under the threshold: a pass however consistent.
    fine = _current(b)
    fine[KEY]["times"]["query_s"] = [1.2, 1.2, 1.2]
    assert gate.compare(b, fine, MACHINE).exit_code == gate.PASS
    # Advisory timing (unpaired, by default) reports it without failing; a per-workload threshold can allow it.
    advisory = gate.compare(b, slow, MACHINE, timing="advisory")
    assert advisory.exit_code == gate.PASS and [f.verdict for f in advisory.problems()] == ["advisory"]
    rendered = gate.render(advisory, b, "b.json", timing="advisory")
    assert [line for line in rendered if "times:" in line] == [gate.unpaired_line(b, "advisory")]
    assert "ADVISORY" in "\n".join(rendered) and rendered[-1].startswith("gate: PASS")
    assert gate.compare(b, slow, MACHINE, threshold=0.8).exit_code == gate.PASS
    # 40% slower but by less than the 0.5 s floor: sub-second phases jitter; without the floor it counts.
    small = _current(b)
    small[KEY]["times"]["query_s"] = [1.47, 1.48, 1.5]
    assert gate.compare(b, small, MACHINE).exit_code == gate.PASS
    assert gate.compare(b, small, MACHINE, min_seconds=0).exit_code == gate.REGRESSION


def test_baseline_from_another_machine_is_flagged_not_timed():
    b = _baseline()
    slow = _current(b)
    slow[KEY]["times"]["query_s"] = [9.0, 9.0, 9.0]
    other = dict(MACHINE, cpus=64, hostname="b")
    c = gate.compare(b, slow, other)
    assert not c.same_machine and c.exit_code == gate.PASS
    assert {f.verdict for f in c.findings if f.what in gate.TIMES} == {"not compared"}
    assert "another machine" in "\n".join(gate.render(c, b, "b.json"))
    # The hostname alone (a CI container) does not make another machine.
    assert gate.compare(b, slow, dict(MACHINE, hostname="c")).exit_code == gate.REGRESSION


def test_failed_or_missing_runs_are_failures():
    b = _baseline()
    failed = _current(b)
    failed[KEY]["status"][2] = "EXE"
    assert gate.compare(b, failed, MACHINE).exit_code == gate.FAILURE
    assert gate.compare(b, {}, MACHINE).exit_code == gate.FAILURE


def test_bad_baseline_files(tmp_path):
    with pytest.raises(DataError, match="not found"):
        gate.load_baseline(tmp_path / "none.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": \n oops}')
    with pytest.raises(DataError, match=r"bad.json: line 2"):
        gate.load_baseline(bad)
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"schema": "other"}))
    with pytest.raises(DataError, match="key 'schema'"):
        gate.load_baseline(wrong)


GATE_WORKLOAD = """\
name: gate-test
description: a tiny gate for the tests
queries: [triangle]
semantics: [undirected]
datasets: [rmat-small]
implementations: [bigjoin]
workers: [2]
trials: 3
oracle: auto
timeout_s: 300
"""


@pytest.fixture(scope="module")
def recorded(tmp_path_factory, spark):
    """A baseline recorded from real runs of the tiny workload (as `make baseline` does)."""
    root = tmp_path_factory.mktemp("gate")
    workload = root / "gate-test.yaml"
    workload.write_text(GATE_WORKLOAD)
    wl = cli._checked_workload(str(workload), None)
    records = cli._execute(wl, None, root / "baseline-runs")
    path = root / "gate-test.json"
    results.write_json_atomic(path, gate.make_baseline("gate-test", str(workload), None, records, 0.25))
    return path


def _gate(path, tmp_path, capsys, *flags: str) -> tuple[int, str]:
    """The gate against stored times (paired runs are tests/test_gate_paired.py's), binding unless flags say otherwise."""
    flags = flags or ("--unpaired", "--timing", "binding")
    code = cli.main(["gate", "--baseline", str(path), "--results", str(tmp_path / "gate-runs"), *flags])
    return code, capsys.readouterr().out


def test_gate_passes_on_a_clean_tree_and_writes_its_findings(recorded, tmp_path, capsys):
    code, out = _gate(recorded, tmp_path, capsys, "--unpaired")
    assert code == 0, out
    assert "gate: PASS" in out
    findings = json.loads((tmp_path / "gate-runs" / "gate.json").read_text())
    assert findings["exit_code"] == 0 and any(f["what"] == "proposals" for f in findings["findings"])
    # Unpaired and without --timing, times only advise, and one line says so.
    assert findings["paired"] is False and findings["timing"] == "advisory"
    stored = json.loads(recorded.read_text())
    assert [line for line in out.splitlines() if "times: unpaired" in line] == [
        f"  times: unpaired (stored at {stored['git']['commit'][:7]}, {stored['created'][:10]}, maybe elsewhere): "
        "advisory, never failing"
    ]


def test_gate_catches_a_doubled_proposal_count(recorded, tmp_path, capsys, monkeypatch):
    from implementations import bigjoin

    report = bigjoin.Counters.report

    def doubled(self, *args, **kwargs):
        out = report(self, *args, **kwargs)
        out["proposals"] *= 2
        return out

    monkeypatch.setattr(bigjoin.Counters, "report", doubled)
    code, out = _gate(recorded, tmp_path, capsys)
    assert code == 1, out
    assert "proposals" in out and "+100.0%" in out and "gate: REGRESSION" in out


def test_gate_catches_a_slower_join(recorded, tmp_path, capsys, monkeypatch):
    from implementations import bigjoin

    count = bigjoin.BiGJoin.count
    # At least as long as the recorded query, so the join is at least 2x slower on a busy machine too.
    [stored] = json.loads(recorded.read_text())["runs"].values()
    delay = max(1.5, statistics.median(stored["times"]["query_s"]))

    def slower(self):
        time.sleep(delay)
        return count(self)

    monkeypatch.setattr(bigjoin.BiGJoin, "count", slower)
    code, out = _gate(recorded, tmp_path, capsys)
    assert code == 1, out
    assert "query_s" in out and "every trial past the threshold" in out and "gate: REGRESSION" in out
    assert "unpaired" in out and "binding: valid on their own machine only" in out


def test_gate_pairs_by_default_and_binds_paired_times():
    parser = cli.build_parser()
    assert parser.parse_args(["gate"]).paired is True
    assert parser.parse_args(["gate", "--unpaired"]).paired is False
    assert parser.parse_args(["gate"]).timing is None  # binding when paired, advisory when not (cmd_gate)
    with pytest.raises(SystemExit):
        parser.parse_args(["gate", "--paired", "--unpaired"])


@pytest.mark.parametrize(
    "flags,message",
    [
        (["--against", "no-such-rev"], "gate --against: 'no-such-rev' names no commit in this repository"),
        (["--against", "HEAD", "--unpaired"], "gate --against: compares paired runs only; drop --unpaired"),
    ],
)
def test_gate_against_a_commit_refuses_what_it_cannot_pair(tmp_path, capsys, flags, message):
    code = cli.main(["gate", *flags, "--results", str(tmp_path / "runs")])
    assert code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_baseline_refuses_a_dirty_tree(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(results, "git_info", lambda: {"commit": "abc", "dirty": True})
    code = cli.main(["baseline", "--workload", "gate", "--name", "refused-test"])
    assert code == 2
    assert "dirty" in capsys.readouterr().err
    assert not (gate.BASELINE_DIR / "refused-test.json").exists()


def test_paired_times_replace_the_stored_ones_and_count_as_this_machine():
    b = _baseline(times=(9.0, 9.0, 9.0))  # stored on another, slower machine
    b["machine"] = dict(MACHINE, cpus=64)
    old = [
        RunRecord.from_json(
            {
                "implementation": "bigjoin",
                "query": {"name": "triangle"},
                "dataset": {"name": "g"},
                "semantics": "undirected",
                "params": {"workers": 2},
                "status": "OK",
                "count": 77,
                "logical": {},
                "metrics": {"index_s": 0.5, "query_s": q},
            }
        )
        for q in (1.0, 1.1, 1.05)
    ]
    paired = gate.with_paired_times(b, old, MACHINE)
    assert paired["runs"][KEY]["times"]["query_s"] == [1.0, 1.1, 1.05] and b["runs"][KEY]["times"]["query_s"] == [9.0] * 3
    slow = _current(b)
    slow[KEY]["times"]["query_s"] = [1.8, 1.75, 1.9]
    c = gate.compare(paired, slow, MACHINE)
    assert c.same_machine and [f.what for f in c.problems()] == ["query_s"]
    assert "paired" in "\n".join(gate.render(c, paired, "b.json"))


def test_the_micro_benchmarks_say_in_one_line_how_the_saved_run_s_machine_differs():
    """pytest-benchmark's own warning prints both machine descriptions whole, some 3,000 characters."""
    from tests.benchmarks.conftest import summary

    saved = json.loads((gate.BASELINE_DIR / "micro" / "Linux-CPython-3.11-64bit" / "0005_baseline.json").read_text())
    saved = saved["machine_info"]
    here = copy.deepcopy(saved)
    here["python_build"] = tuple(here["python_build"])  # as pytest-benchmark has it live: no difference
    here["cpu"].update(count=8, brand_raw="Intel Xeon Platinum 8375C", flags=["avx512f", *here["cpu"]["flags"]])
    here.update(node="ci-runner", release="6.1.0")
    line = summary(here, saved)
    assert line == (
        "micro-benchmarks: saved on another machine: node vm -> ci-runner, cpu.brand_raw AMD EPYC -> Intel Xeon Plat…, "
        "cpu.count 2 -> 8 (+2 more)"  # release and cpu.flags
    )


def test_an_index_reused_from_another_run_is_named_on_its_index_finding():
    """The triangle contest at 162ee03 (`make bench`): bigjoin-carry's index_s (0.04 s) is its reuse of
    bigjoin's index; the gate compares it like with like and says whose build it reused."""
    runs = RUNS_DIR / "20261206T185955Z-f0e410-triangle"
    records = [RunRecord.from_json(json.loads(p.read_text())) for p in sorted(runs.glob("00*.json"))]
    summary = gate.summarize(records)
    b = _baseline()
    b["runs"] = copy.deepcopy(summary)
    found = {(f.run.split()[0], f.what): f for f in gate.compare(b, summary, MACHINE).findings}
    assert found[("bigjoin-carry", "index_s")].note.endswith("reused bigjoin's index: its build is gated there")
    assert found[("bigjoin-s", "index_s")].note.endswith("reused bigjoin's index: its build is gated there")
    assert "reused" not in found[("bigjoin", "index_s")].note and "reused" not in found[("local-gj", "index_s")].note
