"""The motif census (`--query motifs:3` / `motifs:4`): the induced/non-induced relation against networkx
and a brute force, bad input, the record's census section and its table, published figures, and tiny
census runs end to end (local-gj, converting and counting the induced shapes itself)."""

import io
import itertools
import random

import pytest
from rich.console import Console

from harness import cli
from harness.bench import census, workload
from harness.bench.record import RunRecord
from harness.bench.runner import Runner, RunRequest, resolve_query
from harness.core import motifs
from harness.core.errors import DataError
from harness.core.query import make_join_spec
from harness.data import datasets
from harness.verify.check import published_count, verify
from harness.verify.oracles import Pattern, choose, nx_search
from implementations.local_gj import LocalGenericJoin
from implementations.nested_loop import NestedLoop

TINY = "rmat:scale=5,ef=4,seed=3"  # 72 edges with every 4-vertex shape (28 4-cliques): networkx checks each in a second


def random_graph(rng: random.Random) -> list[tuple[int, int]]:
    n = rng.randint(4, 9)
    p = rng.uniform(0.2, 0.8)
    return [(u, v) for u, v in itertools.combinations(range(n), 2) if rng.random() < p]


def brute_force_induced(edges: list[tuple[int, int]], k: int) -> dict[str, int]:
    """Every k-vertex set's induced subgraph, named by its edge count and degree sequence (which tell the
    connected shapes on 3 and 4 vertices apart), counted."""
    present = {frozenset(e) for e in edges}
    vertices = sorted({v for e in edges for v in e})
    shape = {
        (2, (1, 1, 2)): "wedge",
        (3, (2, 2, 2)): "triangle",
        (3, (1, 1, 1, 3)): "star3",
        (3, (1, 1, 2, 2)): "path4",
        (4, (1, 2, 2, 3)): "tailed_triangle",
        (4, (2, 2, 2, 2)): "cycle4",
        (5, (2, 2, 3, 3)): "diamond",
        (6, (3, 3, 3, 3)): "clique4",
    }
    counts = dict.fromkeys((m.name for m in motifs.MOTIFS[k]), 0)
    for chosen in itertools.combinations(vertices, k):
        inside = [p for p in itertools.combinations(chosen, 2) if frozenset(p) in present]
        degrees = tuple(sorted(sum(v in p for p in inside) for v in chosen))
        name = shape.get((len(inside), degrees))
        if name is not None:
            counts[name] += 1
    return counts


def networkx_counts(edges: list[tuple[int, int]], k: int, induced: bool) -> dict[str, int]:
    return {m.name: nx_search.count_edges(edges, Pattern.of(m.query(induced), "undirected"), 0)[0] for m in motifs.MOTIFS[k]}


@pytest.mark.parametrize("k", [3, 4])
def test_converted_plain_counts_equal_networkx_s_induced_counts_on_random_graphs(k):
    rng = random.Random(40 + k)
    for _ in range(25):
        edges = random_graph(rng)
        converted = motifs.induced_from_noninduced(k, networkx_counts(edges, k, induced=False))
        assert converted == networkx_counts(edges, k, induced=True) == brute_force_induced(edges, k), edges


def test_the_containment_matrix_is_the_known_one():
    """Rows: the plain shape; columns: the induced shape containing it (star3 ... clique4)."""
    assert motifs.containment(3) == ((1, 3), (0, 1))
    assert motifs.containment(4) == (
        (1, 0, 1, 0, 2, 4),
        (0, 1, 2, 4, 6, 12),
        (0, 0, 1, 0, 4, 12),
        (0, 0, 0, 1, 1, 3),
        (0, 0, 0, 0, 1, 6),
        (0, 0, 0, 0, 0, 1),
    )
    induced = {"star3": 5, "path4": 7, "tailed_triangle": 11, "cycle4": 13, "diamond": 17, "clique4": 19}
    assert motifs.induced_from_noninduced(4, motifs.noninduced_from_induced(4, induced)) == induced


@pytest.mark.parametrize("text,k", [("motifs:3", 3), ("motifs:4", 4), (" Motifs: 4 ", 4), ("triangle", None), ("a-b", None)])
def test_census_queries_parse(text, k):
    assert motifs.parse(text) == k


@pytest.mark.parametrize("value", ["5", "x", "", "2", "-4"])
def test_a_census_of_another_size_is_a_DataError_naming_the_value(value):
    with pytest.raises(DataError, match=f"query 'motifs:{value}': a motif census is motifs:3 or motifs:4 .*got '{value}'"):
        motifs.parse(f"motifs:{value}")


def request(**kwargs) -> RunRequest:
    return RunRequest(**{"query": "motifs:4", "dataset": TINY, "impl": "local-gj", **kwargs})


