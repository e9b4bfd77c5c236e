"""`replicated`: the whole graph on every worker, the plan a Spark user reaches for when the graph fits
one (the paper's "naive parallelization"; GraphWCOJ/EdgeFrame). One Spark task reads the canonical
edges from their Parquet files and builds local-gj's index (degree-ranked CSR lists) into the store,
never through the driver; each Python worker of the query reads it into its own memory once (as a
broadcast is held per executor) and runs local-gj's Generic Join over ranges of first vertices. The
ranges are cut by estimated work (1 + d² a vertex, d the length of its list that proposes the second
position) and are many more than the workers, so an idle worker pulls the next one as Spark
schedules tasks and a hub's range does not hold up the rest. Its memory model is the whole index on every worker."""

from __future__ import annotations

import itertools
import os
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np

from harness.core import store
from harness.core.query import in_query_order
from harness.data.datasets import read_edge_arrays
from implementations import local_gj
from implementations.base import Implementation, Listed, Outcome
from implementations.gj import match_files
from implementations.gj.arrays import mapped
from implementations.gj.match_files import MatchSink, part_name
from implementations.gj.plan import ExtensionPlan
from implementations.gj.python_tasks import run_tasks
from implementations.indices.distributed_index import max_over_mean, new_root

RANGES_PER_WORKER = 16  # ranges of first vertices per worker: idle workers pull the rest
FIRST_SLICE_LIMITED = 1  # vertices in a listing range's first slice with a limit (each next 4x): it stops soon after N


class StoredIndex(NamedTuple):
    """local-gj's index of the graph as files in the store, and the ranges its query runs over."""

    root: str
    vertices: int
    bytes: int  # what every worker holds: the whole index, the lists its pattern reads
    ranges: list[tuple[int, int]]  # [lo, hi) of first vertices (ranks), by estimated work


class RangeResult(NamedTuple):
    """What one range's task sends back."""

    piece: int
    found: int
    candidates: int
    probes: int
    seconds: float
    matches: np.ndarray  # up to the limit asked for, in ranks (attribute order)
    attempt: int  # the task attempt whose Parquet file holds its listed matches (-1: none written)


class Replicated(Implementation):
    name = "replicated"
    kernels = frozenset({"local-gj"})
    anti_edges = True
    vertex_labels = True
    writes_matches = True
    description = "the whole graph on every worker (one CSR in the store, read into each worker's memory), local-gj over ranges of first vertices"

    def prepare(self) -> None:
        spec = self.ctx.spec
        self.plan = ExtensionPlan.from_spec(spec)
        self.plan.require_connected_order(spec)
        graph = self.ctx.graph
        edges = str(graph.edges_location())
        labels = str(graph.labels_path) if spec.query.labels else None
        pieces = RANGES_PER_WORKER * self.ctx.workers
        build = _index_builder(edges, labels, spec.semantics == "undirected", self.plan, str(new_root("replicated")), pieces)
        (self.index,) = run_tasks(self.ctx.spark, [None], build)

    def _run(self, keep: int, listing: RangeListing | None = None) -> list[RangeResult]:
        """Every range's result: its count and its first `keep` matches, or (`listing`) those it listed."""
        ranges = self.index.ranges
        if not ranges:
            return []
        search = _range_search(self.index.root, self.plan, keep, listing)
        return sorted(run_tasks(self.ctx.spark, list(enumerate(ranges)), search))

    def count(self) -> Outcome:
        return self._outcome(self._run(0))

    def write_matches(self, path: str | None, limit: int | None) -> Listed:
        """Each range's task lists its matches slice by slice and writes them (original ids) into a
        Parquet file of its own in `path`; with a limit each stops after the slice that reaches it, and
        the driver cuts the files to it. first_match_s is the end of the one Spark job."""
        sink = None if path is None else MatchSink.of(self.ctx.spec, path, f"{self.index.root}/ids.npy", limit)
        started = time.perf_counter()
        ranges = self._run(0, RangeListing(sink, limit))
        took = time.perf_counter() - started
        found = sum(r.found for r in ranges)
        if path is not None:
            match_files.finish(
                self.ctx.spark, path, {part_name(0, 0, r.piece, r.attempt) for r in ranges if r.attempt >= 0}, limit
            )
        outcome = self._outcome(ranges)
        count = found if limit is None else min(limit, found)
        return Listed(count, outcome.counters, metrics=outcome.metrics, first_match_s=took if found else None)

    def matches(self, limit: int) -> list[tuple]:
        found = [r.matches for r in self._run(limit)]
        rows = np.concatenate(found)[:limit] if found else np.zeros((0, self.plan.m), np.int64)
        spec = self.ctx.spec
        return in_query_order(spec.query, spec.attribute_order, mapped(f"{self.index.root}/ids.npy")[rows])

    def _outcome(self, ranges: list[RangeResult]) -> Outcome:
        work = np.array([[r.candidates, r.probes] for r in ranges], dtype=np.int64).reshape(-1, 2)
        per_range = work.sum(axis=1)
        counters = {
            "candidates": int(work[:, 0].sum()),
            "probes": int(work[:, 1].sum()),
            "ranges": len(self.index.ranges),
            "work_per_range": per_range.tolist(),
            "range_work_skew": max_over_mean(per_range),
            "seconds_per_range": [round(r.seconds, 4) for r in ranges],
            "index_vertices": self.index.vertices,
            "replicated_index_bytes": self.index.bytes,  # on every worker: the model's bytes per worker
        }
        return Outcome(count=sum(r.found for r in ranges), counters=counters)


