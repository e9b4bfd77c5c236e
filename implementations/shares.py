"""`shares` (§1.2.2, Appendix F): Shares/HyperCube on Spark. One shuffle sends every tuple of every
relation to each cell of the share grid that agrees with its hashed attributes; each cell then runs
local-gj's Generic Join over the fragments it received, and the driver sums the cells' counts.

A match is counted in exactly one cell: every attribute lies in some relation, so all of a match's
tuples (and only they) agree on the cell whose coordinate for attribute a is h_a(value of a).

The grid shuffle is pure Spark SQL (hash, explode over the free coordinates, repartition by a routing
token per cell), so the rows shipped are real shuffle records; only the per-cell join is Python
(numpy + numba, once per cell)."""

from __future__ import annotations

import math
import time
from typing import NamedTuple

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from harness.core.errors import ExecutionError
from harness.core.query import in_query_order
from implementations import hypercube, local_gj
from implementations.base import Implementation, Listed, Outcome
from implementations.gj import exchange, match_files
from implementations.gj.constants import BOTH, FORWARD, REVERSE
from implementations.gj.csr import build_csr
from implementations.gj.exchange import BlobKind
from implementations.gj.match_files import MatchSink, part_name
from implementations.gj.plan import ExtensionPlan
from implementations.indices.distributed_index import max_over_mean, rank_vertices

MATCH_SAMPLE = 5001  # matches each cell keeps during a count, so verifying small results needs no rerun
FIRST_WORK = 1e6  # a listing cell's first slice, in units of estimated work (1 + degree² a vertex)
FIRST_WORK_LIMITED = 1e3  # with a limit: a small first slice, so a cell stops soon after N
_ARRANGEMENT = "shares:ranked-edges"


