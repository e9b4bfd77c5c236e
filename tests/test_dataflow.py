"""The pipelined BiGJoin dataflow (bigjoin), bigjoin-carry and bigjoin-s (on lists in blocks) run in this process (`BiGJoin.in_process`):
the stage code the Spark tasks run, on the same argument types, with the shuffle done by hand, so
many workers and budgets are cheap. Every count against local-gj's; the memory budget's bound on
what is in flight; windows that take whole candidate sets where the next level carries them; and the
pieces: blob order and layout, the driver-built index against the Spark-built one, the budget rule."""

from __future__ import annotations

import os
import random
import shutil
import tracemalloc

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import implementations
from harness.bench.runner import RunRequest
from harness.core.errors import DataError
from harness.core.query import BUILTINS, make_join_spec, parse_pattern_string
from harness.data import datasets
from harness.verify.oracles.nx_search import count_edges
from harness.verify.oracles.pattern import Pattern
from implementations import RunContext
from implementations.bigjoin_carry import CarryPlan
from implementations.extension.dataflow_kernels import _subtract_by
from implementations.gj import exchange
from implementations.gj.budget import COPY_FACTOR, Budget, capped_budget, default_budget, parse_size, worker_memory
from implementations.gj.constants import BOTH, CURRENT, FORWARD, OLD, REVERSE
from implementations.gj.extension_kernels import Changes, IndexPartition, Lists
from implementations.gj.plan import ExtensionPlan
from implementations.indices import block_index, distributed_index
from implementations.local_gj import LocalGenericJoin
from tests.strategies import connected_patterns, labelled_patterns, messy_graphs, vertex_labels

THOROUGH = os.environ.get("HARNESS_HYPOTHESIS") == "thorough"
VARIANTS = ("bigjoin", "bigjoin-carry", "bigjoin-s")


@pytest.fixture(scope="module", autouse=True)
def warm():
    """As the Spark workers start: every kernel compiled or loaded first."""
    from implementations import warm

    warm.warm_up()


def canonical(rows: list[tuple[int, int]], semantics: str) -> tuple[np.ndarray, np.ndarray]:
    """The relation harness.data.datasets keeps: undirected, one (low, high) row per edge and no loops;
    directed, the distinct rows."""
    undirected = semantics == "undirected"
    pairs = sorted({(min(s, d), max(s, d)) for s, d in rows if s != d} if undirected else set(rows))
    return np.array([s for s, _ in pairs], np.int64), np.array([d for _, d in pairs], np.int64)


class _Edges:
    """What local-gj reads of a graph: its edge arrays."""

    def __init__(self, src, dst):
        self.arrays = (src, dst)

    def edge_arrays(self):
        return self.arrays


def reference(src, dst, spec) -> int:
    impl = LocalGenericJoin(RunContext(None, _Edges(src, dst), spec, 1))  # type: ignore[arg-type]
    impl.prepare()
    return impl._run(0)[0]


def in_process(name: str, src, dst, spec, workers: int, budget: Budget, block_size: int = 3):
    """bigjoin-s runs on lists cut into blocks of `block_size` entries (small: every path of the kernels)."""
    index = distributed_index.build_on_driver(src, dst, spec.semantics == "undirected", workers)
    run_on = block_index.build_locally(index, exchange.local_tokens(workers), block_size) if name == "bigjoin-s" else index
    try:
        return implementations.get(name).in_process(spec, workers, run_on, budget).extend(50)  # type: ignore[attr-defined]
    finally:
        index.close()
        shutil.rmtree(run_on.root, ignore_errors=True)


def budgets(m: int):
    return st.one_of(
        st.integers(16, 200).map(lambda b: Budget(None, b, m, "test")),
        st.integers(4096, 1 << 16).map(lambda b: Budget(b, None, m, "test")),
        st.just(Budget(1 << 30, None, m, "test")),
    )


