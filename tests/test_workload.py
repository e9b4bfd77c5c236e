"""Workload YAML: schema errors name the key, tiers override, the matrix expands (no Spark)."""

from pathlib import Path

import pytest

from harness.bench import workload
from harness.core.errors import DataError

SHIPPED = sorted(p.stem for p in workload.WORKLOAD_DIR.glob("*.yaml"))


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_workload_loads_with_every_tier(name):
    import yaml

    tiers = [None, *((yaml.safe_load((workload.WORKLOAD_DIR / f"{name}.yaml").read_text()).get("tiers")) or {})]
    for tier in tiers:
        wl = workload.load(name, tier)
        assert wl.requests(), f"{name} ({tier}) expands to no runs"


def test_shipped_workloads_cover_the_builtin_queries():
    assert {"triangle", "clique4", "diamond", "house", "clique5", "custom"} <= set(SHIPPED)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "w.yaml"
    path.write_text(text)
    return path


BASE = "queries: [triangle]\ndatasets: [rmat-small]\nimplementations: [binary]\n"


@pytest.mark.parametrize(
    "extra,message",
    [
        ("trails: 3\n", "unknown key 'trails'"),
        ("trials: 0\n", "key 'trials' must be a positive integer"),
        ("trials: two\n", "key 'trials' must be a positive integer"),
        ("semantics: [sideways]\n", r"key 'semantics\[0\]' must be one of"),
        ("workers: [2, x]\n", r"key 'workers\[1\]' must be a int"),
        ("oracle: sql\n", "key 'oracle' must be one of"),
        ("params: [1]\n", "key 'params' must be a mapping"),
        ("tiers: {big: {datasetz: [x]}}\n", r"tiers.big: unknown key 'datasetz'"),
        ("time_threshold: -0.1\n", "key 'time_threshold' must be a positive number"),
        ("min_seconds: soon\n", "key 'min_seconds' must be a positive number"),
    ],
)
def test_schema_errors_name_the_key(tmp_path, extra, message):
    path = write(tmp_path, BASE + extra)
    with pytest.raises(DataError, match=message):
        workload.load(str(path), "big" if "tiers" in extra else None)


def test_missing_key_and_bad_yaml(tmp_path):
    with pytest.raises(DataError, match="missing key 'implementations'"):
        workload.load(str(write(tmp_path, "queries: [triangle]\ndatasets: [x]\n")))
    with pytest.raises(DataError, match=r"w.yaml:\d+: invalid YAML"):
        workload.load(str(write(tmp_path, "queries: [triangle\n")))
    with pytest.raises(DataError, match="unknown workload 'nope'"):
        workload.load("nope")


def test_matrix_expansion_and_tiers(tmp_path):
    path = write(
        tmp_path,
        BASE.replace("[triangle]", "[triangle, clique4]")
        + "semantics: [undirected, directed]\nworkers: [1, 4]\ntrials: 3\nparams: {batch: [10, 100], flag: true}\n"
        "tiers:\n  big: {datasets: [rmat-16, rmat-18]}\n",
    )
    wl = workload.load(str(path))
    runs = wl.requests()
    assert len(runs) == 2 * 2 * 2 * 2 * 3  # queries x semantics x workers x batch x trials
    assert {r.params["batch"] for r in runs} == {10, 100} and all(r.params["flag"] is True for r in runs)
    big = workload.load(str(path), "big")
    assert big.datasets == ["rmat-16", "rmat-18"] and big.tier == "big"
    with pytest.raises(DataError, match="no tier 'huge'"):
        workload.load(str(path), "huge")


def test_update_stream_key(tmp_path):
    wl = workload.load(str(write(tmp_path, BASE + "updates: {holdback: 0.1, batch: 500, batches: 3, deletes: 0.25}\n")))
    assert wl.requests()[0].params["updates"] == "holdback=0.1,batch=500,batches=3,deletes=0.25,seed=1"
    with pytest.raises(DataError, match=r"key 'updates': .*unknown key 'batchez'"):
        workload.load(str(write(tmp_path, BASE + "updates: {batchez: 3}\n")))


def _readme_workloads() -> set[tuple[str, str | None]]:
    """(workload, tier) behind every figure the documentation gives (README.md, every docs/*.md and
    results/README.md), plus `make bench` itself and the gate."""
    import re

    root = Path(workload.WORKLOAD_DIR).parent
    pages = [root / "README.md", *sorted((root / "docs").glob("*.md")), root / "results" / "README.md"]
    text = "\n".join(page.read_text() for page in pages)
    found = {(m.group(1), m.group(3)) for m in re.finditer(r"make bench WORKLOAD=([\w-]+)( TIER=([\w-]+))?", text)}
    found |= {(m.group(1), m.group(3)) for m in re.finditer(r"harness bench ([\w-]+)( --tier ([\w-]+))?", text)}
    return found | {("triangle", None), ("gate", None)}


def test_the_gate_and_every_readme_figure_refuse_unverified_results():
    """allow_unverified is for a user who knowingly accepts unchecked counts: no workload behind a
    README figure, nor the gate, may set it (in its base or in the tier used)."""
    pairs = _readme_workloads()
    assert ("delta", "clique4") in pairs and ("bigjoin", "limits") in pairs and len(pairs) >= 15
    for name, tier in sorted(pairs, key=str):
        wl = workload.load(name, tier)
        assert wl.allow_unverified is False, f"{name} ({tier or 'default'}) sets allow_unverified"


