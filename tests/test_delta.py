"""Delta-BiGJoin after every batch against a DuckDB recount (the independent oracle's SQL) of a plain
Python model of the graph (a set of directed edges updated one change at a time): awkward batches
written out by hand, then hypothesis-generated sequences of inserts, deletes, re-inserts and deletes
of absent edges, in both semantics and at several worker counts. `make test` draws a few short
sequences; `make test-thorough` draws 20 of at least 10 batches each, of patterns half with anti
pairs, and 20 more of patterns that all have one (induced counts under updates)."""

import itertools
import json
import os

import duckdb
import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from harness import cli
from harness.core.query import BUILTINS, load_query, make_join_spec, parse_pattern_string
from harness.data import datasets
from harness.data.updates import UpdateStream
from harness.verify.oracles import Pattern, sql
from implementations import RunContext
from implementations.delta_bigjoin import DeltaBiGJoin
from tests.strategies import connected_patterns, vertex_ids

THOROUGH = os.environ.get("HARNESS_HYPOTHESIS") == "thorough"


def oracle(edges: set, spec, matches: bool = False):
    """The DuckDB oracle's count (or subgraphs) of the pattern on the graph whose directed edge set is `edges`."""
    pattern = Pattern.of(spec.query, spec.semantics)
    con = duckdb.connect()
    con.execute("CREATE TABLE d (src BIGINT, dst BIGINT)")
    if edges:
        con.executemany("INSERT INTO d VALUES (?, ?)", sorted(edges))
    if spec.semantics == "undirected":
        con.execute("CREATE VIEW g AS SELECT DISTINCT least(src, dst) AS src, greatest(src, dst) AS dst FROM d WHERE src <> dst")
    else:
        con.execute("CREATE VIEW g AS SELECT * FROM d")
    if matches:
        return {pattern.instance_key(tuple(r)) for r in con.execute(sql.sql(pattern, "g", select="matches")[0]).fetchall()}
    return sql.count_on(con, pattern, "g")


def maintain(spark, initial, batches, spec, workers: int = 2, changes: int = 0, **params):
    """Run the stream; check the count after every batch. Returns the per-batch outcomes."""
    initial = sorted(set(initial))
    rows = [(s, d, diff, b, seq) for b, ops in enumerate(batches) for seq, (s, d, diff) in enumerate(ops)]
    stream = UpdateStream.of(
        "test",
        spark.createDataFrame(initial, "src bigint, dst bigint"),
        spark.createDataFrame(rows, "src bigint, dst bigint, diff int, batch int, seq long"),
    )
    impl = DeltaBiGJoin(RunContext(spark, None, spec, workers, {"changes": changes, **params}, stream=stream))
    impl.prepare()
    count = impl.count().count
    model = set(initial)
    assert count == oracle(model, spec), "initial count"
    outcomes = []
    for b, ops in enumerate(batches):
        out = impl.apply_updates(stream.batch(b))  # a batch without updates is not in the stream: empty table
        before = set(model)
        for s, d, diff in ops:  # the graph after a batch: its changes applied one by one to a set
            (model.add if diff > 0 else model.discard)((s, d))
        count += out.delta
        want = oracle(model, spec)
        assert count == want, f"batch {b} {ops}: running count {count} (delta {out.delta}), oracle {want}"
        if changes:
            added, removed = (
                oracle(model, spec, True) - oracle(before, spec, True),
                oracle(before, spec, True) - oracle(model, spec, True),
            )
            got = {(spec.instance_key(m), d) for m, d in out.changes}
            assert got == {(k, 1) for k in added} | {(k, -1) for k in removed}, f"batch {b}: changed matches"
        outcomes.append(out)
    return outcomes


