"""Past this machine, on paper (harness/bench/projection.py): constants fitted to hand-made runs whose
numbers are worked out here, the projection they give, its check against the runs, and the workload key."""

import pytest

from harness.bench import projection, workload
from harness.bench.record import RunRecord
from harness.core.errors import DataError

MIB = 1 << 20


def _record(impl, workers, edges, logical, capped=None) -> RunRecord:
    params = {"workers": workers}
    metrics = {}
    if capped:  # (peak, idle) per worker
        params["memory_per_worker"] = "1g"
        metrics["memory_cap"] = {
            "resident_peak_per_worker_bytes": [capped[0]] * workers,
            "resident_idle_per_worker_bytes": [capped[1]] * workers,
        }
    return RunRecord.from_json(
        {
            "implementation": impl,
            "status": "OK",
            "params": params,
            "query": {"name": "triangle"},
            "dataset": {"name": f"g{edges}", "edges": edges},
            "logical": logical,
            "metrics": metrics,
        }
    )


def _bigjoin(workers, edges, capped=None):
    share = 10 * edges // workers  # 10 bytes an edge, evenly
    return _record(
        "bigjoin",
        workers,
        edges,
        {
            "index": {"bytes_per_worker": [share] * workers},
            "worker_load_per_round": [[3 * edges // workers] * workers],  # 3 tuples an edge
            "peak_prefixes_in_flight_per_worker": 1,
            "peak_prefixes_in_flight": workers,
            "peak_bytes_in_flight_per_worker": 4 * MIB,
        },
        capped,
    )


def _replicated(workers, edges, capped=None):
    return _record("replicated", workers, edges, {"replicated_index_bytes": 20 * edges}, capped)


def test_the_constants_come_from_the_runs_and_the_projection_scales_them():
    edges = 1 << 20
    runs = [_bigjoin(w, edges * w) for w in (1, 2, 4)] + [_replicated(w, edges * w) for w in (1, 2, 4)]
    # capped: bigjoin holds its share (10 MiB) once and its 4 MiB in flight 5 times; replicated its 20 MiB twice
    runs += [_bigjoin(1, edges, capped=(400 * MIB + 30 * MIB, 400 * MIB)), _replicated(1, edges, capped=(440 * MIB, 400 * MIB))]
    fits = projection.fit(projection.points(runs))
    bigjoin, replicated = fits["bigjoin"], fits["replicated"]
    assert (bigjoin.index_per_edge, bigjoin.shipped_per_edge, bigjoin.copies) == (10, 3, 5)
    assert (replicated.index_per_edge, replicated.copies, replicated.idle) == (20, 2, 400 * MIB)
    spec = projection.ProjectionSpec(8, 4, 8 << 30, (projection.Target("big", 64 << 20),))
    big = projection.predict(bigjoin, 64 << 20, 8)
    assert big.index_bytes == 80 * MIB and big.resident_bytes == 400 * MIB + 80 * MIB + 5 * 4 * MIB
    assert big.shipped_bytes == 3 * (64 << 20) * 16  # tuples of two int64
    whole = projection.predict(replicated, 64 << 20, 8)
    assert whole.index_bytes == 1280 * MIB and whole.resident_bytes == 400 * MIB + 2 * 1280 * MIB
    assert whole.shipped_bytes == 8 * 1280 * MIB  # the index, once to every worker
    rows = {row[2]: row for row in projection.projection_rows(fits, spec)}
    assert rows["bigjoin"][6:8] == ["2.0 GiB", "yes"]  # 4 workers of 500 MiB
    assert rows["replicated"][6:8] == ["12 GiB", "no"]  # 4 of 2.9 GiB, over 8 GiB
    assert rows["replicated, one copy per machine"][6:8] == ["4.1 GiB", "yes"]  # 4 idle floors and one copy
    # every run agrees with its fit, as it was made to
    assert {cell for row in projection.check_rows(projection.points(runs), fits) for cell in row[4:] if cell != "-"} == {"1.00"}


def test_a_run_ships_more_per_edge_than_the_fit_shows_in_its_check():
    runs = [_bigjoin(2, 1000), _bigjoin(4, 4000)]
    runs[0].logical["worker_load_per_round"] = [[3000, 3000]]  # 6 tuples an edge on the smaller graph
    fits = projection.fit(projection.points(runs))
    assert fits["bigjoin"].shipped_per_edge == 3  # from the largest graph
    checked = {row[1]: row[5] for row in projection.check_rows(projection.points(runs), fits)}
    assert checked == {"g1000": "2.00", "g4000": "1.00"}


def test_runs_that_did_not_finish_or_are_not_projected_are_left_out():
    failed = _bigjoin(2, 1000)
    failed.status = "MEM"
    other = _record("binary", 2, 1000, {})
    assert projection.points([failed, other]) == [] and projection.fit([]) == {}


def test_the_weak_scaling_workload_states_the_paper_s_cluster():
    spec = workload.load("weak-scaling").projection
    assert (spec.workers, spec.workers_per_machine, spec.machine_bytes) == (224, 14, 256 << 30)
    assert [t.name for t in spec.graphs] == ["LiveJournal", "Twitter", "Common Crawl"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("projection: {workers: 4}\n", "needs exactly workers, workers_per_machine, machine_memory and graphs"),
        (
            "projection: {workers: 0, workers_per_machine: 1, machine_memory: 1g, graphs: {a: 1}}\n",
            "'projection.workers' must be",
        ),
        ("projection: {workers: 2, workers_per_machine: 1, machine_memory: lots, graphs: {a: 1}}\n", "'lots' is not a size"),
        (
            "projection: {workers: 2, workers_per_machine: 1, machine_memory: 1g, graphs: {a: many}}\n",
            "'projection.graphs.a' must be",
        ),
    ],
)
def test_a_bad_projection_key_is_one_line_naming_it(tmp_path, text, message):
    path = tmp_path / "w.yaml"
    path.write_text("name: w\nqueries: [triangle]\ndatasets: [rmat-small]\nimplementations: [bigjoin]\n" + text)
    with pytest.raises(DataError, match=message):
        workload.load(str(path))


def test_two_capped_sizes_fit_a_fixed_cost_and_a_rate():
    # replicated on 1M and 4M edges: 50 MiB whatever the size, then twice its 20-byte-an-edge index
    runs = [_replicated(1, e, capped=(400 * MIB + 50 * MIB + 2 * 20 * e, 400 * MIB)) for e in (1 << 20, 4 << 20)]
    f = projection.fit(projection.points(runs))["replicated"]
    assert (round(f.fixed), round(f.copies, 6)) == (50 * MIB, 2)
    assert "a = +50 MiB, r = 2.00" in projection.fit_lines({"replicated": f})[0]
    assert projection.predict(f, 16 << 20, 4).resident_bytes == pytest.approx(400 * MIB + 50 * MIB + 2 * 320 * MIB)