class Shares(Implementation):
    name = "shares"
    kernels = frozenset({"local-gj", "bigjoin"})  # its cells run local-gj on CSR lists
    anti_edges = True
    vertex_labels = True  # each shipped relation is semi-joined with its attributes' labelled vertices before the shuffle
    description = "Shares/HyperCube: optimal integer shares, one shuffle, local Generic Join per cell"
    writes_matches = True  # each cell writes the matches it lists, from its task (Parquet, slice by slice)

    def prepare(self) -> None:
        spec = self.ctx.spec
        self.plan = ExtensionPlan.from_spec(spec)
        self.plan.require_connected_order(spec)
        if _ARRANGEMENT in self.ctx.arrangements:
            self.index_reused = True
        else:
            self.ctx.arrangements[_ARRANGEMENT] = self._rank_edges()
        self.edges, self.ids, edge_rows, loop_rows = self.ctx.arrangements[_ARRANGEMENT]
        self.layout = CellLayout.of(self.plan)
        self.labels = self._labels_by_vertex() if spec.query.labels else None
        sizes = self.layout.sizes(edge_rows, loop_rows) if self.labels is None else self._labelled_sizes()
        self.relations = self.layout.relations(spec.attribute_order, sizes)
        self.allocation = hypercube.allocate(spec.attribute_order, self.relations, self.ctx.workers)
        self._sample: tuple[int, list[CellResult]] | None = None
        self._python_us = np.zeros(3, np.int64)

    def _rank_edges(self) -> tuple[DataFrame, np.ndarray | None, int, int]:
        """(edges, rank -> id, edge rows, self-loop rows). Undirected graphs are relabelled by
        (degree, id) rank, as local-gj does, so cells' forward lists stay short; the order must be
        global, since the symmetry-breaking filters compare values across cells."""
        edges = self.ctx.edges
        if self.ctx.spec.semantics == "undirected":
            ids, rank = rank_vertices(edges, undirected=True)
            table = F.broadcast(self.ctx.spark.createDataFrame(pa.table({"v": ids, "r": rank})))
            s, d = table.alias("s"), table.alias("d")
            ranked = (
                edges.join(s, edges.src == F.col("s.v"))
                .join(d, edges.dst == F.col("d.v"))
                .select(F.least("s.r", "d.r").alias("src"), F.greatest("s.r", "d.r").alias("dst"))
                .cache()
            )
            rows = ranked.count()
            return ranked, ids[np.argsort(rank)], rows, 0
        rows = edges.count()
        return edges, None, rows, edges.filter(F.col("src") == F.col("dst")).count()

    # ---- vertex labels ---------------------------------------------------------------------------

    def _labels_by_vertex(self) -> DataFrame:
        """(vertex, label) of the labelled vertices, in the ids the shipped edges carry: the graph's
        own (directed), or the ranks `_rank_edges` gave them (undirected, mapped on the driver)."""
        graph = self.ctx.graph
        if self.ids is None:
            assert graph.labels_df is not None  # the harness refuses a labelled pattern on an unlabelled graph
            return graph.labels_df
        self.plan.rank_labels(self.ids, *graph.label_arrays())
        ranks = np.flatnonzero(self.plan.vertex_label >= 0)
        return self.ctx.spark.createDataFrame(pa.table({"vertex": ranks, "label": self.plan.vertex_label[ranks]}))

    def _with_labels(self, rows: DataFrame, bound: dict[int, str]) -> DataFrame:
        """`rows` keeping those whose column bound to each labelled position carries its label: a
        left_semi join with that label's vertices (broadcast, so the query keeps its one shuffle)."""
        assert self.labels is not None
        for j, column in sorted(bound.items()):
            wanted = int(self.plan.label[j])
            if wanted >= 0:
                having = self.labels.filter(F.col("label") == wanted).select(F.col("vertex").alias(column))
                rows = rows.join(F.broadcast(having), on=column, how="left_semi")
        return rows

    def _labelled_sizes(self) -> list[int]:
        """Each shipped relation's size after its label filters, for the share search: one Spark job
        counts the edges by (source label, destination label, self-loop), -1 for an unlabelled end."""
        assert self.labels is not None
        src = self.labels.select(F.col("vertex").alias("src"), F.col("label").alias("_ls"))
        dst = self.labels.select(F.col("vertex").alias("dst"), F.col("label").alias("_ld"))
        counted = (
            self.edges.join(F.broadcast(src), "src", "left")
            .join(F.broadcast(dst), "dst", "left")
            .groupBy(F.coalesce("_ls", F.lit(-1)), F.coalesce("_ld", F.lit(-1)), F.col("src") == F.col("dst"))
            .count()
            .collect()
        )
        pairs = [LabelPairCount(int(r[0]), int(r[1]), bool(r[2]), int(r[3])) for r in counted]
        return self.layout.labelled_sizes(self.plan.label, pairs)

    # ---- the grid -------------------------------------------------------------------------------

    def coordinate(self, position: int, value: Column) -> Column:
        """Cell coordinate of attribute `position` for a value: its own hash function mod its share."""
        share = self.allocation.shares[self.ctx.spec.attribute_order[position]]
        if share == 1:
            return F.lit(0)
        return F.pmod(F.xxhash64(F.lit(position), value.cast("long")), F.lit(share))

    def cell_of(self, values: dict[int, Column], free: Column | None = None) -> Column:
        """Cell id (mixed radix over attribute positions) from the bound positions' values; the other
        positions take their coordinate from `free`, a number in [0, product of their shares)."""
        shares = [self.allocation.shares[a] for a in self.ctx.spec.attribute_order]
        cell, stride, free_stride = F.lit(0), 1, 1
        for j, share in enumerate(shares):
            if j in values:
                coord = self.coordinate(j, values[j])
            elif share > 1:
                assert free is not None  # a position left open with a share > 1 takes its coordinate from free
                coord = F.pmod(F.floor(free / free_stride), F.lit(share))
                free_stride *= share
            else:
                coord = F.lit(0)
            cell = cell + coord * stride
            stride *= share
        return cell

    def _shipped(
        self, rows: DataFrame, relation: int, early: tuple[int, str], late: tuple[int, str], tokens: np.ndarray
    ) -> DataFrame:
        """Every (token, relation, early, late) copy of one relation's tuples, one per cell that agrees
        with it: (position, column) give each end's attribute position and source column."""
        bound = dict([early, late])
        if self.labels is not None:  # filtered before the shuffle: a cell receives only labelled values
            rows = self._with_labels(rows, bound)
        shares = [self.allocation.shares[a] for a in self.ctx.spec.attribute_order]
        copies = math.prod(s for j, s in enumerate(shares) if j not in bound)
        if copies > 1:
            rows = rows.withColumn("_free", F.explode(F.sequence(F.lit(0), F.lit(copies - 1))))
        cell = self.cell_of({j: F.col(c) for j, c in bound.items()}, F.col("_free") if copies > 1 else None)
        token = F.element_at(F.array(*[F.lit(int(t)).cast("long") for t in tokens]), (cell + 1).cast("int"))
        return rows.select(
            token.alias("token"),
            F.lit(relation).alias("relation"),
            F.col(early[1]).cast("long").alias("early"),
            F.col(late[1]).cast("long").alias("late"),
        )

    def _run(self, limit: int, listing: CellListing | None = None) -> list[CellResult]:
        """Ship, join in every cell, and return each cell's result: its count and a sample of up to
        `limit` matches, or (`listing`) the matches it listed and wrote."""
        cells = self.allocation.cells
        tokens = exchange.routing_tokens(self.ctx.spark, cells)
        edges, parts = self.edges, []
        loops = edges.filter(F.col("src") == F.col("dst"))
        for i, (early, late, kind) in enumerate(self.layout.shipped):
            if kind == LOOP:
                parts.append(self._shipped(loops, i, (early, "src"), (early, "src"), tokens))
            if kind in (FORWARD, BOTH):
                parts.append(self._shipped(edges, i, (early, "src"), (late, "dst"), tokens))
            if kind in (REVERSE, BOTH):
                parts.append(self._shipped(edges, i, (early, "dst"), (late, "src"), tokens))
        shipped = parts[0]
        for part in parts[1:]:
            shipped = shipped.unionByName(part)
        rows = (
            shipped.repartition(cells, "token")
            .mapInArrow(_cell_join(self.plan, self.layout, limit, tokens, listing), exchange.SCHEMA)
            .collect()
        )
        empty = np.zeros(len(self.relations), np.int64), np.zeros(2, np.int64), np.zeros((0, self.plan.m), np.int64)
        result = {c: CellResult(c, 0, 0, 0.0, *empty, -1) for c in range(cells)}  # a task may skip an empty partition
        self._python_us = np.zeros(3, np.int64)  # kernel (build + join), unpack, reading the shuffle
        for row in rows:
            _, cell, meta, (received, work, matches) = exchange.unpack(row.payload)
            m = CellMeta(*meta)
            result[cell] = CellResult(
                cell, m.found, m.vertices, m.join_us / 1e6, received, work, matches.reshape(-1, self.plan.m), m.attempt
            )
            self._python_us += (m.join_us + m.build_us, m.unpack_us, m.read_us)
        return [result[c] for c in range(cells)]

    # ---- the interface --------------------------------------------------------------------------

    def count(self) -> Outcome:
        cells = self._run(MATCH_SAMPLE)
        self._sample = (sum(c.found for c in cells), cells)
        return self._outcome(cells)

    def write_matches(self, path: str | None, limit: int | None) -> Listed:
        """One shuffle as for a count; each cell then lists its matches slice by slice and its task
        writes them (original ids) into a Parquet file of its own in `path`; the driver keeps the files
        of the attempts whose results it received. A limit stops each cell after its slice that reaches
        it (the shuffle still ships everything, as Shares has one round), and the last file is cut to it
        by Spark. first_match_s is the end of the one Spark job: the driver learns of matches no sooner."""
        # self.ids None (directed): the cells ship the graph's own ids
        with match_files.sink_for(self.ctx.spec, path, self.ids, limit) as sink:
            started = time.perf_counter()
            cells = self._run(0, CellListing(sink, limit))
        took = time.perf_counter() - started
        found = sum(c.found for c in cells)
        if path is not None:
            accepted = {part_name(0, 0, c.cell, c.attempt) for c in cells if c.attempt >= 0}
            match_files.finish(self.ctx.spark, path, accepted, limit)
        outcome = self._outcome(cells)
        return Listed(
            found if limit is None else min(limit, found),
            outcome.counters,
            metrics=outcome.metrics,
            first_match_s=took if found else None,
        )

    def _outcome(self, cells: list[CellResult]) -> Outcome:
        """The count and the counters of the cells' results."""
        total = sum(c.found for c in cells)
        alloc, relations = self.allocation, self.relations
        received = np.stack([c.received for c in cells])
        load = received.sum(axis=1)
        work = np.stack([c.work for c in cells])
        per_relation = received.sum(axis=0)
        positive = relations[: self.layout.positive]  # an anti-relation covers nothing
        rho, tau = hypercube.edge_cover_and_packing(self.ctx.spec.attribute_order, positive)
        shipped = int(load.sum())
        counters = {
            "share_method": "exact search over integer shares with product <= W; least tuples per cell, then least total",
            "share_vectors_examined": alloc.candidates,
            "shares": dict(alloc.shares),
            "cells": alloc.cells,
            "workers": self.ctx.workers,
            "relations": [
                {
                    "relation": r.name,
                    "size": r.size,
                    "replication": hypercube.replication(alloc.shares, r),
                    "shipped": int(per_relation[i]),
                }
                for i, r in enumerate(relations)
            ],
            "input_tuples": sum(r.size for r in relations),  # the anti-relations' too: they are shipped
            "tuples_shipped": shipped,
            "tuples_shipped_predicted": alloc.communication,
            "replication_factor": round(shipped / max(1, sum(r.size for r in relations)), 4),
            "load_per_cell": load.tolist(),
            "max_cell_load": int(load.max(initial=0)),
            "mean_cell_load": round(float(load.mean()), 2) if len(load) else 0.0,
            "predicted_cell_load": round(alloc.load_per_cell, 2),
            "cell_load_skew": max_over_mean(load),
            "count_per_cell": [int(c.found) for c in cells],
            "candidates_per_cell": work[:, 0].tolist(),
            "probes_per_cell": work[:, 1].tolist(),
            "local_work": int(work.sum()),
            "max_cell_work": int(work.sum(axis=1).max(initial=0)),
            "mean_cell_work": round(float(work.sum(axis=1).mean()), 2) if len(work) else 0.0,
            "join_seconds_per_cell": [round(c.join_s, 4) for c in cells],
            "rho_star": rho,
            "tau_star": tau,
        }
        return Outcome(
            count=total,
            counters=counters,
            metrics={
                "shares": dict(alloc.shares),
                "tuples_shipped": shipped,
                # Summed over cells, from the tasks' own clocks (the shuffle read includes waiting for it).
                "python_task_s": {k: round(int(v) / 1e6, 3) for k, v in zip(("kernel", "pack", "io"), self._python_us)},
            },
        )

    def matches(self, limit: int) -> list[tuple]:
        total, cells = self._sample if self._sample else (None, None)
        if cells is None or total is None or total > sum(len(c.matches) for c in cells):
            cells = self._run(limit)
        found = np.concatenate([c.matches for c in cells]) if cells else np.zeros((0, self.plan.m), np.int64)
        rows = (self.ids[found] if self.ids is not None else found)[:limit]
        spec = self.ctx.spec
        return in_query_order(spec.query, spec.attribute_order, rows)

    def matches_by_cell(self, limit: int) -> list[tuple[int, np.ndarray]]:
        """(cell, matches in attribute-order positions, as shipped values): for checking cell ownership."""
        return [(c.cell, c.matches) for c in self._run(limit)]


