"""Regression gates. A baseline is a workload's counts, logical counters and times, recorded from a
clean tree; the gate reruns the workload and compares run by run:
  - counts must be identical;
  - logical counters (tuples exchanged, rounds, peak prefixes in flight, ...) must be within ±2%:
    they are deterministic for a fixed seed and W;
  - time (index_s, query_s) regresses only if the median of >= 3 trials exceeds the baseline's median
    by more than the threshold (and by at least min_seconds) AND so does every new trial (consistent:
    one fast trial says noise).
Timing is paired by default, as `asv continuous` does: the baseline's commit is checked out beside
the tree and both run trial by trial, alternating, in this gate, so old and new share the machine and
its load. Unpaired, the times are the baseline's stored ones, from another day and maybe another
machine (the recorded machine fields cannot tell two machines of one kind apart): advisory unless the
caller makes them binding, and never compared when the recorded machine visibly differs.
Exit codes: 0 pass, 1 regression, 2 failure (a run failed, or the baseline does not fit)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

from harness.bench.record import RunRecord
from harness.core import numba_cache, results
from harness.core.errors import DataError
from harness.spark import jvm_archive

BASELINE_DIR = results.RESULTS_DIR / "baselines"
SCHEMA = "harness-baseline/1"
COUNTER_TOLERANCE = 0.02
DEFAULT_TIME_THRESHOLD = 0.25
DEFAULT_MIN_SECONDS = 0.5  # and by at least this much: sub-second phases jitter by more than 25%
MIN_TRIALS = 3
TIMES = ("index_s", "query_s")
PASS, REGRESSION, FAILURE = 0, 1, 2


# Reported, never gated (with every counter nested under them): what the process ran before (kernels
# compiled inside a timed phase: a first BiGJoin-S run compiles, a second does not) and settings derived
# from the memory Spark gives a worker (the default memory budget and its B' per level), which differ
# between local mode and a cluster. The counters the budget drives (jobs, peaks) stay gated.
UNGATED = frozenset({"kernels_compiled", "memory_budget_bytes", "batch_per_level"})


def gated(name: str) -> bool:
    return name.split(".")[0] not in UNGATED


def logical_scalars(logical: dict, prefix: str = "") -> dict[str, float]:
    """The numeric leaves of a record's logical counters (nested dicts as dotted names; lists skipped),
    less those never gated (`UNGATED`)."""
    out = {}
    for name, value in (logical or {}).items():
        if not gated(prefix + name):
            continue
        if isinstance(value, dict):
            out.update(logical_scalars(value, f"{prefix}{name}."))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out[prefix + name] = value
    return out


def machine_key(machine: dict) -> dict:
    """What makes two machines comparable for timing (the hostname of a CI container is not)."""
    memory = machine.get("memory_bytes")
    return {
        "cpus": machine.get("cpus"),
        "cpu_model": machine.get("cpu_model"),
        "machine": machine.get("machine"),
        "memory_gib": round(memory / 2**30) if memory else None,
    }


def summarize(records: list[RunRecord]) -> dict[str, dict]:
    """Per run key: statuses, counts, logical counters (per trial) and times (per trial)."""
    runs: dict[str, dict] = {}
    for r in records:
        entry = runs.setdefault(
            r.run_key, {"status": [], "count": [], "logical": [], "times": {t: [] for t in TIMES}, "reused": []}
        )
        entry["status"].append(r.status)
        entry["reused"] = sorted(set(entry["reused"]) | set(r.index_builders))
        entry["count"].append(r.count)
        entry["logical"].append(logical_scalars(r.logical))
        for t in TIMES:
            value = r.metrics.get(t)
            if value is not None:
                entry["times"][t].append(value)
    return runs


def make_baseline(
    name: str,
    workload: str,
    tier: str | None,
    records: list[RunRecord],
    threshold: float,
    min_seconds: float = DEFAULT_MIN_SECONDS,
) -> dict:
    bad = [f"{r.run_key}: {r.status}" for r in records if r.status != "OK"]
    if bad:
        raise DataError(f"baseline {name}: every run must be OK, got {bad[0]}")
    runs = summarize(records)
    for key, entry in runs.items():
        if len(set(entry["count"])) != 1:
            raise DataError(f"baseline {name}: {key}: trials disagree on the count {sorted(set(entry['count']))}")
    return {
        "schema": SCHEMA,
        "name": name,
        "workload": workload,
        "tier": tier,
        "created": results.now_iso(),
        "git": records[0].git,
        "machine": records[0].machine,
        "time_threshold": threshold,
        "min_seconds": min_seconds,
        "trials": max(len(e["count"]) for e in runs.values()),
        "runs": runs,
    }


def load_baseline(path: Path) -> dict:
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise DataError(f"baseline {path}: not found (record one with `make baseline`)") from None
    except json.JSONDecodeError as exc:
        raise DataError(f"baseline {path}: line {exc.lineno}: not valid JSON ({exc.msg})") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise DataError(f"baseline {path}: key 'schema' must be '{SCHEMA}'")
    for key in ("workload", "runs", "machine", "trials"):
        if key not in data:
            raise DataError(f"baseline {path}: missing key '{key}'")
    return data


def read_records(directory: Path) -> list[RunRecord]:
    return [
        RunRecord.from_json(json.loads(p.read_text())) for p in sorted(Path(directory).glob("*.json")) if p.name != "gate.json"
    ]


def run_paired(
    baseline: dict, trials: int, out_dir: Path, master: str | None = None, log=print
) -> tuple[list[RunRecord], list[RunRecord]]:
    """(old records, new records): the baseline's commit and this tree each run the baseline's
    workload `trials` times, one trial at a time, alternating, each in its own process."""
    commit = (baseline.get("git") or {}).get("commit")
    if not commit:
        raise DataError("gate --paired: the baseline names no commit")
    found = subprocess.run(["git", "-C", str(results.REPO), "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True)
    if found.returncode != 0:
        raise DataError(f"gate --paired: the baseline's commit {commit[:7]} is not in this repository")
    from harness.bench.workload import resolve_path
    from harness.data.datasets import cache_root, shared_root

    # Both sides read the same shared datasets and graph cache (the old tree lives elsewhere), and run
    # this tree's workload file: the same work, even if the workload was added after the old commit.
    # (HARNESS_CACHE is the store's name before issue 20, for an old tree.)
    env = dict(os.environ, HARNESS_SHARED=str(shared_root()), HARNESS_STORE=str(cache_root()), HARNESS_CACHE=str(cache_root()))
    workload_file = str(resolve_path(str(baseline["workload"])).resolve())
    sides: dict[str, list[RunRecord]] = {"old": [], "new": []}
    with tempfile.TemporaryDirectory(prefix="harness-gate-") as tmp:
        old_tree = Path(tmp) / "old"
        subprocess.run(
            ["git", "-C", str(results.REPO), "worktree", "add", "--detach", "--quiet", str(old_tree), commit],
            check=True,
            capture_output=True,
        )
        # The old tree's kernels in this tree's cache, keyed by content: the modules both share, compiled once.
        old_env = {"PYTHONPATH": str(old_tree), numba_cache.LOCATOR_SETTING: numba_cache.locator_setting()}
        try:
            numba_cache.place_shim(old_tree)
            jvm_archive.share_with(old_tree)
            for trial in range(trials):
                for side, tree in (("old", old_tree), ("new", results.REPO)):
                    target = out_dir / f"{side}-t{trial}"
                    command = [sys.executable, "-m", "harness", "bench", workload_file, "--trials", "1", "--results", str(target)]
                    command += ["--tier", baseline["tier"]] if baseline.get("tier") else []
                    command += ["--master", master] if master else []
                    log(f"gate --paired: trial {trial + 1}/{trials}, {side} ({commit[:7] if side == 'old' else 'this tree'})")
                    side_env = old_env if side == "old" else {"PYTHONPATH": str(tree)}
                    done = subprocess.run(command, cwd=tree, env=env | side_env, capture_output=True, text=True)
                    records = read_records(target)
                    if not records:
                        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
                        raise DataError(f"gate --paired: the {side} side wrote no results in {target}: {last}")
                    sides[side].extend(records)
        finally:
            subprocess.run(["git", "-C", str(results.REPO), "worktree", "remove", "--force", str(old_tree)], capture_output=True)
    return sides["old"], sides["new"]


def commit_of(rev: str) -> str:
    """The full commit a revision names in this repository."""
    done = subprocess.run(
        ["git", "-C", str(results.REPO), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], capture_output=True, text=True
    )
    if done.returncode != 0:
        raise DataError(f"gate --against: '{rev}' names no commit in this repository")
    return done.stdout.strip()


def paired_against(
    commit: str, workload: str, tier: str | None, trials: int, out_dir: Path, limits: tuple[float, float], master=None, log=print
) -> tuple[dict, list[RunRecord]]:
    """(baseline, this tree's records): a baseline made on the spot, `commit` and this tree running the
    workload `trials` times each, alternating; the commit's runs give the counts, counters and times
    this tree's are held to. `limits`: the time threshold and the least slowdown in seconds."""
    old, new = run_paired({"git": {"commit": commit}, "workload": workload, "tier": tier}, trials, out_dir, master, log)
    baseline = make_baseline(f"against-{commit[:7]}", workload, tier, old, *limits)
    baseline["paired"] = True
    return baseline, new


def with_paired_times(baseline: dict, old_records: list[RunRecord], machine: dict) -> dict:
    """The baseline with its times replaced by those of its commit rerun beside this tree (and so on
    this machine)."""
    paired = json.loads(json.dumps(baseline))
    fresh = summarize(old_records)
    for key, run in paired["runs"].items():
        run["times"] = fresh.get(key, {}).get("times", {t: [] for t in TIMES})
    paired["machine"] = machine
    paired["paired"] = True
    return paired


@dataclass
class Finding:
    run: str
    what: str
    old: object
    new: object
    verdict: str  # "ok", "regression", "failure", "advisory" or "not compared"
    note: str = ""


@dataclass
class Comparison:
    findings: list[Finding] = field(default_factory=list)
    same_machine: bool = True

    @property
    def exit_code(self) -> int:
        verdicts = {f.verdict for f in self.findings}
        return FAILURE if "failure" in verdicts else REGRESSION if "regression" in verdicts else PASS

    def problems(self) -> list[Finding]:
        return [f for f in self.findings if f.verdict not in ("ok",)]


def compare(
    baseline: dict,
    current: dict[str, dict],
    machine: dict,
    threshold: float | None = None,
    timing: str = "binding",
    min_seconds: float | None = None,
) -> Comparison:
    """Compare summarized runs with a baseline. `timing` is "binding" (a slower run is a regression)
    or "advisory" (reported, never failing: for shared CI machines)."""
    threshold = baseline.get("time_threshold", DEFAULT_TIME_THRESHOLD) if threshold is None else threshold
    min_seconds = baseline.get("min_seconds", DEFAULT_MIN_SECONDS) if min_seconds is None else min_seconds
    out = Comparison(same_machine=machine_key(baseline["machine"]) == machine_key(machine))
    for key, old in baseline["runs"].items():
        new = current.get(key)
        if new is None:
            out.findings.append(Finding(key, "run", "present", "missing", "failure", "the workload no longer has this run"))
            continue
        failed = [s for s in new["status"] if s != "OK"]
        if failed:
            out.findings.append(Finding(key, "status", "OK", failed[0], "failure"))
            continue
        old_count, counts = old["count"][0], sorted(set(new["count"]))
        out.findings.append(
            Finding(
                key,
                "count",
                old_count,
                counts[0] if len(counts) == 1 else counts,
                "ok" if counts == [old_count] else "regression",
            )
        )
        old_logical = old["logical"][0]
        names = set(old_logical).union(*(set(t) for t in new["logical"]))
        for name in sorted(filter(gated, names)):
            before = old_logical.get(name)
            values = [t.get(name) for t in new["logical"]]
            after = values[0]
            if before is None or any(v is None for v in values):
                out.findings.append(Finding(key, name, before, after, "regression", "counter appeared or disappeared"))
                continue
            worst = max(values, key=lambda v: abs(v - before))
            change = _relative(before, worst)
            out.findings.append(
                Finding(
                    key,
                    name,
                    before,
                    worst,
                    "ok" if abs(change) <= COUNTER_TOLERANCE else "regression",
                    f"{change:+.1%}" if change else "",
                )
            )
        for t in TIMES:
            found = _compare_times(
                key, t, old["times"].get(t, []), new["times"].get(t, []), threshold, min_seconds, timing, out.same_machine
            )
            out.findings.append(_said_shared(found, new.get("reused") or []) if t == "index_s" else found)
    for key in sorted(set(current) - set(baseline["runs"])):
        out.findings.append(Finding(key, "run", "missing", "present", "advisory", "new run, not in the baseline"))
    return out


def _said_shared(found: Finding, builders: list[str]) -> Finding:
    """An index_s finding of a run that reused an index other runs built: its time is the reuse alone,
    the build's gated at the builders' own keys, and the note says so."""
    if not builders:
        return found
    said = f"reused {', '.join(builders)}'s index: its build is gated there"
    return replace(found, note=f"{found.note}; {said}" if found.note else said)


def _relative(before: float, after: float) -> float:
    if before == after:
        return 0.0
    return (after - before) / abs(before) if before else float("inf")


def _compare_times(
    key: str, name: str, old: list[float], new: list[float], threshold: float, min_seconds: float, timing: str, same_machine: bool
) -> Finding:
    if not old or not new:
        return Finding(key, name, old or None, new or None, "not compared", "no times")
    before, after = statistics.median(old), statistics.median(new)
    ratio = after / before if before > 0 else float("inf")
    text = f"x{ratio:.2f} (median of {len(new)} vs {len(old)}; threshold {threshold:.0%} and {min_seconds:g} s)"
    if not same_machine:
        return Finding(key, name, before, after, "not compared", text + "; baseline from another machine")
    if len(old) < MIN_TRIALS or len(new) < MIN_TRIALS:
        return Finding(key, name, before, after, "not compared", text + f"; needs {MIN_TRIALS} trials each")
    bound = max(before * (1 + threshold), before + min_seconds)
    consistent = min(new) > bound  # every new trial, not just the median
    if after > bound and consistent:
        return Finding(
            key,
            name,
            before,
            after,
            "regression" if timing == "binding" else "advisory",
            text + "; every trial past the threshold",
        )
    if after > bound:
        return Finding(key, name, before, after, "ok", text + "; not every trial past the threshold (noise)")
    if ratio > 1 + threshold:
        return Finding(key, name, before, after, "ok", text + f"; less than {min_seconds:g} s slower")
    return Finding(key, name, before, after, "ok", text)


def unpaired_line(baseline: dict, timing: str) -> str:
    """The one line that says what unpaired times are worth."""
    stored = f"stored at {str((baseline.get('git') or {}).get('commit'))[:7]}, {str(baseline.get('created'))[:10]}"
    if timing == "binding":
        return f"  times: unpaired ({stored}), binding: valid on their own machine only"
    return f"  times: unpaired ({stored}, maybe elsewhere): advisory, never failing"


def render(comparison: Comparison, baseline: dict, path: Path, verbose: bool = False, timing: str = "binding") -> list[str]:
    """A readable diff: the baseline's provenance, then every finding that is not ok (all with verbose)."""
    git = baseline.get("git") or {}
    lines = [
        f"gate: baseline {path} ({baseline['workload']}"
        f"{'' if not baseline.get('tier') else ', tier ' + baseline['tier']}; commit {str(git.get('commit'))[:7]}, "
        f"recorded {baseline.get('created')})"
    ]
    if baseline.get("paired"):
        lines.append("  times: paired (the baseline's commit rerun beside this tree, alternating trials)")
    else:
        lines.append(unpaired_line(baseline, timing))
    if not comparison.same_machine:
        lines.append(f"  ! baseline from another machine: {machine_key(baseline['machine'])}; times not compared")
    runs: dict[str, list[Finding]] = {}
    for f in comparison.findings:
        runs.setdefault(f.run, []).append(f)
    for run, findings in runs.items():
        shown = findings if verbose else [f for f in findings if f.verdict != "ok"]
        if not shown:
            continue
        lines.append(f"  {run}")
        for f in shown:
            lines.append(f"    {f.what:<28} {_fmt(f.old):>16} -> {_fmt(f.new):<16} {f.verdict.upper():<12} {f.note}".rstrip())
    checked = len([f for f in comparison.findings if f.verdict == "ok"])
    verdict = {PASS: "PASS", REGRESSION: "REGRESSION", FAILURE: "FAILURE"}[comparison.exit_code]
    lines.append(
        f"gate: {verdict}: {len(runs)} runs, {checked} checks ok, {len(comparison.problems())} flagged "
        f"(exit {comparison.exit_code})"
    )
    return lines


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)