@st.composite
def cases(draw, anti: bool = False):
    semantics = draw(st.sampled_from(["undirected", "directed"]))
    rows = draw(messy_graphs(16 if THOROUGH else 12, 80 if THOROUGH else 50, wide_ids=True))
    query = draw(connected_patterns(2, 5, directed=semantics == "directed", anti=anti))
    spec = make_join_spec(query, semantics)
    return (
        semantics,
        rows,
        spec,
        draw(st.integers(1, 4)),
        draw(budgets(len(spec.attribute_order))),
        draw(st.sampled_from([1, 2, 5, 1000])),
    )


def networkx_count(src, dst, spec) -> int:
    """The reference for anti-edges and induced patterns (local-gj's is for plain ones)."""
    return count_edges(list(zip(src.tolist(), dst.tolist())), Pattern.of(spec.query, spec.semantics), 0)[0]


@settings(max_examples=120 if THOROUGH else 30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.booleans().flatmap(cases))
def test_local_gj_counts_what_it_lists(case):
    """local-gj counts its last level without listing it (a `below` or `differ` test by a bound search,
    and once the first `limit` matches are written) to the matches it lists, and to networkx's count."""
    semantics, rows, spec, *_ = case
    src, dst = canonical(rows, semantics)
    if not len(src):
        return
    impl = LocalGenericJoin(RunContext(None, _Edges(src, dst), spec, 1))  # type: ignore[arg-type]
    impl.prepare()
    listed, out, _ = impl._run(1 << 20)  # more than any of these graphs' matches: every match listed
    distinct = len({tuple(r) for r in out[: min(listed, 1 << 20)].tolist()})
    assert impl._run(0)[0] == impl._run(3)[0] == listed == distinct == networkx_count(src, dst, spec), spec.query.describe()