# Initial graph: K4 on 0..3 (0-1 and 2-3 stored both ways) plus 4 adjacent to 0 and 1.
K4_PLUS = [(0, 1), (1, 0), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3), (3, 2), (4, 0), (1, 4)]
AWKWARD = [
    # three edges of a new triangle 5-6-7 at once (counted once); a duplicate insert; a delete of an absent edge
    [(5, 6, 1), (6, 7, 1), (7, 5, 1), (5, 9, 1), (5, 9, 1), (8, 9, -1)],
    # an edge inserted and deleted in the same batch; an existing edge deleted and inserted again
    [(6, 8, 1), (5, 8, 1), (5, 8, -1), (1, 2, -1), (1, 2, 1)],
    # one direction of 2-3 goes while the other stays; two edges of triangle 0-1-4 go at once
    [(2, 3, -1), (4, 0, -1), (1, 4, -1)],
    # the other direction of 2-3 goes; 2-3 comes back the other way round; 0-1 loses one direction
    [(3, 2, -1), (0, 1, -1), (3, 2, 1), (3, 2, -1), (2, 3, 1)],
]


@pytest.mark.parametrize("semantics", ["undirected", "directed"])
def test_awkward_batches_with_changed_matches(spark, semantics):
    spec = make_join_spec(BUILTINS["triangle"], semantics)
    outcomes = maintain(spark, K4_PLUS, AWKWARD, spec, workers=2, changes=100)
    # On a graph this small the overlay soon passes 5% of the base: later batches run on compacted bases.
    compacted = [bool(o.applied["compacted"]) for o in outcomes]
    assert not compacted[0] and any(compacted[1:])
    # Each batch reports its compaction's time, within its index update's: none without a compaction.
    assert all(
        (o.applied["compaction_s"] > 0) == c and o.applied["compaction_s"] <= o.applied["update_s"]
        for o, c in zip(outcomes, compacted)
    )
    if semantics == "undirected":
        # triangle 5-6-7 from three updates of one batch, counted once; 5-8 came and went, 1-2 went and
        # came back; two edges of 0-1-4 went at once; 2-3 and 0-1 kept one direction throughout
        assert [o.delta for o in outcomes] == [1, 0, -1, 0]
        assert outcomes[0].applied["inserts_ignored"] == 1 and outcomes[0].applied["deletes_ignored"] == 1


@pytest.mark.parametrize("by_degree", [True, False])
def test_a_pipelined_batch_labels_each_exchange_with_its_own_level(spark, by_degree):
    """One Spark job runs every level of the delta queries one after the other: each exchange's
    tuples are counted under the level it extends and its number within that level. Seeded at their
    proposers (the default), the seeds need no exchange; with the paper's Count, level 1 has two."""
    spec = make_join_spec(BUILTINS["clique4"], "undirected")
    (out,) = maintain(spark, K4_PLUS, AWKWARD[:1], spec, seed_by_degree=by_degree)
    per_round = out.counters["tuples_exchanged_per_round"]
    labels = [key.split(".") for key in per_round]
    levels = {int(level.removeprefix("level")) for level, _ in labels}
    assert levels == ({2, 3} if by_degree else {1, 2, 3}), per_round
    for level in levels:
        numbers = sorted(int(n.removeprefix("exchange")) for lv, n in labels if lv == f"level{level}")
        assert numbers == list(range(1, len(numbers) + 1)), per_round
    assert sum(per_round.values()) == out.counters["tuples_exchanged"] > 0


@pytest.mark.parametrize("semantics", ["undirected", "directed"])
@pytest.mark.parametrize("edges", ["a-b,b-c", pytest.param("a-b,b-c,c-d", marks=pytest.mark.thorough)])
def test_induced_counts_under_awkward_batches(spark, semantics, edges):
    """An inserted edge both creates induced matches and destroys them (it fills an anti-edge), and a
    deleted one the reverse: the anti pairs' delta queries count the negated change of the edges."""
    query, _ = load_query({"name": "induced", "edges": edges, "induced": True})
    ring = [(10 + i, 10 + (i + 1) % 6) for i in range(6)]  # the chord 10-13 fills induced 4-paths' anti-edges
    fill = [[(4, 0, 1)], [(2, 4, 1), (10, 13, 1)], [(2, 4, -1), (4, 3, 1), (10, 13, -1)]]
    outcomes = maintain(spark, K4_PLUS + ring, AWKWARD + fill, make_join_spec(query, semantics), workers=2, changes=100)
    signs = {d for o in outcomes[len(AWKWARD) :] for _, d in o.changes}
    assert signs == {-1, 1}
    if edges == "a-b,b-c":  # inserting 2-4 fills the wedge 2-0-4's anti-edge and makes the wedge 4-2-3
        assert {d for _, d in outcomes[len(AWKWARD) + 1].changes} == {-1, 1}