def _index_builder(edges: str, labels: str | None, undirected: bool, plan: ExtensionPlan, root: str, pieces: int):
    """The task that reads the canonical edges and writes local-gj's index of them into the store at
    `root`, with each rank's label when the pattern has labelled positions; it returns the index's
    StoredIndex, its ranges cut into at most `pieces` by estimated work."""

    def build(_):
        src, dst = read_edge_arrays(edges)
        index = local_gj.ranked_index(src, dst, undirected, local_gj.used_kinds(plan))
        vertex_label = np.full(len(index.ids), -1, np.int64)
        if labels is not None:
            from harness.data import labels as label_files

            plan.rank_labels(index.ids, *label_files.read_arrays(Path(labels)))
            vertex_label = plan.vertex_label
        kinds = sorted(local_gj.used_kinds(plan))  # a triangle reads FORWARD alone: the other rows are empty
        held = {"offsets": index.offsets, "loops": index.loops, "kinds": np.array(kinds, np.int64)}
        held |= {f"values-{k}": index.values[k] for k in kinds}
        if labels is not None:
            held["vertex_label"] = vertex_label
        for name, array in {**held, "ids": index.ids}.items():
            store.save_to_store(os.path.join(root, f"{name}.npy"), np.ascontiguousarray(array))
        size = sum(a.nbytes for a in held.values())
        yield StoredIndex(root, len(index.ids), size, work_ranges(_proposing_degree(index, plan), pieces))

    return build


def _proposing_degree(index: local_gj.RankedIndex, plan: ExtensionPlan) -> np.ndarray:
    """Each first vertex's list length in the kind that proposes the second position (its forward list
    on an undirected graph in rank order): a hub's forward list is short, so its total degree would
    put the work in the wrong ranges (a triangle on R-MAT 18: one range of 31 took 2.8 of 3.2 s)."""
    if plan.m < 2 or plan.rel_count[1] == 0:
        return index.degree
    return np.diff(index.offsets[int(plan.rel_kind[1, 0])])


def work_ranges(degree: np.ndarray, pieces: int) -> list[tuple[int, int]]:
    """[lo, hi) ranges of the ranks, at most `pieces`, each about the same estimated work (1 + degree²
    a vertex, local_gj.work_estimate), none empty."""
    estimate = local_gj.work_estimate(degree)
    n = len(degree)
    cuts = np.searchsorted(estimate, np.linspace(0, estimate[-1], pieces + 1)[1:-1], side="right") - 1
    bounds = np.unique(np.concatenate([[0], np.clip(cuts, 0, n), [n]]))
    return [(int(lo), int(hi)) for lo, hi in itertools.pairwise(bounds) if hi > lo]


class RangeListing(NamedTuple):
    """A listing run of the ranges (`write_matches`): where they write (None: counted only), and the
    most matches a range lists (None: all)."""

    sink: MatchSink | None
    limit: int | None


_held: dict[str, tuple[local_gj.SearchIndex, np.ndarray]] = {}  # this Python worker's copy of the index it last searched


