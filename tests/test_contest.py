"""The contest view on recorded results: ranking, ratios, the winner's sentence, and a table that fits
100 columns whatever the terminal's width."""

import json
from dataclasses import replace
from pathlib import Path

from rich.console import Console

from harness.bench import contest
from harness.bench.record import RunRecord

RECORDED = Path(__file__).resolve().parent.parent / "results" / "runs" / "20261123T133942Z-41adb2-shares"


def _records() -> list[RunRecord]:
    return _records_of(RECORDED)


def _render(table, width: int = 300) -> list[str]:
    console = Console(width=width, record=True, color_system=None)
    console.print(table)
    return console.export_text().splitlines()


def test_a_recorded_contest_is_ranked_by_index_plus_query_time():
    [case] = contest.cases(_records())
    assert case.title == "clique4 on rmat-16 (undirected, W=2)"
    assert [e.implementation for e in case.entries] == ["local-gj", "shares", "bigjoin", "binary"]
    local, shares, bigjoin, binary = case.entries
    assert local.seconds == 1.4554 + 37.5515 and local.ratio == 1.0
    assert round(shares.ratio, 3) == round((3.7561 + 40.6294) / (1.4554 + 37.5515), 3)
    assert local.verified_by == ["native"] and bigjoin.verified_by == ["native"]
    assert binary.status == "TIM" and binary.seconds is None and binary.ratio is None and binary.verified_by == []
    assert local.tuples == 0 or local.tuples is None  # one process: nothing moves between workers
    assert shares.tuples and bigjoin.tuples and bigjoin.rounds


def test_the_winner_sentence_names_the_winner_the_margin_and_the_fastest_spark_implementation():
    [case] = contest.cases(_records())
    sentence = contest.winner_sentence(case)
    assert sentence == (
        "local-gj won clique4 on rmat-16 (undirected, W=2) in 39.01 s (index + query), 1.1x faster than shares "
        "(44.39 s) (1 did not finish)."
    )
    without_shares = [r for r in _records() if r.implementation != "shares"]
    [case] = contest.cases(without_shares)
    assert contest.winner_sentence(case).startswith("local-gj won clique4 on rmat-16 (undirected, W=2) in 39.01 s")
    assert "3.0x faster than bigjoin (116.33 s)" in contest.winner_sentence(case)


def test_a_wrong_count_cannot_win():
    records = _records()
    records[0] = replace(records[0], status="VAL", verified=False)  # local-gj, the fastest, now disagrees
    [case] = contest.cases(records)
    assert case.entries[0].implementation == "shares"
    assert [e.implementation for e in case.entries[-2:]] == ["local-gj", "binary"]
    assert case.entries[-2].seconds is None


def test_the_contest_table_fits_100_columns_and_wide_adds_columns():
    [case] = contest.cases(_records())
    lines = _render(contest.table(case))
    assert max(len(line) for line in lines) <= 100, "\n".join(lines)
    header = next(line for line in lines if "implementation" in line)
    for column in ("status", "verified by", "time s", "vs best", "tuples moved", "rounds", "peak mem"):
        assert column in header
    binary = next(line for line in lines if line.strip().startswith("binary"))
    assert "TIM" in binary
    wide = _render(contest.table(case, wide=True))
    assert "tuples are" in next(line for line in wide if "implementation" in line)


RUNS = RECORDED.parent
BUDGET_SWEEP = RUNS / "20261125T230224Z-e13a8d-batch-sweep"  # bigjoin and bigjoin-carry over six memory budgets
THREE_TRIALS = RUNS / "20261124T002327Z-289007-baseline-patterns-regression"  # every run three times


def _records_of(directory: Path) -> list[RunRecord]:
    return [RunRecord.from_json(json.loads(p.read_text())) for p in sorted(directory.glob("*.json"))]


def test_a_swept_parameter_gets_one_row_per_value_labelled_with_it():
    [case] = contest.cases(_records_of(BUDGET_SWEEP))
    budgets = ["1m", "4m", "16m", "64m", "256m", "1g"]
    labels = {f"{impl} budget={b}" for impl in ("bigjoin", "bigjoin-carry") for b in budgets}
    assert {e.label for e in case.entries} == labels and len(case.entries) == 12
    assert all(e.trials == 1 and e.swept.keys() == {"memory_budget"} for e in case.entries)
    slowest = case.entries[-1]  # the smallest budget: 153 rounds of small batches
    assert slowest.label == "bigjoin budget=1m" and slowest.rounds == 153
    lines = _render(contest.table(case), width=100)
    assert max(len(line) for line in lines) <= 100, "\n".join(lines)
    for label in labels:  # a long label wraps at its space: the implementation, then the value
        impl, value = label.split(" ")
        assert any(line.split()[:1] == [impl] for line in lines)
        assert any(line.split()[:1] == [value] for line in lines), value
    assert contest.winner_sentence(case).startswith("bigjoin-carry budget=256m won clique4 on rmat-13")