@pytest.mark.parametrize("anti", [False, True], ids=["plain", "anti"])
@pytest.mark.parametrize("name", VARIANTS)
def test_counts_equal_a_reference_for_any_workers_and_budget(name, anti):
    """Plain patterns against local-gj; with `anti`, anti-edges and induced patterns (anti-relations on
    every path of the kernels: lists in blocks of a few entries, carried levels) against networkx."""
    examples = (100 if THOROUGH else 15) if anti else (150 if THOROUGH else 25)
    expect = networkx_count if anti else reference

    @settings(max_examples=examples, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(case=cases(anti))
    def check(case):
        semantics, rows, spec, workers, budget, block_size = case
        src, dst = canonical(rows, semantics)
        if not len(src):
            return
        count, counters, sample = in_process(name, src, dst, spec, workers, budget, block_size)
        assert count == expect(src, dst, spec), (spec.query.describe(), semantics, workers, budget, block_size)
        assert len(sample) == min(count, 50)
        assert counters.totals["kernels_compiled"] == 0  # the module's warm-up covered every type

    check()


@st.composite
def labelled_cases(draw):
    semantics = draw(st.sampled_from(["undirected", "directed"]))
    rows = draw(messy_graphs(16 if THOROUGH else 12, 80 if THOROUGH else 50, wide_ids=True))
    query = draw(labelled_patterns(2, 5, directed=semantics == "directed", anti=draw(st.booleans())))
    spec = make_join_spec(query, semantics)
    labels = draw(vertex_labels(rows))
    return (
        semantics,
        rows,
        spec,
        labels,
        draw(st.integers(1, 4)),
        draw(budgets(len(spec.attribute_order))),
        draw(st.sampled_from([1, 2, 1000])),
    )


@pytest.mark.parametrize("name", [v for v in VARIANTS if implementations.REGISTRY[v].vertex_labels])
def test_labelled_counts_equal_networkx_for_any_workers_and_budget(name):
    """Labelled patterns (anti-edges in half) with each rank's label in the plan, as prepare() sets it:
    every path of the kernels, lists in blocks of a few entries included, against networkx."""

    @settings(max_examples=60 if THOROUGH else 12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(case=labelled_cases())
    def check(case):
        semantics, rows, spec, labels, workers, budget, block_size = case
        src, dst = canonical(rows, semantics)
        if not len(src):
            return
        vertices = np.array(sorted(v for v, _ in labels), np.int64)
        label_of = dict(labels)
        index = distributed_index.build_on_driver(src, dst, semantics == "undirected", workers)
        run_on = block_index.build_locally(index, exchange.local_tokens(workers), block_size) if name == "bigjoin-s" else index
        try:
            impl = implementations.get(name).in_process(spec, workers, run_on, budget)  # type: ignore[attr-defined]
            impl.plan.rank_labels(index.ids, vertices, np.array([label_of[v] for v in vertices], np.int64))
            count, counters, _sample = impl.extend(50)
        finally:
            index.close()
            shutil.rmtree(run_on.root, ignore_errors=True)
        edges = list(zip(src.tolist(), dst.tolist()))
        expected = count_edges(edges, Pattern.of(spec.query, spec.semantics), 0, label_of)[0]
        assert count == expected, (spec.query.describe(), semantics, workers, budget, block_size, labels)
        assert counters.totals["kernels_compiled"] == 0  # the labelled plan has the warmed-up types

    check()


@pytest.mark.parametrize("name", VARIANTS)
def test_a_byte_budget_bounds_what_is_in_flight(name):
    """With budget B per worker: what all workers hold in one stage stays within 2·W·B (two levels meet
    in the stage where one hands its prefixes to the next), plus for bigjoin-carry one candidate set
    per worker (a window never cuts the set the next level carries)."""
    rnd = random.Random(5)
    rows = [(rnd.randrange(300), rnd.randrange(300)) for _ in range(3000)] + [(0, v) for v in range(1, 300, 2)]
    src, dst = canonical(rows, "undirected")
    spec = make_join_spec(BUILTINS["clique4"], "undirected")
    workers, budget = 2, Budget(32 << 10, None, 4, "test")
    count, counters, _ = in_process(name, src, dst, spec, workers, budget)
    assert count == reference(src, dst, spec) > 0
    assert counters.jobs > 1  # the budget, not the output, set the batches
    largest_list = int(np.bincount(np.concatenate([src, dst])).max()) * 4
    assert counters.peak_bytes <= 2 * workers * budget.bytes + (workers * largest_list if name == "bigjoin-carry" else 0)
    whole, *_ = in_process(name, src, dst, spec, workers, Budget(1 << 30, None, 4, "test"))
    assert whole == count


@pytest.mark.parametrize("pattern", ["a-b,a-c,a-d", "a-b,b-c,c-d", "a-b,b-c,c-a,a-d", "a-b,b-c,!a-c"])
@pytest.mark.parametrize("name", VARIANTS)
def test_a_last_level_counted_where_it_is_proposed_holds_no_proposal(name, pattern):
    """A 3-star's, a 4-path's or a tailed triangle's last vertex comes from one list: the dataflow counts
    each list's length where it is proposed (less the values it must differ from), so the byte budget
    bounds that level's prefixes only (B' unbounded, `batch_per_level` None) and its window is cut by
    rows alone; counts equal local-gj's under a small budget and a large one."""
    rnd = random.Random(7)
    rows = [(rnd.randrange(200), rnd.randrange(200)) for _ in range(1500)] + [(0, v) for v in range(1, 200, 3)]
    src, dst = canonical(rows, "undirected")
    spec = make_join_spec(parse_pattern_string(pattern), "undirected")
    m = len(spec.attribute_order)
    counted = ExtensionPlan.from_spec(spec).last_from_one_list
    assert counted == ("!" not in pattern)  # the wedge's last level also subtracts its anti-relation
    count, counters, sample = in_process(name, src, dst, spec, 2, Budget(16 << 10, None, m, "test"))
    expect = reference(src, dst, spec) if counted else networkx_count(src, dst, spec)
    assert count == expect > 0 and len(sample) == min(count, 50)
    if name != "bigjoin-s":  # its hub's list cut into blocks of 3 makes a row per block, which the budget does not count
        assert counters.peak_bytes <= 2 * 2 * (16 << 10) + (2 * 800 if name == "bigjoin-carry" else 0)
    whole, *_ = in_process(name, src, dst, spec, 2, Budget(1 << 30, None, m, "test"))
    assert whole == count
    described = Budget(16 << 10, None, m, "test").counting_last(counted).describe()["batch_per_level"]
    assert (described[f"L{m - 1}"] is None) == counted


def test_carry_plan_carries_the_clique_levels_and_nothing_where_nothing_is_reused():
    def carried(query, semantics="undirected"):
        return CarryPlan.of(ExtensionPlan.from_spec(make_join_spec(BUILTINS[query], semantics))).describe()["carried_levels"]

    assert carried("triangle") == [2]
    assert carried("clique4") == [2, 3]
    assert carried("clique5") == [2, 3, 4]
    path = make_join_spec(BUILTINS["triangle"].__class__("path", (("a", "b"), ("b", "c"))), "undirected")
    assert CarryPlan.of(ExtensionPlan.from_spec(path)).describe()["carried_levels"] == []


# A 4-clique a, b, c, d with a pendant e on a, attributes in the order e, a, b, c, d; directed, so
# no inequality filters a level (undirected, e must differ from b, c and d, and nothing carries).
PENDANT_CLIQUE = "e-a,a-b,a-c,a-d,b-c,b-d,c-d"


@pytest.mark.parametrize(
    "anti,carried",
    [
        ("!e-b,!e-c,!e-d", [3, 4]),  # e's anti-relation is subtracted at b's level and inherited by c's and d's
        ("!e-b", [4]),  # b's candidates lack the values that follow e, which c's need
        ("!e-d", [3, 4]),  # d's level subtracts it beside intersecting c's list
    ],
)
def test_a_level_carries_its_parents_anti_relations_only_where_it_has_them_too(anti, carried):
    spec = make_join_spec(parse_pattern_string(f"{PENDANT_CLIQUE},{anti}"), "directed", ("e", "a", "b", "c", "d"))
    plan = ExtensionPlan.from_spec(spec)
    carry = CarryPlan.of(plan)
    assert carry.describe()["carried_levels"] == carried
    for level in carried:  # the inherited anti-relation is not applied again
        inherited = int(plan.anti_count[level - 1])
        assert carry.extra_count[level] == 1 + int(plan.anti_count[level]) - inherited
    rnd = random.Random(2)
    src, dst = canonical([(rnd.randrange(10), rnd.randrange(10)) for _ in range(60)], "directed")
    expected = networkx_count(src, dst, spec)
    count, _, _ = in_process("bigjoin-carry", src, dst, spec, 3, Budget(None, 7, 5, "test"))
    assert count == expected > 0


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_anti_intersect_reads_a_changed_list_as_its_view_holds_it(data):
    """`_subtract_by` on a key with changes (as Delta-BiGJoin's views have them): in view CURRENT the
    base list with the changes applied, in view OLD the base (no changes before this batch)."""
    key = 50
    values = st.lists(st.integers(0, 100).filter(lambda v: v != key), unique=True)
    base, flips, cands = data.draw(values), data.draw(values), sorted(data.draw(values))
    current = set(base) ^ set(flips)  # a change adds a value the base lacks and removes one it holds
    forward, reverse = sorted(v for v in base if v > key), sorted(v for v in base if v < key)
    added_f, added_r = sorted(v for v in flips if v > key), sorted(v for v in flips if v < key)
    lists = Lists.of(np.array([key], np.int32), np.array([[0, len(forward)], [0, len(reverse)]], np.int64),
                     np.array(forward, np.int32), np.array(reverse, np.int32))  # fmt: skip
    offsets = np.array([[0, len(added_f)], [0, len(added_r)], [len(added_f)] * 2, [len(added_r)] * 2], np.int64)
    signs = [np.array([-1 if v in base else 1 for v in added], np.int8) for added in (added_f, added_r)]
    changes = Changes.of(np.array([key], np.int32), offsets, np.array(added_f, np.int32), np.array(added_r, np.int32), *signs)
    ix = IndexPartition(lists, changes)
    for view, holds in ((CURRENT, current), (OLD, set(base))):
        for kind, side in ((FORWARD, lambda v: v > key), (REVERSE, lambda v: v < key), (BOTH, lambda v: True)):
            out = np.zeros(len(cands), np.int32)
            kept = _subtract_by(
                ix, kind, view, np.int32(key), np.array(cands, np.int32), 0, len(cands), out, 0, np.zeros(2, np.int64)
            )
            assert out[:kept].tolist() == [v for v in cands if not (v in holds and side(v))], (view, kind)


def test_blobs_arrive_in_sender_and_sequence_order_as_aligned_views():
    batches = []
    for sender in (1, 0):
        for seq in range(3):
            blob = exchange.pack(
                exchange.BlobKind.CANDIDATES, 0, [np.arange(seq + 1, dtype=np.int32), np.ones(3, np.int8)], (sender, seq)
            )
            head = blob[:40].view(np.int64)
            head[3], head[4] = sender, seq  # as if packed by task `sender`
            batches += list(exchange.blob_batches([0], [blob]))
    random.Random(1).shuffle(batches)
    got = list(exchange.received(iter(batches), 0))
    assert [meta for _, meta, _ in got] == [(s, q) for s in (0, 1) for q in range(3)]
    for _, (_, seq), arrays in got:
        assert arrays[0].tolist() == list(range(seq + 1)) and arrays[1].tolist() == [1, 1, 1]
        assert all(a.flags.aligned for a in arrays)
    buffer, places = exchange.layout(
        exchange.BlobKind.PREFIXES, [(1, (7,), [(np.int32, 5)]), (0, (), [(np.int32, 2), (np.int8, 3)])]
    )
    for start, end, offsets in places:
        assert (end - start) % 8 == 0 and all(o % 8 == 0 for o in offsets)
    _, dest, meta, arrays = exchange.unpack(buffer[places[0][0] : places[0][1]])
    assert (dest, meta, len(arrays[0])) == (1, (7,), 5)


@pytest.mark.parametrize("semantics", ["undirected", "directed"])
def test_the_driver_builds_the_index_spark_builds(spark, semantics):
    rows = [(10**12 + 7, -5), (-5, 3), (3, 10**12 + 7), (3, 3), (8, -5), (-5, 8), (42, 3), (3, 42), (9, 9)]
    graph = datasets.from_edges(spark, rows, semantics, "index-paths")
    undirected = semantics == "undirected"
    for workers in (1, 3):
        on_spark = distributed_index.build(spark, graph.df, undirected, workers)
        assert_the_driver_builds(on_spark, *graph.edge_arrays())


def assert_the_driver_builds(index, src, dst) -> None:
    """`build_on_driver` of the same edges writes `index`'s every partition, file by file and dtype by
    dtype; both indices are removed after."""
    on_driver = distributed_index.build_on_driver(src, dst, index.undirected, index.workers)
    try:
        assert on_driver.describe() == index.describe()
        assert np.array_equal(on_driver.ids, index.ids) and np.array_equal(on_driver.loop_vertices, index.loop_vertices)
        for p in range(index.workers):
            a, b = (distributed_index.load_partition(str(i.root), p)[0].lists for i in (on_driver, index))
            for x, y in zip(a, b):
                assert np.array_equal(x, y) and x.dtype == y.dtype
    finally:
        index.close()
        on_driver.close()


@pytest.mark.parametrize("undirected", [True, False])
def test_a_spark_build_s_tasks_write_the_partitions_the_driver_writes(undirected):
    # Spark's build (each entry routed to its key's owner, whose counting sort of what it received is
    # the partition) run in process, against the driver's own sorts: file by file, dtype by dtype, on
    # a hub, a self-loop and vertices with no forward list.
    rng = np.random.default_rng(11)
    src = np.concatenate([rng.integers(0, 60, 500), np.full(90, 7), [5]])
    dst = np.concatenate([rng.integers(0, 200, 500), rng.integers(0, 200, 90), [5]])
    pairs = np.stack([src, dst], 1)
    pairs = np.unique(np.sort(pairs, axis=1) if undirected else pairs, axis=0)  # canonical: each edge once
    src, dst = pairs[:, 0], pairs[:, 1]
    for workers in (1, 4):
        assert_the_driver_builds(
            distributed_index.build_locally(src, dst, undirected, workers, exchange.local_tokens(workers)), src, dst
        )


def test_budget_sizes_and_the_default_rule():
    assert parse_size("512m") == 512 << 20 and parse_size("1.5GiB") == 3 << 29 and parse_size("4096") == 4096
    with pytest.raises(DataError, match="--memory-budget"):
        parse_size("lots")
    local = {"spark.driver.memory": "8g", "cores": "2"}
    assert worker_memory(local, "local[*]", 2)[0] == 4 << 30
    assert worker_memory(local, "local[*]", 1)[0] == 8 << 30
    cluster = {"spark.executor.memory": "2g", "spark.executor.cores": "1", "spark.executor.pyspark.memory": "1g"}
    assert worker_memory(cluster, "spark://127.0.0.1:7077", 4)[0] == 3 << 30
    assert default_budget(4 << 30, 100 << 20) == (1 << 30) - (100 << 20)
    assert default_budget(32 << 20, 0) == 16 << 20  # never below 16 MiB
    # under a cap: what the cap leaves above the idle worker and the index, over the copies in flight
    assert capped_budget(1 << 30, 430 << 20, 10 << 20) == (584 << 20) // COPY_FACTOR
    assert capped_budget(512 << 20, 430 << 20, 0) == (82 << 20) // COPY_FACTOR  # below uncapped runs' 16 MiB floor
    assert capped_budget(512 << 20, 520 << 20, 0) == 1 << 20  # no room: the smallest batch (the run ends MEM)
    budget = Budget(1 << 20, None, 3, "test")
    assert budget.proposals(2) == (1 << 20) // 4 and budget.proposals(1) == (1 << 20) // (4 * 6)


def test_under_a_cap_the_default_budget_leaves_out_the_idle_worker_the_executor_jvm_and_the_index():
    # The rule as `prepare` applies it: the context's WorkerCap, read when the budget is chosen. The
    # executor JVM is reserved the larger of its heap ceiling and what it grew so far.
    src, dst = np.array([0, 0, 1, 2]), np.array([1, 2, 2, 3])
    index = distributed_index.build_on_driver(src, dst, True, 2)
    impl = implementations.get("bigjoin").in_process(make_join_spec(BUILTINS["triangle"], "undirected"), 2, index)
    grown = [0]
    impl.ctx.worker_cap = implementations.WorkerCap(1 << 30, 300 << 20, lambda: grown[0], 100 << 20)
    before = impl.choose_budget()
    assert before.bytes == capped_budget(1 << 30, 400 << 20, index.partition_bytes())  # the heap's ceiling
    grown[0] = 50 << 20  # grown, but less than the heap may: the ceiling still holds
    assert impl.choose_budget().bytes == before.bytes
    grown[0] = 200 << 20  # the index build's shuffles grew an executor JVM past its heap (off-heap too)
    after = impl.choose_budget()
    assert after.bytes == capped_budget(1 << 30, 500 << 20, index.partition_bytes()) < before.bytes
    assert (
        "1.0 GiB" in after.source
        and "300.0 MiB resident at the start" in after.source
        and "200.0 MiB for the executor JVM" in after.source
        and "heap ceiling, 100.0 MiB" in after.source
    )
    grown[0] = -(50 << 20)  # an executor that shrank leaves the idle worker's figure as it was
    assert impl.choose_budget().bytes == before.bytes
    impl.ctx.worker_cap = implementations.WorkerCap(1 << 30, 300 << 20, lambda: 0)  # no heap named: growth alone
    assert impl.choose_budget().bytes == capped_budget(1 << 30, 300 << 20, index.partition_bytes())
    index.close()


def test_bad_budgets_are_data_errors(runner):
    both = runner.run(RunRequest("triangle", "rmat:scale=6,ef=4,seed=2", "bigjoin", params={"batch": 10, "memory_budget": "1m"}))
    assert both.status == "DAT" and "--batch and --memory-budget" in both.error
    tiny = runner.run(RunRequest("triangle", "rmat:scale=6,ef=4,seed=2", "bigjoin-carry", params={"memory_budget": "10"}))
    assert tiny.status == "DAT" and "--memory-budget 10" in tiny.error
    given = runner.run(RunRequest("triangle", "rmat:scale=6,ef=4,seed=2", "bigjoin", params={"memory_budget": "1m"}))
    assert given.status == "OK" and given.logical["memory_budget_bytes"] == 1 << 20
    assert given.logical["budget_source"] == "--memory-budget"


def test_the_block_index_is_the_same_routed_a_few_entries_at_a_time(monkeypatch):
    # BiGJoin-S's build routes a partition's entries in chunks of ROUTE_ROWS (bounded copies): with
    # chunks of 7 entries every file of every partition is the one routing the partition at once makes
    rng = np.random.default_rng(5)
    src, dst = rng.integers(0, 40, 600), rng.integers(0, 40, 600)
    src[:80] = 3  # a hub whose list is cut into blocks, some held whole everywhere
    index = distributed_index.build_on_driver(src, dst, True, 4)
    whole = block_index.build_locally(index, exchange.local_tokens(4), 8)
    monkeypatch.setattr(block_index, "ROUTE_ROWS", 7)
    chunked = block_index.build_locally(index, exchange.local_tokens(4), 8)
    try:
        assert whole.split_keys > 0
        names = sorted(os.path.relpath(os.path.join(d, f), whole.root) for d, _, fs in os.walk(whole.root) for f in fs)
        assert any(n.startswith("p3") for n in names)
        for name in names:
            assert np.array_equal(np.load(whole.root / name), np.load(chunked.root / name)), name
    finally:
        index.close()
        shutil.rmtree(whole.root, ignore_errors=True)
        shutil.rmtree(chunked.root, ignore_errors=True)


def test_the_block_build_holds_a_chunk_of_entries_not_the_partition(monkeypatch):
    # Under a cap at W = 4 on the LiveJournal twin the build held a partition's entries about eight
    # times over (key, value, kind, block, whole and their concatenations) and its Python worker was
    # killed; it now reads the lists a chunk at a time and holds only the split keys' entries whole.
    rng = np.random.default_rng(7)
    src, dst = rng.integers(0, 3000, 200_000), rng.integers(0, 3000, 200_000)
    src[:4000] = 5  # one hub, cut into blocks
    index = distributed_index.build_on_driver(src, dst, True, 2)
    monkeypatch.setattr(block_index, "ROUTE_ROWS", 4096)
    monkeypatch.setattr(exchange, "current_partition", lambda: 0)
    root = block_index._new_root(index)
    scatter = block_index._scatter(str(index.root), str(root), 2, 512, exchange.local_tokens(2))
    tracemalloc.start()
    try:
        batches = sum(1 for _ in scatter(iter([None])))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        index.close()
        shutil.rmtree(root, ignore_errors=True)
    share = int(index.bytes_per_worker()[0])
    assert batches > 10 and peak < share // 2, (batches, peak, share)