def brute_force_labelled(edges: set, spec, label: dict) -> int:
    """Instances of a small undirected labelled pattern by trying every injective map (Pattern's
    instance key folds the automorphisms that keep the labels)."""
    pattern = Pattern.of(spec.query, spec.semantics)
    undirected = {frozenset(e) for e in edges if e[0] != e[1]}
    wanted = dict(pattern.labels)
    found = set()
    for values in itertools.permutations(sorted({v for e in edges for v in e}), len(pattern.attributes)):
        at = dict(zip(pattern.attributes, values))
        if all(label.get(at[a]) == want for a, want in wanted.items()) and all(
            frozenset((at[x], at[y])) in undirected for x, y in spec.query.edges
        ):
            found.add(pattern.instance_key(values))
    return len(found)


@pytest.mark.parametrize("query", ["a:1-b,b-c:2", "a:0-b,b-c,c-a"])
def test_labelled_counts_under_awkward_batches(spark, query):
    """A labelled pattern's count through insertions and deletions: the seeds keep their positions'
    labels and every later level's proposals theirs, against a brute-force count after every batch."""
    label = {v: v % 3 for v in range(10) if v != 5}  # vertex 5 has none
    spec = make_join_spec(load_query(query)[0], "undirected")
    graph = datasets.from_edges(spark, K4_PLUS, "undirected", "labelled-k4", vertex_labels=sorted(label.items()))
    rows = [(s, d, diff, b, seq) for b, ops in enumerate(AWKWARD) for seq, (s, d, diff) in enumerate(ops)]
    stream = UpdateStream.of(
        "test",
        spark.createDataFrame(sorted(set(K4_PLUS)), "src bigint, dst bigint"),
        spark.createDataFrame(rows, "src bigint, dst bigint, diff int, batch int, seq long"),
    )
    impl = DeltaBiGJoin(RunContext(spark, graph, spec, 2, {}, stream=stream))
    impl.prepare()
    model = set(K4_PLUS)
    count = impl.count().count
    assert count == brute_force_labelled(model, spec, label) > 0
    for b, ops in enumerate(AWKWARD):
        count += impl.apply_updates(stream.batch(b)).delta
        for s, d, diff in ops:
            (model.add if diff > 0 else model.discard)((s, d))
        assert count == brute_force_labelled(model, spec, label), f"batch {b}"


def test_an_anti_pair_beside_the_seed_pair(spark):
    """a -> b with no b -> a: each seed of one is checked against the other at level 1, the last
    level (the seed rows' pending mask must name the anti-relation, or deleting 2->3 loses the
    one-way edge 3->2 it makes)."""
    query, _ = load_query({"name": "one-way", "edges": "a-b", "induced": True})
    maintain(
        spark, K4_PLUS + [(5, 5)], AWKWARD + [[(5, 5, -1), (6, 6, 1), (2, 3, 1), (3, 2, 1)]], make_join_spec(query, "directed")
    )


def test_an_atom_parallel_to_the_seed_atom(spark):
    """A query with two atoms between the same attributes (a->b and b->a): the seed atom's partner binds
    the second attribute at level 1, so its seeds are intersected there (the paper's path; found by the
    thorough suite when seeds at their proposers skipped that intersection)."""
    spec = make_join_spec(parse_pattern_string("v1-v2,v0-v1,v2-v1", "parallel"), "directed")
    maintain(spark, K4_PLUS, AWKWARD, spec, changes=100)


@pytest.mark.thorough
def test_results_do_not_depend_on_the_number_of_workers(spark):
    spec = make_join_spec(BUILTINS["clique4"], "undirected")
    deltas = {w: [o.delta for o in maintain(spark, K4_PLUS, AWKWARD, spec, workers=w)] for w in (1, 3)}
    assert deltas[1] == deltas[3]


