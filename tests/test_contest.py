"""The contest view on recorded results: ranking, ratios, the winner's sentence, and a table that fits
100 columns whatever the terminal's width."""

import json
from pathlib import Path

from rich.console import Console

from harness import contest

RECORDED = Path(__file__).resolve().parent.parent / "results" / "runs" / "20261123T133942Z-41adb2-shares"


def _records() -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(RECORDED.glob("*.json"))]


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
    without_shares = [r for r in _records() if r["implementation"] != "shares"]
    [case] = contest.cases(without_shares)
    assert contest.winner_sentence(case).startswith("local-gj won clique4 on rmat-16 (undirected, W=2) in 39.01 s")
    assert "3.0x faster than bigjoin (116.33 s)" in contest.winner_sentence(case)


def test_a_wrong_count_cannot_win():
    records = _records()
    records[0] = {**records[0], "status": "VAL", "verified": False}  # local-gj, the fastest, now disagrees
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