LOOP = -1  # CellLayout.shipped's kind for a relation of self-loops


class CellListing(NamedTuple):
    """A listing run of the cells (`write_matches`): where they write (None: counted only), and the
    most matches a cell lists (None: all)."""

    sink: MatchSink | None
    limit: int | None


class CellMeta(NamedTuple):
    """The integers a cell's task sends back beside its arrays."""

    found: int  # the cell's matches (listing with a limit: those its slices found before it stopped)
    vertices: int
    join_us: int
    build_us: int
    unpack_us: int
    read_us: int
    attempt: int  # the task attempt whose Parquet file holds the cell's listed matches (-1: none written)


class CellResult(NamedTuple):
    """One cell's answer, as the driver reads it."""

    cell: int
    found: int
    vertices: int
    join_s: float
    received: np.ndarray  # tuples received, per shipped relation
    work: np.ndarray  # candidates examined, list elements stepped over
    matches: np.ndarray  # a sample (attribute order, shipped values); none when listing
    attempt: int


class LabelPairCount(NamedTuple):
    """How many edges join a vertex labelled `source` to one labelled `target` (-1: no label)."""

    source: int
    target: int
    self_loop: bool
    edges: int


class CellLayout(NamedTuple):
    """What Shares ships to the cells, one relation per entry of `shipped` as (early, late, kind):
    the plan's atoms, the self-loops of each position with a loop atom or (directed) a `!a-a`
    (early = late, kind LOOP), then the anti-relations (JoinSpec.anti), shipped like atoms so that a
    cell holds every edge an anti-pair of its own values could be. `positive`: how many come before
    the anti-relations. A cell builds one index per entry that is not LOOP, in order (`index_rows`),
    and reads anti-relation (j, a) of the plan from index `anti_row[j, a]`."""

    shipped: list[tuple[int, int, int]]
    positive: int
    anti_row: np.ndarray  # (m, A)

    @classmethod
    def of(cls, plan: ExtensionPlan) -> CellLayout:
        loops = [j for j in range(plan.m) if plan.loop[j]]
        anti = [(j, a) for j in range(plan.m) for a in range(plan.anti_count[j])]
        no_loops = [j for j, a in anti if plan.anti_pos[j, a] == j]
        lists = [(j, a) for j, a in anti if plan.anti_pos[j, a] != j]
        shipped = list(plan.atoms) + [(j, j, LOOP) for j in loops]
        positive = len(shipped)
        shipped += [(int(plan.anti_pos[j, a]), j, int(plan.anti_kind[j, a])) for j, a in lists]
        shipped += [(j, j, LOOP) for j in no_loops]
        anti_row = np.zeros(plan.anti_pos.shape, dtype=np.int64)
        for row, (j, a) in enumerate(lists, start=len(plan.atoms)):
            anti_row[j, a] = row
        return cls(shipped, positive, anti_row)

    def index_rows(self) -> list[int]:
        """The shipped relation behind each of a cell's indices: the atoms', then the anti-relations'."""
        return [i for i, (_, _, kind) in enumerate(self.shipped) if kind != LOOP]

    def sizes(self, edge_rows: int, loop_rows: int) -> list[int]:
        """Each shipped relation's rows, for an unlabelled pattern."""
        size = {FORWARD: edge_rows, REVERSE: edge_rows, BOTH: 2 * edge_rows, LOOP: loop_rows}
        return [size[kind] for _, _, kind in self.shipped]

    def labelled_sizes(self, label: np.ndarray, pairs: list[LabelPairCount]) -> list[int]:
        """Each shipped relation's rows once its ends are filtered by their positions' labels (-1: any),
        as `Shares._shipped` ships it: a forward copy's early end is the edge's source, a reverse copy's
        its destination, a LOOP relation the self-loops."""

        def carries(j: int, got: int) -> bool:
            return label[j] < 0 or label[j] == got

        sizes = []
        for early, late, kind in self.shipped:
            total = 0
            for p in pairs:
                if kind == LOOP:
                    total += p.edges if p.self_loop and carries(early, p.source) else 0
                if kind in (FORWARD, BOTH):
                    total += p.edges if carries(early, p.source) and carries(late, p.target) else 0
                if kind in (REVERSE, BOTH):
                    total += p.edges if carries(early, p.target) and carries(late, p.source) else 0
            sizes.append(total)
        return sizes

    def relations(self, order: tuple[str, ...], sizes: list[int]) -> list[hypercube.Relation]:
        """The shipped relations as the share search sees them, with their sizes."""
        return [
            hypercube.Relation(
                ("!" if i >= self.positive else "") + f"{order[early]}-{order[late]}",
                (order[early],) if kind == LOOP else (order[early], order[late]),
                sizes[i],
            )
            for i, (early, late, kind) in enumerate(self.shipped)
        ]


