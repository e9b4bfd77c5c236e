"""The detail tables a bench prints, on recorded results: they fit 100 columns, the width `make bench`
keeps to under COLUMNS=100."""

import json
from pathlib import Path

from rich.console import Console

from harness.bench.record import RunRecord
from harness.bench.tables import delta_rows, delta_table, fmt_si

RUNS = Path(__file__).resolve().parent.parent / "results" / "runs"
# Delta-BiGJoin on rmat-18: triangle with a BiGJoin recompute of every state, and clique4 without one.
DELTA = [RUNS / "20261126T164956Z-326af0-delta", RUNS / "20261126T141708Z-7aa33a-delta"]
OLD_DELTA = RUNS / "20261126T054557Z-5fb4cc-delta"  # recorded before the versioned index timed its batches


def _records(*directories: Path) -> list[RunRecord]:
    return [RunRecord.from_json(json.loads(p.read_text())) for d in directories for p in sorted(d.glob("*.json"))]


def _render(renderable, width: int = 300) -> list[str]:
    console = Console(width=width, record=True, color_system=None)
    console.print(renderable)
    return console.export_text().splitlines()


def test_the_delta_table_fits_100_columns_with_one_table_per_case():
    lines = _render(delta_table(_records(*DELTA), "delta throughput by batch size (Figure 6)"))
    assert max(len(line) for line in lines) <= 100, "\n".join(lines)  # it was 203 wide
    titles = [line.strip() for line in lines if line.strip().startswith("delta throughput")]
    assert titles == [  # cases in name order, as delta_rows sorts them
        "delta throughput by batch size (Figure 6): clique4 on rmat-18 (undirected)",
        "delta throughput by batch size (Figure 6): triangle on rmat-18 (undirected)",
    ]
    rows = [line.split() for line in lines if line.strip().startswith(("1,000", "10,000", "100,000"))]
    assert len(rows) == 6
    ten_k = " ".join(rows[4])  # triangle, two batches of 10K: 0.44 s median, 22,604 updates/s, 11.6x the recompute
    assert ten_k.startswith("10,000 0.44 22.6 K 997 K 441 K 0.051 0 5.1 (11.6x) 2 / 2"), ten_k


def test_rates_keep_three_figures_and_an_si_prefix():
    assert [fmt_si(v) for v in (999, 3002.1, 22_603.9, 4_450_116.4, 175_264_517, 2.5e9)] == [
        "999",
        "3 K",
        "22.6 K",
        "4.45 M",
        "175 M",
        "2.5 G",
    ]
    assert fmt_si(None) == "-"


def test_delta_runs_recorded_before_update_s_still_summarise():
    rows = delta_rows(_records(OLD_DELTA))
    assert rows and all(row["update_s"] is None and row["batches"] > 0 for row in rows)  # make report summarises every run