@st.composite
def update_batches(draw, vertices: int, initial: list, min_batches: int, max_batches: int, max_ops: int):
    """Batches built against a model of the edge set, mixing on purpose: inserts of new pairs, deletes
    of present edges, re-inserts of edges deleted earlier, deletes of absent pairs, the reverse of a
    present edge (one direction of an undirected edge), and repeats of a batch's own changes, possibly
    reversed (an edge inserted and deleted in one batch). Returns (batches, kinds seen)."""
    ids = st.integers(0, vertices - 1)
    present, deleted, kinds, batches = set(initial), set(), set(), []
    # With several batches, the first four start with one change of each kind (a re-insert in a later
    # batch than its delete); the rest is drawn freely.
    forced = ["insert", "delete", "delete-absent", "reinsert"] if min_batches >= 4 else []

    def apply(op):
        ops.append(op)
        (present.add if op[2] > 0 else present.discard)(op[:2])
        (deleted.discard if op[2] > 0 else deleted.add)(op[:2])

    for b in range(draw(st.integers(min_batches, max_batches))):
        ops = []
        for i in range(draw(st.integers(1, max_ops))):
            choices = ["insert", "delete-absent"] + (["delete", "reverse"] if present else []) + (["reinsert"] if deleted else [])
            kind = forced[b] if i == 0 and b < len(forced) else draw(st.sampled_from(choices))
            # A forced delete or re-insert whose edge the earlier changes took away (repeats reversed
            # in the batch before) first makes one: an insert, then a delete of it.
            setup = []
            if kind in ("delete", "reinsert") and not present and not (kind == "reinsert" and deleted):
                setup.append((*draw(st.tuples(ids, ids)), 1))
            if kind == "reinsert" and not deleted:
                setup.append((*(setup[0][:2] if setup else draw(st.sampled_from(sorted(present)))), -1))
            for op in setup:
                apply(op)
            if kind == "insert":
                s, d = draw(st.tuples(ids, ids))
                op = (s, d, 1)
            elif kind == "delete":
                s, d = draw(st.sampled_from(sorted(present)))
                op = (s, d, -1)
            elif kind == "reverse":
                d, s = draw(st.sampled_from(sorted(present)))
                op = (s, d, draw(st.sampled_from([1, -1])))
            elif kind == "reinsert":
                s, d = draw(st.sampled_from(sorted(deleted)))
                op = (s, d, 1)
            else:
                s, d = draw(st.tuples(ids, ids))
                if (s, d) in present:
                    absent = [(s, d) for s in range(vertices) for d in range(vertices) if (s, d) not in present]
                    if not absent:
                        continue
                    s, d = absent[0]
                op = (s, d, -1)
            kinds.add(kind)
            apply(op)
        if ops and draw(st.booleans()):  # repeat some changes later in the batch, possibly reversed
            for s, d, diff in draw(st.lists(st.sampled_from(ops), max_size=4)):
                diff = diff if draw(st.booleans()) else -diff
                ops.append((s, d, diff))
                (present.add if diff > 0 else present.discard)((s, d))
                kinds.add("repeat")
        batches.append(ops)
    return batches, kinds


SEQUENCES = (
    dict(examples=20, batches=(10, 12), ops=10, vertices=12) if THOROUGH else dict(examples=3, batches=(1, 3), ops=12, vertices=9)
)


