"""`python -m harness compare`, in process: every system on one tiny graph, Kùzu against DuckDB on a
non-triangle pattern and in directed semantics, and bad input."""

import json

import duckdb
import networkx as nx

import implementations
from harness import cli

TINY = "rmat:scale=6,ef=6,a=0.57,b=0.19,c=0.19,seed=1"  # networkx takes 40 s over the diamonds of scale=8


def compare(tmp_path, *args) -> tuple[int, dict | None]:
    out = tmp_path / "out"
    code = cli.main(["compare", *args, "--results", str(out)])
    record = json.loads((out / "compare.json").read_text()) if (out / "compare.json").exists() else None
    return code, record


def canonical_edges(record: dict) -> list[tuple[int, int]]:
    glob = f"{record['dataset']['parquet']}/edges.parquet/*.parquet"
    return duckdb.sql(f"SELECT src, dst FROM read_parquet('{glob}')").fetchall()


def counts(record: dict) -> dict[str, int]:
    return {r["label"]: r["count"] for r in record["rows"]}


def test_triangle_every_system_agrees_with_networkx(spark, tmp_path, capsys):
    code, record = compare(tmp_path, "--query", "triangle", "--dataset", TINY)
    out = capsys.readouterr().out
    assert code == 0, out
    labels = [r["label"] for r in record["rows"]]
    project = [
        label for name in implementations.REGISTRY for label in ((f"{name} W=1", f"{name} W=2") if name == "bigjoin" else (name,))
    ]
    assert labels == ["native", *project, "duckdb", "kuzu", "networkx", "graphblas", "graphx", "published"]
    assert project[:9] == [
        "local-gj", "bigjoin W=1", "bigjoin W=2", "bigjoin-carry", "bigjoin-s", "delta-bigjoin", "shares", "replicated",
        "binary",
    ]  # fmt: skip
    rows = {r["label"]: r for r in record["rows"]}
    assert rows.pop("published")["status"] == "SKIP"  # a generated graph has no published count
    assert all(r["status"] == "OK" for r in rows.values()), [(r["label"], r["error"]) for r in rows.values()]
    expected = sum(nx.triangles(nx.Graph(canonical_edges(record))).values()) // 3
    assert expected > 0 and {r["count"] for r in rows.values()} == {expected}
    assert record["agreement"]["identical"] and record["agreement"]["count"] == expected and record["exit_code"] == 0
    assert record["verdict"] == "VERIFIED"
    assert record["agreement"]["outside_systems_agreeing"] == ["duckdb", "graphblas", "graphx", "kuzu", "networkx"]
    for r in rows.values():
        assert r["total_s"] is not None and r["query_s"] is not None
    assert rows["native"]["over_native"] == 1.0 and rows["local-gj"]["over_native"] > 0
    graphx = rows["graphx"]
    assert graphx["load_s"] > 0 and graphx["graphx_edges"] == record["dataset"]["edges"]
    cost = record["cost"]
    assert set(cost["ratios"]) == {"1", "2"} and cost["line"].startswith("COST")
    assert record["machine"]["cpus"] and "commit" in record["git"]
    markdown = (tmp_path / "out" / "compare.md").read_text()
    systems = 1 + len(implementations.REGISTRY) + 5  # native, the project's, the five outside peers that ran
    assert "| kuzu | 2 threads | OK |" in markdown and f"counts: identical across {systems} systems" in markdown
    assert f"counts: identical across {systems} systems" in out and "COST" in out and "native floor" in markdown
    assert [p.name for p in (tmp_path / "out").iterdir()] and not list((tmp_path / "out").glob(".*"))


def test_kuzu_equals_duckdb_on_a_non_triangle_pattern(spark, tmp_path):
    code, record = compare(tmp_path, "--query", "diamond", "--dataset", TINY, "--systems", "local-gj,duckdb,kuzu,networkx,graphx")
    assert code == 0
    got = counts(record)
    assert got["kuzu"] == got["duckdb"] == got["networkx"] == got["local-gj"] > 0
    graphx = next(r for r in record["rows"] if r["system"] == "graphx")
    assert graphx["status"] == "SKIP" and graphx["error"] == "GraphX TriangleCount counts triangles only"
    assert "1 skipped: graphx" in record["agreement"]["line"]
    assert record["cost"]["line"] == "COST: not measured: bigjoin was not run"