def test_allow_unverified_and_expected_timeouts_keys(tmp_path):
    base = "name: w\nqueries: [triangle]\ndatasets: [rmat-small]\nimplementations: [binary, bigjoin]\n"
    wl = workload.load(str(write(tmp_path, base + "allow_unverified: true\nexpected_timeouts: [binary]\n")))
    assert wl.allow_unverified and {r.impl: r.timeout_expected for r in wl.requests()} == {"binary": True, "bigjoin": False}
    assert all(r.allow_unverified for r in wl.requests())
    with pytest.raises(DataError, match="key 'allow_unverified' must be true or false"):
        workload.load(str(write(tmp_path, base + "allow_unverified: yes please\n")))
    with pytest.raises(DataError, match=r"key 'expected_timeouts\[0\]' must be a str"):
        workload.load(str(write(tmp_path, base + "expected_timeouts: [3]\n")))


def test_expected_timeouts_as_a_mapping_give_each_implementation_its_own_timeout(tmp_path):
    base = "name: w\nqueries: [triangle]\ndatasets: [rmat-small]\nimplementations: [binary, bigjoin]\ntimeout_s: 100\n"
    wl = workload.load(str(write(tmp_path, base + "expected_timeouts: {binary: 7.5}\n")))
    runs = {r.impl: (r.timeout_s, r.timeout_expected) for r in wl.requests()}
    assert runs == {"binary": (7.5, True), "bigjoin": (100.0, False)}
    with pytest.raises(DataError, match=r"key 'expected_timeouts.binary' must be a positive number of seconds"):
        workload.load(str(write(tmp_path, base + "expected_timeouts: {binary: soon}\n")))


def test_expected_mem_under_a_cap_of_its_own_expects_nothing_under_another(tmp_path):
    base = (
        "name: w\nqueries: [triangle]\ndatasets: [rmat-small]\nimplementations: [replicated, bigjoin]\n"
        "params: {memory_per_worker: [1g, 640m]}\n"
    )
    wl = workload.load(str(write(tmp_path, base + "expected_mem: {640M: [replicated]}\n")))
    runs = {(r.impl, r.params["memory_per_worker"]): r.mem_expected for r in wl.requests()}
    assert runs == {
        ("replicated", "1g"): False,
        ("replicated", "640m"): True,
        ("bigjoin", "1g"): False,
        ("bigjoin", "640m"): False,
    }
    wl = workload.load(str(write(tmp_path, base + "expected_mem: [replicated]\n")))  # a list: under every cap
    assert {(r.impl, r.params["memory_per_worker"]) for r in wl.requests() if r.mem_expected} == {
        ("replicated", "1g"),
        ("replicated", "640m"),
    }
    with pytest.raises(DataError, match=r"key 'expected_mem.lots' must be a size such as 640m"):
        workload.load(str(write(tmp_path, base + "expected_mem: {lots: [replicated]}\n")))
    with pytest.raises(DataError, match=r"key 'expected_mem.640m\[0\]' must be a str"):
        workload.load(str(write(tmp_path, base + "expected_mem: {640m: [3]}\n")))


def test_grow_with_workers_runs_each_graph_at_its_own_W_in_one_series(tmp_path):
    base = "name: w\nqueries: [triangle]\ndatasets: [rmat-10, rmat-11, rmat-12]\nimplementations: [bigjoin, replicated]\n"
    wl = workload.load(str(write(tmp_path, base + "workers: [1, 2, 4]\ngrow_with_workers: true\n")))
    runs = sorted((r.dataset, r.workers, r.impl, r.series) for r in wl.requests())
    grown = workload.WEAK_SCALING
    assert runs == sorted(
        (d, w, i, grown) for d, w in (("rmat-10", 1), ("rmat-11", 2), ("rmat-12", 4)) for i in ("bigjoin", "replicated")
    )
    assert all(r.series is None for r in workload.load(str(write(tmp_path, base + "workers: [1, 2]\n"))).requests())
    # under a cap too: each graph at its own W, the implementations innermost (a cap and W start once)
    capped = workload.load(
        str(write(tmp_path, base + "workers: [1, 2, 4]\ngrow_with_workers: true\nparams: {memory_per_worker: 1g}\n"))
    )
    assert [(r.dataset, r.workers, r.impl) for r in capped.requests()] == [
        (d, w, i) for d, w in (("rmat-10", 1), ("rmat-11", 2), ("rmat-12", 4)) for i in ("bigjoin", "replicated")
    ]
    with pytest.raises(DataError, match=r"key 'grow_with_workers' pairs datasets\[i\] with workers\[i\]: 3 datasets, 2 workers"):
        workload.load(str(write(tmp_path, base + "workers: [1, 2]\ngrow_with_workers: true\n")))
    with pytest.raises(DataError, match="key 'grow_with_workers' must be true or false"):
        workload.load(str(write(tmp_path, base + "workers: [1, 2, 4]\ngrow_with_workers: maybe\n")))


def test_fresh_executors_asks_for_a_session_per_run(tmp_path):
    base = "name: w\nqueries: [triangle]\ndatasets: [rmat-small]\nimplementations: [bigjoin, shares]\n"
    assert all(r.fresh_executors for r in workload.load(str(write(tmp_path, base + "fresh_executors: true\n"))).requests())
    assert not any(r.fresh_executors for r in workload.load(str(write(tmp_path, base))).requests())
    with pytest.raises(DataError, match="key 'fresh_executors' must be true or false"):
        workload.load(str(write(tmp_path, base + "fresh_executors: 1\n")))