SEQUENCE_SETTINGS = settings(
    max_examples=SEQUENCES["examples"],
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.mark.property
@SEQUENCE_SETTINGS
@given(data=st.data())
def test_random_update_sequences(spark, data):
    """Random patterns, half with anti-edges or induced (where a pair is left for one)."""
    _random_sequence(spark, data, anti=data.draw(st.booleans(), label="anti"))


@pytest.mark.property
@SEQUENCE_SETTINGS
@given(data=st.data())
def test_random_induced_update_sequences(spark, data):
    """Every pattern has an anti pair (induced, or random anti-edges): an inserted edge may destroy
    matches as well as create them."""
    _random_sequence(spark, data, anti=True)


def _random_sequence(spark, data, anti: bool) -> None:
    semantics = data.draw(st.sampled_from(["undirected", "directed"]), label="semantics")
    vertices = data.draw(st.integers(3 if THOROUGH else 2, SEQUENCES["vertices"]), label="vertices")
    initial = data.draw(
        st.lists(st.tuples(st.integers(0, vertices - 1), st.integers(0, vertices - 1)), max_size=20), label="initial"
    )
    batches, kinds = data.draw(
        update_batches(vertices, sorted(set(initial)), *SEQUENCES["batches"], SEQUENCES["ops"]), label="batches"
    )
    name = data.draw(vertex_ids(vertices), label="ids")  # vertex ids spread over the whole int64 range
    initial = [(name[s], name[d]) for s, d in initial]
    batches = [[(name[s], name[d], diff) for s, d, diff in ops] for ops in batches]
    # an undirected 2-vertex pattern is complete: no pair is left for an anti-edge
    query = data.draw(connected_patterns(3 if anti else 2, 4, directed=semantics == "directed", anti=anti), label="pattern")
    workers = data.draw(st.integers(1, 3), label="workers")
    spec = make_join_spec(query, semantics)
    assume(spec.anti or not anti)  # a complete pattern leaves no pair for an anti-edge
    event("anti-edges or induced" if spec.anti else "no anti pair")  # --hypothesis-show-statistics
    maintain(spark, initial, batches, spec, workers)
    if THOROUGH:  # the sequence really mixed every kind of change
        assert len(batches) >= 10 and {"insert", "delete", "reinsert", "delete-absent"} <= kinds, kinds


def test_run_with_an_update_file_records_every_batch(spark, tmp_path):
    graph = tmp_path / "g.txt"
    graph.write_text("".join(f"{s} {d}\n" for s, d in K4_PLUS))
    stream = tmp_path / "u.txt"
    stream.write_text(
        "# src dst diff batch\n" + "".join(f"{s} {d} {diff:+d} {b}\n" for b, ops in enumerate(AWKWARD) for s, d, diff in ops)
    )
    out = tmp_path / "r.json"
    code = cli.main(
        [
            "run",
            "--query",
            "triangle",
            "--dataset",
            str(graph),
            "--impl",
            "delta-bigjoin",
            "--updates",
            str(stream),
            "--json",
            str(out),
        ]
    )
    record = json.loads(out.read_text())
    assert code == 0 and record["status"] == "OK" and record["verified"], record.get("error")
    assert [b["batch"] for b in record["batches"]] == [0, 1, 2, 3]
    for b in record["batches"]:
        assert {"batch", "delta_count", "count", "oracle_count", "seconds"} <= set(b) and b["agrees"]
        assert b["oracle"] == "networkx" and b["updates_per_s"] > 0
    assert record["count"] == record["batches"][-1]["oracle_count"]
    assert record["oracle"]["states_checked"] == 5
    # A bad line: exit 2 and a DAT record whose one-line error names file and line, no batches.
    stream.write_text("1 2 +1 0\n1 2 +2 0\n")
    bad = tmp_path / "bad.json"
    code = cli.main(
        [
            "run",
            "--query",
            "triangle",
            "--dataset",
            str(graph),
            "--impl",
            "delta-bigjoin",
            "--updates",
            str(stream),
            "--json",
            str(bad),
        ]
    )
    record = json.loads(bad.read_text())
    assert code == 2 and record["status"] == "DAT" and "batches" not in record
    assert record["error"].endswith("u.txt:2: bad field '+2' (expected [+-]?1): '1 2 +2 0'")


def test_recompute_is_a_registered_implementation_and_its_count_is_agreement(spark, tmp_path):
    """`--recompute NAME` times a fresh run of the registered implementation NAME on every state; its
    count is labelled agreement, while the oracle's recount alone verifies."""
    graph = tmp_path / "g.txt"
    graph.write_text("".join(f"{s} {d}\n" for s, d in K4_PLUS))
    stream = tmp_path / "u.txt"
    stream.write_text("".join(f"{s} {d} {diff:+d} {b}\n" for b, ops in enumerate(AWKWARD[:2]) for s, d, diff in ops))
    out = tmp_path / "r.json"
    code = cli.main(
        [
            "run",
            "--query",
            "triangle",
            "--dataset",
            str(graph),
            "--impl",
            "delta-bigjoin",
            "--updates",
            str(stream),
            "--recompute",
            "local-gj",
            "--json",
            str(out),
        ]
    )
    record = json.loads(out.read_text())
    assert code == 0 and record["status"] == "OK" and record["verified"], record.get("error")
    assert all(b["recompute_agrees"] and b["recompute_count"] == b["oracle_count"] for b in record["batches"])
    assert record["agreement"] == {
        "with": "a fresh local-gj run on every state (timing comparison, not verification)",
        "states": 2,
        "agreeing": 2,
    }
    code = cli.main(
        [
            "run",
            "--query",
            "triangle",
            "--dataset",
            str(graph),
            "--impl",
            "delta-bigjoin",
            "--updates",
            str(stream),
            "--recompute",
            "nope",
            "--json",
            str(out),
        ]
    )
    record = json.loads(out.read_text())
    assert code == 2 and record["status"] == "DAT" and "batches" not in record
    assert record["error"].startswith("params.recompute: unknown implementation 'nope' (registered: ")


def test_updates_need_a_dynamic_implementation(spark, tmp_path):
    graph = tmp_path / "g.txt"
    graph.write_text("1 2\n")
    code = cli.main(
        [
            "run",
            "--query",
            "triangle",
            "--dataset",
            str(graph),
            "--impl",
            "bigjoin",
            "--updates",
            "holdback=0.5,batch=1,batches=1",
            "--json",
            str(tmp_path / "r.json"),
        ]
    )
    record = json.loads((tmp_path / "r.json").read_text())
    assert code == 2 and record["status"] == "DAT" and "does not maintain counts under updates" in record["error"]


def test_self_loop_queries_are_refused(spark):
    spec = make_join_spec(parse_pattern_string("a-a,a-b", "looped"), "directed")
    with pytest.raises(Exception, match="self-loop query edges"):
        DeltaBiGJoin(RunContext(spark, None, spec, 2, {}, stream=None)).prepare()


def test_a_pipelined_level_reads_one_queue_file_per_stage(tmp_path):
    """A stage re-executed after a lost executor leaves a second queue file (named by its attempt) with
    the same prefixes; the level that proposes from them in the same job must read one (reading both
    over-counted batch 0 of a delta run by 386 on the cluster), and never another delta query's."""
    from types import SimpleNamespace

    import numpy as np

    from harness.core.store import write_bytes
    from implementations.delta_bigjoin import DeltaFlow
    from implementations.extension.dataflow import WorkerStage

    def flow(query: int) -> DeltaFlow:
        return DeltaFlow(
            index_root="",
            workers=1,
            tokens=np.zeros(1, np.int64),
            plan=None,
            budget=None,
            first=1,
            queues={},
            consumed={},
            run_dir=str(tmp_path / f"q{query}"),
            job_id=3,
            tag=64 * query,
        )

    job, other = flow(0), flow(1)
    for owner, stage, attempt in ((job, 1, 7), (job, 1, 9), (job, 2, 8), (other, 1, 5)):  # stage 1 ran twice
        write_bytes(owner.chunk_path(2, 0, stage, attempt), b"queued")
    worker = SimpleNamespace(job=job, p=0, stage=2)
    files = [os.path.basename(path) for path, _ in WorkerStage.queue_files(worker, 2)]
    assert files == ["j000003-s001-a7.bin", "j000003-s002-a8.bin"]


def test_a_large_batch_runs_as_several_jobs_within_the_byte_budget():
    """Every job of a batch holds at most the memory budget: its delta queries share it, and what their
    windows leave queued runs in later jobs. So with budget B per worker, what all workers hold in one
    stage stays within 2·W·B (two levels meet in a stage, as in BiGJoin's dataflow) plus the batch's
    seeds, which are not windowed (one level-1 row and one 2-prefix per change and query)."""
    import random
    import shutil

    import numpy as np

    from implementations.gj import exchange
    from implementations.gj.budget import Budget
    from implementations.indices import versioned_index
    from implementations.warm import update_batch
    from tests.test_dataflow import canonical, reference

    rnd = random.Random(7)
    rows = sorted({(rnd.randrange(200), rnd.randrange(200)) for _ in range(2500)} | {(0, v) for v in range(1, 200, 2)})
    rows = [(s, d) for s, d in rows if s != d]
    src, dst = (np.array(c, np.int64) for c in zip(*rows))
    spec, workers = make_join_spec(BUILTINS["clique4"], "undirected"), 2
    initial = np.arange(len(src)) % 10 != 0
    inserted, deleted = np.flatnonzero(~initial), np.flatnonzero(initial)[:40]
    want = reference(*canonical(list(zip(src[initial], dst[initial])), "undirected"), spec)
    present = initial.copy()
    present[inserted], present[deleted] = True, False
    want = reference(*canonical(list(zip(src[present], dst[present])), "undirected"), spec) - want
    outcomes = {}
    for bytes_ in (16 << 10, 1 << 30):
        index = versioned_index.build_locally(src[initial], dst[initial], True, workers, exchange.local_tokens(workers))
        try:
            budget = Budget(bytes_, None, 4, "test")
            delta = DeltaBiGJoin.in_process(spec, workers, index, budget)
            outcomes[bytes_] = delta.apply_updates(update_batch(src, dst, inserted, deleted))
        finally:
            shutil.rmtree(index.root, ignore_errors=True)
    small, whole = outcomes[16 << 10], outcomes[1 << 30]
    assert small.delta == whole.delta == want != 0
    assert whole.counters["spark_jobs"] == 1 and small.counters["spark_jobs"] > 1
    changes = len(inserted) + len(deleted)
    seeds = 2 * changes * (3 + 6) * 4 * small.counters["delta_queries"]  # both directions, undirected
    assert small.counters["peak_bytes_in_flight"] <= 2 * workers * (16 << 10) + seeds
    assert small.counters["peak_bytes_in_flight"] < whole.counters["peak_bytes_in_flight"]


@pytest.mark.parametrize(
    ("query", "semantics"),
    [("clique4", "undirected"), ("clique5", "undirected"), ("house", "directed"), ("diamond", "undirected")],
)
def test_shared_delta_queries_count_the_same_and_save_what_they_report(query, semantics):
    """Delta queries that agree on their first levels (`delta_sharing`) compute them once: the counts
    and changed matches equal those of the paper's separate dataflows (--no-share-prefixes), batch by
    batch, and the proposals fall by exactly the number each batch reports as saved."""
    import random
    import shutil

    import numpy as np

    from implementations.gj import exchange
    from implementations.indices import versioned_index
    from implementations.warm import update_batch

    rnd = random.Random(f"share-{query}")
    rows = sorted({(rnd.randrange(30), rnd.randrange(30)) for _ in range(420)} - {(v, v) for v in range(30)})
    src, dst = (np.array(c, np.int64) for c in zip(*rows))
    spec, workers = make_join_spec(BUILTINS[query], semantics), 2
    initial = np.arange(len(src)) % 3 != 0
    flips = [np.flatnonzero(np.array([rnd.random() < 0.2 for _ in range(len(src))])) for _ in range(3)]
    runs = {}
    for share in (True, False):
        index = versioned_index.build_locally(
            src[initial], dst[initial], semantics == "undirected", workers, exchange.local_tokens(workers)
        )
        delta = DeltaBiGJoin.in_process(spec, workers, index, params={"share_prefixes": share, "changes": 10_000})
        present, outcomes = initial.copy(), []
        try:
            for flip in flips:
                inserted, deleted = flip[~present[flip]], flip[present[flip]]
                outcomes.append(delta.apply_updates(update_batch(src, dst, inserted, deleted)))
                present[flip] = ~present[flip]
        finally:
            shutil.rmtree(index.root, ignore_errors=True)
        runs[share] = outcomes
    for shared, separate in zip(runs[True], runs[False]):
        assert shared.delta == separate.delta and shared.changes == separate.changes
        saved = shared.counters["proposals_saved_by_sharing"]
        assert separate.counters["proposals_saved_by_sharing"] == 0
        assert separate.counters["proposals"] - shared.counters["proposals"] == saved
    assert any(o.counters["proposals_saved_by_sharing"] > 0 for o in runs[True])
    assert any(o.delta for o in runs[True])