def test_kuzu_is_the_plain_join_in_directed_semantics(spark, tmp_path):
    """Kùzu matches with walk semantics: two query edges may bind one relationship (a = c below, or
    a = b on the loop), which the plain join counts; DuckDB and networkx agree, and so does a count by hand."""
    edges = [(1, 2), (3, 2), (2, 2), (2, 1), (4, 4), (4, 2), (5, 4), (1, 2)]
    graph = tmp_path / "g.txt"
    graph.write_text("".join(f"{s} {d}\n" for s, d in edges))
    code, record = compare(
        tmp_path,
        "--query",
        "a-b,c-b,b-b",
        "--dataset",
        str(graph),
        "--semantics",
        "directed",
        "--systems",
        "duckdb,kuzu,networkx",
    )
    distinct = set(edges)
    indegree = {v: sum(1 for s, d in distinct if d == v) for v in {d for _, d in distinct}}
    expected = sum(indegree[v] ** 2 for v in indegree if (v, v) in distinct)
    assert code == 0 and set(counts(record).values()) == {expected} == {4**2 + 2**2}


def test_agreement_among_the_project_alone_is_UNVERIFIED_and_exits_3(spark, tmp_path, capsys):
    """local-gj, BiGJoin and the native counter share no code, but all three are this project's: their
    agreement is not verification. A published count is an outside system."""
    code, record = compare(
        tmp_path, "--query", "triangle", "--dataset", TINY, "--systems", "native,local-gj,bigjoin", "--workers", "2"
    )
    out = capsys.readouterr().out
    assert code == 3 and record["verdict"] == "UNVERIFIED" and record["agreement"]["identical"]
    assert "UNVERIFIED: no system outside the project completed" in out
    code, record = compare(
        tmp_path, "--query", "triangle", "--dataset", TINY, "--systems", "native,local-gj", "--allow-unverified"
    )
    assert code == 0 and record["verdict"] == "UNVERIFIED" and record["allow_unverified"]
    code, record = compare(tmp_path, "--query", "triangle", "--dataset", "ca-GrQc", "--systems", "local-gj,published")
    assert code == 0 and record["verdict"] == "VERIFIED" and counts(record) == {"local-gj": 48_260, "published": 48_260}


def test_unknown_system_exits_2_with_one_line_and_writes_nothing(tmp_path, capsys):
    code, record = compare(tmp_path, "--query", "triangle", "--dataset", TINY, "--systems", "kuzu,neo4j")
    err = capsys.readouterr().err
    assert code == 2 and record is None and not (tmp_path / "out").exists()
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: --systems: unknown system 'neo4j'")


def test_a_disagreeing_system_is_named_and_exits_1(spark, tmp_path, monkeypatch, capsys):
    from harness.verify import peers

    def off_by_one(glob, spec, timeout):
        right = peers.run_child_peer("duckdb", "2 threads", peers.duckdb_count, (glob, spec), timeout)
        right.count += 1
        return right

    monkeypatch.setattr(peers, "duckdb_peer", off_by_one)
    code, record = compare(tmp_path, "--query", "triangle", "--dataset", TINY, "--systems", "local-gj,duckdb,networkx")
    out = capsys.readouterr().out
    assert code == 1 and record["exit_code"] == 1 and record["agreement"]["disagreeing"] == ["duckdb"]
    right = counts(record)["local-gj"]
    assert f"counts DISAGREE: {right:,} from local-gj, networkx; {right + 1:,} from duckdb" in out


def test_report_shows_the_newest_comparison_of_each_query_and_dataset(tmp_path):
    from harness.bench import report

    def write(name: str, count: int):
        directory = tmp_path / "runs" / name
        directory.mkdir(parents=True)
        record = {
            "query": {"name": "triangle"},
            "dataset": {"name": "toy"},
            "semantics": "undirected",
            "git": {"commit": "abc1234def"},
        }
        (directory / "compare.json").write_text(json.dumps(record))
        (directory / "compare.md").write_text(
            f"# compare: triangle on toy\n\n| system | count |\n|---|---:|\n| duckdb | {count} |\n"
        )

    write("20260101T000000Z-a-compare-triangle-toy", 1)
    write("20260102T000000Z-b-compare-triangle-toy", 2)
    page = report.build(tmp_path / "runs", tmp_path / "report").read_text()
    section = page.split("## Peer systems")[1]
    assert "### triangle on toy (undirected)" in section and "20260102T000000Z-b" in section and "abc1234" in section
    assert "| duckdb | 2 |" in section and "| duckdb | 1 |" not in section