def _cell_join(plan: ExtensionPlan, layout: CellLayout, limit: int, tokens: np.ndarray, listing: CellListing | None):
    relations = len(layout.shipped)
    rows = layout.index_rows()
    loop_relations = [i for i, (_, _, kind) in enumerate(layout.shipped) if kind == LOOP]

    def join(iterator):
        cell = exchange.current_partition()
        parts = []
        clock = [time.perf_counter()]  # the task's own clocks: reading its shuffle input, unpacking, the kernels

        def lap() -> int:
            now = time.perf_counter()
            micros, clock[0] = int((now - clock[0]) * 1e6), now
            return micros

        for b in iterator:
            if len(b) and not (b.column(0).to_numpy() == tokens[cell]).all():
                raise ExecutionError(f"tuples for another cell arrived at cell {cell}: routing tokens are stale")
            parts.append((b.column(1).to_numpy(), b.column(2).to_numpy(), b.column(3).to_numpy()))
        read_us = lap()
        relation, early, late = (np.concatenate([p[i] for p in parts]) if parts else np.zeros(0, np.int64) for i in range(3))
        received = np.bincount(relation, minlength=relations).astype(np.int64)
        ids = np.unique(np.concatenate([early, late]))
        early, late = np.searchsorted(ids, early), np.searchsorted(ids, late)
        unpack_us = lap()
        kernel, degree = _cell_kernel(plan, layout, rows, loop_relations, relation, early, late, len(ids))
        work = np.zeros(2, dtype=np.int64)
        build_us = lap()
        if listing is None:
            out = np.zeros((limit, plan.m), dtype=np.int64)
            count, attempt = kernel(0, len(ids), out, work), -1
            found = ids[out[: min(count, limit)]].ravel()
        else:
            count, attempt = _list_cell(kernel, listing, cell, ids, degree, plan.m, work)
            found = np.zeros(0, np.int64)
        join_us = lap()
        meta = CellMeta(int(count), len(ids), join_us, build_us, unpack_us, read_us, attempt)
        yield from exchange.blob_batches([cell], [exchange.pack(BlobKind.CELL, cell, [received, work, found], meta)])

    return join