def held_index(root: str, labelled: bool) -> tuple[local_gj.SearchIndex, np.ndarray]:
    """This Python worker's own copy of the index at `root` and each rank's label, read into its memory
    once (as a Spark broadcast is held once per executor) and kept for the run's next ranges. Not
    memory-mapped: mapped pages are page cache, which workers on one machine share and a worker's
    memory cap reclaims rather than counts, so the whole graph per worker would be neither measured
    nor bounded. Arrays built in memory, typed as local-gj's own, so its warm kernels serve: the
    lists the pattern reads are rows of local-gj's (K, *) values, whose other rows stay zero pages the
    worker never touches (and so never holds). Labels only for a labelled pattern (else -1 unread)."""
    if root not in _held:
        _held.clear()  # the last run's copy goes before this one is read

        def read(name: str, mmap_mode=None) -> np.ndarray:
            return np.load(store.local_copy(f"{root}/{name}.npy"), mmap_mode=mmap_mode)

        offsets, loops = read("offsets"), read("loops")
        rows = {int(k): read(f"values-{k}", "r") for k in read("kinds")}  # copied into memory below
        values = np.zeros((len(offsets), max(1, max(len(v) for v in rows.values()))), np.int64)
        for k, row in rows.items():
            values[k, : len(row)] = row
        del rows
        vertex_label = read("vertex_label") if labelled else np.full(0, -1, np.int64)
        _held[root] = local_gj.SearchIndex(offsets, values, loops), vertex_label
    return _held[root]


def _range_search(root: str, plan: ExtensionPlan, keep: int, listing: RangeListing | None):
    """The task over one range of first vertices: local-gj's search on this host's copy of the index,
    counting and keeping the first `keep` matches, or (`listing`) listing them slice by slice."""

    def search(task: tuple[int, tuple[int, int]]):
        piece, (lo, hi) = task
        labelled = bool((plan.label >= 0).any())
        index, vertex_label = held_index(root, labelled)
        search_plan = local_gj.SearchPlan.of(plan)
        anti = local_gj.AntiRelations.of(plan.anti_count, plan.anti_pos, plan.anti_kind)
        labels = local_gj.Labels(plan.label, vertex_label) if labelled else None
        buf = local_gj.scratch(index.offsets, plan.m)

        def kernel(lo: int, hi: int, out: np.ndarray, work: np.ndarray) -> int:
            # Through the module: its dispatcher is warm in every Python worker.
            return local_gj.generic_join(index, search_plan, anti, labels, local_gj.Listing(out, len(out), 0), lo, hi, work, buf)

        started, work = time.perf_counter(), np.zeros(2, dtype=np.int64)
        matches, attempt = np.zeros((0, plan.m), np.int64), -1
        if listing is None:
            out = np.zeros((keep, plan.m), dtype=np.int64)
            found = kernel(lo, hi, out, work)
            matches = out[: min(found, keep)]
        else:
            found, attempt = _list_range(kernel, listing, piece, lo, hi, plan.m, work)
        seconds = time.perf_counter() - started
        yield RangeResult(piece, int(found), int(work[0]), int(work[1]), seconds, matches, attempt)

    return search


def _list_range(kernel, listing: RangeListing, piece: int, lo: int, hi: int, m: int, work) -> tuple[int, int]:
    """The range's matches listed slice by slice, each slice's written to this task attempt's Parquet
    file: (count, the attempt, or -1 if it wrote none)."""
    slices = _slices(lo, hi, listing.limit)
    if listing.sink is None:
        count, _ = local_gj.list_by_slice(kernel, slices, m, listing.limit, None, work)
        return count, -1
    from implementations.gj.exchange import current_attempt

    attempt = current_attempt()
    with listing.sink.part(part_name(0, 0, piece, attempt)) as part:
        count, _ = local_gj.list_by_slice(kernel, slices, m, listing.limit, part.append, work)
    return count, attempt if part.rows else -1


def _slices(lo: int, hi: int, limit: int | None):
    """[lo, hi) whole, or (limited) in slices of 1, 4, 16, ... vertices, so an existence query stops soon."""
    if limit is None:
        yield lo, hi
        return
    size = FIRST_SLICE_LIMITED
    while lo < hi:
        yield lo, min(hi, lo + size)
        lo, size = lo + size, size * 4
