"""The loads a scaling run is plotted by (harness/bench/scaling.py), the cost model's memory per worker
beside a capped run's measured peak (harness/bench/memory_model.py), and their tables and pictures, on
hand-made records whose numbers are worked out here."""

import pytest

from harness.bench import memory_model, plots, scaling, tables
from harness.bench.record import RunRecord


def _record(impl, workers, logical, metrics=None, status="OK") -> RunRecord:
    return RunRecord.from_json(
        {
            "implementation": impl,
            "status": status,
            "params": {"workers": workers},
            "query": {"name": "triangle"},
            "dataset": {"name": "g"},
            "logical": logical,
            "metrics": metrics or {},
        }
    )


def _bigjoin(workers, received_per_round, index_bytes, in_flight=(10, 16)):
    return _record(
        "bigjoin",
        workers,
        {
            "worker_load_per_round": received_per_round,
            "index": {"bytes_per_worker": index_bytes},
            "peak_prefixes_in_flight_per_worker": in_flight[0],
            "peak_prefixes_in_flight": in_flight[1],
            "peak_bytes_in_flight_per_worker": 1000,
        },
    )


def test_bigjoin_loads_are_the_busiest_and_mean_worker_over_rounds_and_in_the_worst_round():
    loads = scaling.loads(_bigjoin(2, [[5, 1], [2, 8]], [400, 600]))
    assert loads.received_total == scaling.Spread(9, 8.0)  # worker 1: 1 + 8; mean (7 + 9) / 2
    assert loads.received_worst_round == scaling.Spread(8, 5.0)
    assert (loads.communication, loads.rounds, loads.critical_path) == (16, 2, 13)  # 5 + 8
    assert loads.index_bytes == scaling.Spread(600, 500.0)
    assert loads.in_flight == scaling.Spread(10, 8.0)


def test_shares_holds_its_cell_and_binary_is_read_from_spark_s_stages():
    shares = scaling.loads(_record("shares", 4, {"load_per_cell": [3, 5, 4]}))  # a worker idles
    assert shares.index_bytes == scaling.Spread(5 * 16, 12 * 16 / 4)
    assert (shares.rounds, shares.critical_path, shares.received_total.mean) == (1, 5, 3.0)
    stages = [
        {"phase": "query", "records": 10, "max_task_records": 6},
        {"phase": "query", "records": 40, "max_task_records": 25},
    ]
    binary = scaling.loads(_record("binary", 2, {}, {"per_round": stages}))
    assert binary.received_total is None and binary.index_bytes is None  # per task, not per worker
    assert binary.received_worst_round == scaling.Spread(25, 20.0)
    assert (binary.communication, binary.rounds, binary.critical_path) == (50, 2, 31)
    assert scaling.loads(_record("binary", 2, {}, {"per_round": stages}, status="MEM")) is None


def test_the_model_s_memory_per_worker_for_each_family():
    bigjoin = _bigjoin(2, [[1, 1]], [400, 600])
    assert memory_model.predict(bigjoin).bytes_per_worker == 600 + 1000
    assert memory_model.predict(_record("shares", 4, {"max_cell_load": 7})).bytes_per_worker == 7 * 16
    binary = _record("binary", 4, {"largest_intermediate_bytes": 4001})
    assert memory_model.predict(binary).bytes_per_worker == 1001  # over W, rounded up
    beside = memory_model.beside_model(bigjoin, [1200, 3600], [1000, 2000])
    assert beside["measured_bytes"] == 3600 and beside["above_idle_bytes"] == 1600
    assert (beside["measured_over_model"], beside["above_idle_over_model"]) == (2.25, 1.0)