def test_parameters_that_do_not_vary_fold_into_one_row_per_implementation():
    records = _records()
    for r in records:
        r.params = {**r.params, "memory_budget": "64m"}  # the same for every run: not a sweep
    [case] = contest.cases(records)
    assert [e.label for e in case.entries] == ["local-gj", "shares", "bigjoin", "binary"]


def test_trials_that_vary_more_than_ten_percent_say_so_in_the_time_column():
    house = next(c for c in contest.cases(_records_of(THREE_TRIALS)) if c.query == "house")
    by_impl = {e.implementation: e for e in house.entries}
    shares, local = by_impl["shares"], by_impl["local-gj"]
    assert shares.trials == 3 and round(shares.cv, 3) == 0.117  # 2.114, 1.699, 1.791 s
    assert round(local.cv, 3) == 0.009  # 1.089, 1.109, 1.101 s
    lines = _render(contest.table(house), width=100)
    assert max(len(line) for line in lines) <= 100
    row = {line.split()[0]: line for line in lines if line.split() and line.split()[0] in by_impl}
    assert "1.79 ±12%" in row["shares"]
    assert "±" not in row["local-gj"] and "±" not in row["bigjoin"]  # 0.9% and 6.9%: steady enough
    [single] = contest.cases(_records())  # one trial: nothing to vary
    assert all(e.cv is None for e in single.entries)


def test_the_wide_table_gives_graphalytics_evps_from_the_datasets_counts():
    [case] = contest.cases(_records())
    local = case.entries[0]
    vertices, edges = 46_834, 909_287  # rmat-16, as its records say
    assert local.evps == (vertices + edges) / (1.4554 + 37.5515)
    wide = _render(contest.table(case, wide=True))
    header = next(line for line in wide if "implementation" in line)
    assert "EVPS" in header
    assert "24.5 K" in next(line for line in wide if line.strip().startswith("local-gj"))  # 956,121 / 39.0 s
    assert "EVPS" not in "".join(_render(contest.table(case)))  # the narrow table leaves it out
    binary = next(e for e in case.entries if e.implementation == "binary")
    assert binary.evps is None  # TIM: no processing time


def test_the_winner_sentence_wraps_to_the_console_width():
    [case] = contest.cases(_records())
    sentence = contest.winner_sentence(case)
    assert len(sentence) == 131  # one line would overflow COLUMNS=100
    lines = contest.winner_lines(case, 100)
    assert len(lines) == 2 and all(len(line) <= 100 for line in lines)
    assert " ".join(lines) == sentence
    assert contest.winner_lines(case, 200) == [sentence]


def test_a_reused_index_is_charged_its_build_and_the_table_and_sentence_say_so():
    """bigjoin-carry reused the index bigjoin built: its time is its own index + query plus that build,
    marked in the table, named in a note, and the sentence says what its times are."""
    records = [r for r in _records() if r.implementation in ("local-gj", "bigjoin")]
    bigjoin = next(r for r in records if r.implementation == "bigjoin")
    build = bigjoin.metrics["index_s"]
    carry = replace(
        bigjoin,
        implementation="bigjoin-carry",
        metrics={
            **bigjoin.metrics,
            "index_s": 0.04,
            "query_s": 1.0,
            "index_reused": True,
            "index_charged_s": build,
            "index_shared": [{"implementation": "bigjoin", "trial": 0, "index_s": build}],
        },
    )
    [case] = contest.cases([*records, carry])
    entry = next(e for e in case.entries if e.implementation == "bigjoin-carry")
    assert entry.seconds == 0.04 + 1.0 + build and entry.charged == ["bigjoin"]
    assert case.entries[0] is entry  # still the fastest, by its whole cost
    [row] = [line for line in _render(contest.table(case)) if line.strip().startswith("bigjoin-carry")]
    assert f"{entry.seconds:.2f}*" in row
    lines = contest.winner_lines(case, 300)
    assert lines[0] == ("* reused an index built by an earlier run, its build time charged here: bigjoin-carry's from bigjoin.")
    assert "(index + query, reused index builds charged)" in lines[1]
    [plain] = contest.cases(records)
    assert contest.shared_note(plain) is None and "(index + query)," in contest.winner_sentence(plain)