class _PlainOnly(LocalGenericJoin):
    """Test-only: an implementation that counts plain patterns only, as the census's `convert` default needs."""

    name = "plain-only"
    anti_edges = False


@pytest.mark.parametrize(
    "kwargs,params,message",
    [
        (dict(semantics="directed"), {}, "query 'motifs:4': the motif census counts vertex-induced subgraphs of the simple"),
        (dict(attribute_order=("a1", "a2")), {}, "--order does not apply to a census"),
        ({}, {"census_method": "sideways"}, "params.census_method: expected one of induced, convert, got 'sideways'"),
        ({}, {"census_method": "induced"}, "induced needs an implementation that counts induced patterns; plain-only does not"),
        (dict(query="triangle"), {"census_method": "convert"}, "applies to a motif census .* not to query 'triangle'"),
        ({}, {"updates": "holdback=0.1"}, "a motif census is not maintained under updates"),
    ],
)
def test_bad_census_requests_are_DataErrors(kwargs, params, message):
    with pytest.raises(DataError, match=message):
        resolve_query(request(**kwargs), _PlainOnly, {"updates": None, "census_method": None, **params})


def test_compare_refuses_a_census_by_name():
    from harness.bench import compare

    with pytest.raises(DataError, match="query 'motifs:4': a motif census runs with `run` or `bench`"):
        compare.plan("motifs:4", "rmat-small")


def test_a_bad_census_run_is_DAT_before_spark_starts():
    runner = Runner()
    record = runner.run(request(query="motifs:5"))
    assert record.status == "DAT" and record.count is None and "got '5'" in record.error
    assert runner._spark is None


def test_the_method_defaults_to_convert_unless_the_class_counts_induced_patterns():
    plan = census.plan(4, _PlainOnly, None, "undirected", None)
    assert plan.method == "convert" and [r.motif.name for r in plan.runs] == [m.name for m in motifs.MOTIFS[4]]
    assert all(not r.spec.anti for r in plan.runs) and [bool(r.induced_spec.anti) for r in plan.runs] == [True] * 5 + [False]
    assert census.plan(3, NestedLoop, None, "undirected", None).method == "induced"
    assert census.plan(4, LocalGenericJoin, None, "undirected", None).method == "induced"


def test_the_motifs_workload_checks_and_expands_to_one_census_run_per_implementation():
    wl = cli._checked_workload("motifs", None)
    assert {r.query for r in wl.requests()} == {"motifs:4"}
    assert {"local-gj", "shares", "bigjoin", "bigjoin-s", "binary"} <= set(wl.implementations)
    assert workload.load("motifs", "large").datasets == ["rmat-16"]