def test_the_scaling_table_and_figure_per_case_run_at_three_or_more_W(tmp_path):
    records = [_bigjoin(w, [[8 // w] * w], [100 // w] * w) for w in (1, 2, 4)]
    table, slopes = tables.scaling_tables(records)
    assert [c.header for c in table.columns][:3] == ["impl", "W", "index"] and table.row_count == 3
    index_row = [c._cells[0] for c in slopes.columns]
    assert index_row == ["index bytes, busiest worker", "-1.00 / -1.00"]  # 100/W per worker: as the model
    (figure,) = plots.scaling(records, tmp_path / "scaling.png")
    assert figure.name == "scaling-triangle-on-g.png" and figure.stat().st_size > 10_000
    assert tables.scaling_tables(records[:2]) == [] and plots.scaling(records[:2], tmp_path / "s.png") == []


def test_a_weak_scaling_series_is_one_case_across_its_graphs_and_holds_the_whole_graph_for_replicated(tmp_path):
    grown = []
    for scale, w in ((10, 1), (11, 2), (12, 4)):
        for r in (_bigjoin(w, [[8] * w], [100] * w), _record("replicated", w, {"replicated_index_bytes": 100 * w})):
            r.dataset["name"], r.series = f"rmat-{scale}", "the graph grown with W"
            grown.append(r)
    replicated = scaling.loads(grown[-1])
    assert replicated.index_bytes == scaling.Spread(400, 400.0) and replicated.communication == 0  # nothing exchanged
    assert {r.scaling_case for r in grown} == {"triangle on the graph grown with W"}
    table, slopes = tables.scaling_tables(grown)
    assert table.row_count == 6
    assert [c.header for c in slopes.columns] == ["quantity", "bigjoin", "replicated"]
    index = [c._cells[0] for c in slopes.columns]  # bigjoin's share flat, replicated's whole graph grows with it
    assert index == ["index bytes, busiest worker", "+0.00 / +0.00", "+1.00 / +1.00"]
    (figure,) = plots.scaling(grown, tmp_path / "weak.png")
    assert figure.name == "weak-triangle-on-the-graph-grown-with-W.png" and figure.stat().st_size > 10_000


def test_the_memory_wall_is_drawn_from_capped_runs(tmp_path):
    def capped(impl, cap, status, peak):
        r = _record(impl, 2, {})
        r.status, r.params["memory_per_worker"] = status, f"{cap}m"
        model = {"measured_bytes": peak << 20}
        if status == "OK":
            model |= {"predicted_bytes": 100 << 20, "measured_over_model": peak / 100, "above_idle_over_model": None}
        r.metrics["memory_cap"] = {"cap_bytes": cap << 20, "model": model}
        return r

    records = [capped("bigjoin", 1024, "OK", 700), capped("bigjoin", 512, "OK", 480), capped("shares", 512, "MEM", 0)]
    assert plots.memory_wall(records, tmp_path / "wall.png").stat().st_size > 10_000
    assert plots.memory_wall([_record("bigjoin", 2, {})], tmp_path / "none.png") is None
    assert tables.memory_model_table(records, "t").row_count == 2  # MEM has no measured peak to set beside


def test_bigjoin_at_one_worker_exchanges_nothing_and_still_has_its_index_and_prefixes():
    loads = scaling.loads(_bigjoin(1, [], [900], in_flight=(7, 7)))
    assert (loads.communication, loads.rounds, loads.critical_path) == (0, 0, 0)
    assert loads.index_bytes == scaling.Spread(900, 900.0) and loads.in_flight == scaling.Spread(7, 7.0)


def test_the_fitted_slope_is_the_log_log_least_squares_line():
    assert scaling.fitted_slope([(1, 64.0), (4, 16.0), (16, 4.0), (64, 1.0)]) == pytest.approx(-1.0)
    assert scaling.fitted_slope([(2, 10.0), (8, 40.0), (8, 0.0)]) == pytest.approx(1.0)  # a zero has no logarithm
    assert scaling.fitted_slope([(4, 10.0)]) is None


def test_a_capped_series_is_its_own_case_and_adds_each_worker_s_resident_peak_above_idle(tmp_path):
    runs = []
    for w in (1, 2, 4):
        r = _bigjoin(w, [[8] * w], [100] * w)
        r.params["memory_per_worker"] = "1g"
        r.metrics["memory_cap"] = {
            "resident_peak_per_worker_bytes": [500 + 10 * i for i in range(w)],
            "resident_idle_per_worker_bytes": [400] * w,
        }
        runs.append(r)
    assert scaling.loads(runs[-1]).above_idle == scaling.Spread(130, 115.0)  # 100..130 above an idle 400
    assert runs[0].scaling_case == "triangle on g, capped at 1g"  # never mixed with the uncapped runs
    uncapped = [_bigjoin(w, [[8] * w], [100] * w) for w in (1, 2, 4)]
    found = tables.scaling_tables(runs + uncapped)
    assert [t.title.split(": ")[1] for t in found[::2]] == [
        "triangle on g (busiest worker)",
        "triangle on g, capped at 1g (busiest worker)",
    ]
    assert found[0].columns[-1].header == "crit. path"  # no peaks: no column for them
    table, slopes = found[2:]
    assert table.columns[-1].header == "above idle" and table.columns[-1]._cells == ["100 B", "110 B", "130 B"]
    rows = dict(zip(slopes.columns[0]._cells, slopes.columns[1]._cells))
    assert rows["resident peak above idle, busiest worker"].endswith("/ -1.00")  # fixed input: the model's share falls
    (_, figure) = plots.scaling(runs + uncapped, tmp_path / "s.png")
    assert figure.name == "s-triangle-on-g--capped-at-1g.png" and figure.stat().st_size > 10_000