def _cell_kernel(plan, layout, rows, loop_relations, relation, early, late, n):
    """The cell's indices, built from what it received, and Generic Join over them as
    `kernel(lo, hi, out, work)` (first values in [lo, hi), the first len(out) matches listed into out),
    with the degrees of the first position's vertices."""
    # One index per atom then per anti-relation, keyed by its early attribute (a loop-only query
    # reads none, but generic_join takes at least one); the self-loops as the sorted vertices that have one.
    index = [build_csr(early[relation == i], late[relation == i], n) for i in rows or [0]]
    loops = np.unique(early[np.isin(relation, loop_relations)])
    offsets = np.stack([o for o, _ in index])
    values = np.zeros((len(index), max(1, max(len(v) for _, v in index))), dtype=np.int64)
    for i, (_, v) in enumerate(index):
        values[i, : len(v)] = v
    # Relations whose shares put the same edges in this cell (a1-a3 and a1-a4 when only a1 is split)
    # read one index, so Generic Join carries a level's candidates down instead of recomputing them.
    same = np.arange(len(index))
    for i in range(len(index)):
        same[i] = next((k for k in range(i) if same[k] == k and all(map(np.array_equal, index[i], index[k]))), i)
    rel_index = same[plan.rel_atom]
    lists = local_gj.SearchIndex(offsets, values, loops)
    search = local_gj.SearchPlan.of(plan, rel_kind=rel_index)
    anti = local_gj.AntiRelations.of(plan.anti_count, plan.anti_pos, same[layout.anti_row])
    buf = local_gj.scratch(offsets, plan.m)

    def kernel(lo: int, hi: int, out: np.ndarray, work: np.ndarray) -> int:
        # Through the module: a bare jitted name in this closure would be pickled by value and compiled
        # again in every Python worker (seconds), where the module's own dispatcher is warm. No label
        # test: each shipped relation was filtered by its attributes' labels before the shuffle.
        return local_gj.generic_join(lists, search, anti, None, local_gj.Listing(out, len(out), 0), lo, hi, work, buf)

    return kernel, np.diff(offsets[0])


def _list_cell(kernel, listing: CellListing, cell: int, ids: np.ndarray, degree, m: int, work) -> tuple[int, int]:
    """The cell's matches listed slice by slice, each slice's written (as shipped values, `ids[local]`)
    to the task attempt's own Parquet file: (count, the attempt, or -1 if it wrote none)."""
    slices = local_gj.work_slices(degree, FIRST_WORK if listing.limit is None else FIRST_WORK_LIMITED)
    if listing.sink is None:
        count, _ = local_gj.list_by_slice(kernel, slices, m, listing.limit, None, work)
        return count, -1
    attempt = exchange.current_attempt()
    with listing.sink.part(part_name(0, 0, cell, attempt)) as part:
        count, _ = local_gj.list_by_slice(kernel, slices, m, listing.limit, lambda local: part.append(ids[local]), work)
    return count, attempt if part.rows else -1