def test_a_workload_with_a_bad_census_fails_before_spark(tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text("queries: ['motifs:x']\ndatasets: [rmat-small]\nimplementations: [local-gj]\n")
    with pytest.raises(DataError, match="got 'x'"):
        cli._checked_workload(str(path), None)


def test_the_registry_carries_graphminer_s_induced_counts_and_verify_checks_a_census_shape_against_them():
    published = datasets.resolve("soc-LiveJournal1").published
    assert published["induced_motifs"]["cycle4"] == 4_966_580_492
    for m in motifs.MOTIFS[4]:
        spec = make_join_spec(m.query(True), "undirected")
        assert published_count(published, spec) == published["induced_motifs"][m.name]
    plain_star = make_join_spec(motifs.MOTIFS[4][0].query(False), "undirected")  # not the induced shape
    assert published_count(published, plain_star) is None
    cycle = make_join_spec(motifs.MOTIFS[4][3].query(True), "undirected")
    verdict = verify(published, "unused", 10**8, cycle, 4_966_580_492, None, "published")
    assert verdict["verified"] and verdict["checks"][0]["name"] == "published"


def test_an_induced_shape_on_a_large_graph_is_checked_by_the_native_census_oracle():
    diamond = make_join_spec(motifs.MOTIFS[4][4].query(True), "undirected")
    assert choose("auto", Pattern.of(diamond.query, "undirected"), 10**6) == ["native"]


def outcome(name: str, status: str = "ok", agrees=True) -> dict:
    check = {"name": name, "status": status, "count": 3 if status == "ok" else None, "agrees": agrees, "seconds": 0.5}
    verified, disagrees = agrees is True, agrees is False
    reason = None if verified or disagrees else f"{name} {status}"
    return {"oracle": check, "checks": [check], "verified": verified, "disagrees": disagrees, "unverified_reason": reason}


def test_the_record_s_checks_sum_each_oracle_over_the_shapes_and_a_skipped_one_never_passes():
    plan = census.plan(3, LocalGenericJoin, "convert", "undirected", None)
    plain = {"wedge": 12, "triangle": 3}
    counted = [
        census.Counted(r, None, 0.1, 0.2, i > 0, plain[r.motif.name], {"candidates": 5}, {}) for i, r in enumerate(plan.runs)
    ]
    section, total, counters, _ = census.summarize(plan, counted)
    assert [e["count"] for e in section["motifs"]] == [12 - 3 * 3, 3] and total == 6 and counters == {"candidates": 10}
    verdicts = iter([outcome("networkx"), outcome("networkx", "skipped", None)])
    result = census.verify(section, counted, lambda spec, count, matches: next(verdicts), "convert")
    [check] = result["checks"]
    assert check["agrees"] is True and check["status"] == "skipped" and check["motifs"] == ["wedge"]
    assert result["verified"] is False and result["unverified_reason"] == "triangle: networkx skipped"
    assert [e["verification"]["status"] for e in section["motifs"]] == ["agrees", "unverified"]
    verdicts = iter([outcome("networkx"), outcome("networkx", agrees=False)])
    assert census.verify(section, counted, lambda spec, count, matches: next(verdicts), "convert")["disagrees"]


def render(tables) -> str:
    out = io.StringIO()
    console = Console(file=out, width=200, highlight=False)
    for t in tables:
        console.print(t, width=100)
    return out.getvalue()


def census_record(impl: str, counts: dict[str, int], method: str = "convert") -> RunRecord:
    total = sum(counts.values())
    entries = [
        {
            "name": m.name,
            "label": m.label,
            "short": m.short(),
            "count": counts[m.name],
            "share": counts[m.name] / total,
            "verification": {"checks": [{"name": "networkx", "agrees": True}]},
        }
        for m in motifs.MOTIFS[4]
    ]
    return RunRecord.from_json(
        {
            "implementation": impl,
            "status": "OK",
            "query": {"name": "motifs:4"},
            "dataset": {"name": "g"},
            "semantics": "undirected",
            "params": {"workers": 2},
            "census": {"k": 4, "method": method, "total": total, "motifs": entries},
        }
    )


def test_the_census_table_shows_each_shape_s_count_share_checks_and_agreement_in_100_columns():
    counts = {"star3": 9000, "path4": 700, "tailed_triangle": 250, "cycle4": 40, "diamond": 9, "clique4": 1}
    wrong = dict(counts, cycle4=41)
    text = render(census.tables([census_record("local-gj", counts), census_record("shares", wrong, "induced")]))
    assert max(len(line.rstrip()) for line in text.splitlines()) <= 100
    lines = {line.split()[0]: line for line in text.splitlines() if line.strip()}
    assert "1-2 1-3 1-4" in lines["3-star"] and "9,000" in lines["3-star"] and "90%" in lines["3-star"]
    assert "0.01%" in lines["4-clique"] and "networkx" in lines["4-clique"] and "all 2 agree" in lines["4-clique"]
    assert "40" in lines["4-cycle"] and "1 of 2; shares 41" in lines["4-cycle"]
    assert "10,000" in lines["total"]
    assert "counted as: convert (local-gj); induced (shares)" in text


def test_a_census_by_conversion_and_one_of_induced_patterns_agree_and_are_verified(runner):
    """End to end on a tiny graph: local-gj counts the plain shapes and the harness converts; then it
    counts the induced shapes itself (its default), whose matches networkx compares too. One index per census."""
    converted = runner.run(request(oracle="networkx", params={"census_method": "convert"}))
    assert converted.status == "OK", converted.error or converted.unverified_reason
    section = converted.census
    assert section["method"] == "convert" and converted.query["name"] == "motifs:4"
    counts = {e["name"]: e["count"] for e in section["motifs"]}
    assert all(counts.values()) and converted.count == section["total"] == sum(counts.values())
    assert sum(e["share"] for e in section["motifs"]) == pytest.approx(1.0)
    assert all(e["verification"]["status"] == "agrees" and not e["counted"]["induced"] for e in section["motifs"])
    assert converted.metrics["index_s"] == pytest.approx(sum(e["index_s"] for e in section["motifs"]), abs=1e-3)
    [check] = converted.checks
    assert check["name"] == "networkx" and check["agrees"] and check["count"] == converted.count
    induced = runner.run(request(oracle="networkx"))
    assert induced.status == "OK", induced.error or induced.unverified_reason
    assert induced.census["method"] == "induced" and {e["name"]: e["count"] for e in induced.census["motifs"]} == counts
    compared = [c for e in induced.census["motifs"] for c in e["verification"]["checks"]]
    assert all(c["reused"] and c.get("matches_compared") for c in compared)  # the first census's answers, matches listed
