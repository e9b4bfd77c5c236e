"""Every kernel compiled (or loaded from numba's cache) before anything is timed, with the argument
types timed runs use. Run in the Python worker daemon before it forks a worker (`harness.spark.daemon`,
so every worker, even one started after a cancelled task, is born warm) and on the driver at session
start (`harness.spark.session`).

The BiGJoin family's kernels are warmed by running it: real indices of a small graph, each built by
its own code (the driver build, and BiGJoin-S's and Delta-BiGJoin's index tasks run in this process)
and memory-mapped from the store as the executors map them, then a few queries through the real
dataflows (and Delta-BiGJoin's update batches), their stages called in this process
(`exchange.run_locally`) on blobs that travel as Arrow record batches, as they do between Spark
tasks. So the warm-up's types are the run's types by construction, not by a list kept in step with
the code."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import os
import shutil
import sys
import traceback
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from harness.core.query import BUILTINS, make_join_spec, parse_pattern_string
from implementations.indices import distributed_index
from implementations.local_gj import warm_up as warm_local_gj

# A graph with every shape the kernels meet: a 5-clique (all levels non-empty), a hub, a self-loop.
_EDGES = (
    [(i, j) for i in range(5) for j in range(i + 1, 5)]
    + [(0, v) for v in range(5, 40)]
    + [(v, v + 1) for v in range(5, 39)]
    + [(7, 7)]
)
# (query, semantics, W, pinned B'): both semantics, one and several workers, windows cut by bytes and by B'.
_RUNS = (("clique4", "undirected", 2, None), ("triangle", "directed", 3, 2), ("clique5", "undirected", 1, None))
# BiGJoin-S (the one-level engine) and Delta-BiGJoin (the dataflow, through update batches): (query, semantics, W, pinned B' or None for the default).
_ONE_LEVEL_RUNS = (("clique4", "undirected", 2, None), ("triangle", "directed", 3, 16))
# Runs of patterns with anti-relations, whose kernels' anti-intersect compiles only for them
# (`dataflow_kernels.level_lookups`): at the last level, at an inner one, at a carried one (bigjoin-carry's
# directed induced triangle), every pair of a path (induced).
_ANTI_RUNS = (
    ("a-b,b-c,a-c,c-d,!a-d,!b-d", "undirected", 2, None),  # a triangle with a tail, its other ends not joined
    ("a-b,b-c,!a-c", "directed", 3, 2),  # an open wedge
    ("a-b,b-c,a-c induced", "directed", 1, None),
    ("a-b,b-c,c-d induced", "undirected", 1, None),  # the chain 5-6-7-8
)
_ONE_LEVEL_ANTI_RUNS = (("a-b,b-c,a-c,c-d,!a-d,!b-d", "undirected", 2, None), ("a-b,b-c,a-c induced", "directed", 3, 16))


def compiled_kernels() -> set[Path]:
    """The folders where this process's numba caches the project's compiled kernels, one per module and
    version of its source (harness.core.numba_cache)."""
    import implementations  # noqa: F401  (the registry imports every module that holds a kernel)
    from implementations.gj.kernel_signatures import dispatchers

    found: set[Path] = set()
    for kernel in dispatchers():
        cache: Any = getattr(kernel, "_cache", None)  # numba's internals, not in numba's stubs
        if getattr(cache, "_cache_path", None):
            found.add(Path(cache._cache_path))
    return found


# The kernel families a session warms (an implementation's `kernels` names those its runs use), and the
# environment variable that tells a Python worker daemon which (unset: all of them).
# A family's variants: "<family>/anti", its kernels for patterns with anti-relations (anti-edges or
# induced); local-gj's "/labels" and "/anti/labels" too, for vertex labels. Apart because each is a
# compilation of its own that a session whose patterns need none of them does not pay (`variants`).
ANTI, LABELS = "/anti", "/labels"
DATAFLOW = ("bigjoin", "bigjoin-carry", "bigjoin-s")  # a family each: a run compiles only the variants it calls
FAMILIES = (
    *("local-gj" + v for v in ("", ANTI, LABELS, ANTI + LABELS)),
    *(f + v for f in (*DATAFLOW, "one-level") for v in ("", ANTI)),
)
FAMILIES_SETTING = "HARNESS_WARM"
_warmed: set[str] = set()  # the families this process (or the daemon it was forked from) has warmed


def base_family(name: str) -> str:
    """The family a variant's name belongs to (`bigjoin/anti`: bigjoin)."""
    return name.split("/")[0]


def variants(families: Iterable[str], anti: bool, labels: bool) -> frozenset[str]:
    """`families` and the variant of each that a pattern calls which has anti-relations (`anti`) or
    vertex labels (`labels`): a family whose kernels take labels as they take none has no "/labels"."""
    wanted = set(families)
    for family in list(wanted):
        for suffix in ((ANTI if anti else "") + (LABELS if labels else ""), ANTI if anti else ""):
            if suffix and family + suffix in FAMILIES:
                wanted.add(family + suffix)
                break
    return frozenset(wanted)


def warm_up(families: Iterable[str] | None = None) -> None:
    """`warm_families` of `families` (default: those HARNESS_WARM names, else all), with nothing written
    to stdout (the daemon's port goes there). Last family first: a local daemon warms beside the driver,
    which warms in FAMILIES' order, so on a cold cache each compiles what the other has not reached."""
    if families is None:
        setting = os.environ.get(FAMILIES_SETTING)
        families = FAMILIES if setting is None else [f for f in setting.split(",") if f]
    with contextlib.redirect_stdout(sys.stderr):
        warm_families(families, FAMILIES[::-1])


def freeze_what_warming_left() -> None:
    """What compiling left alive (a cold cache: ~500K objects, 0.4 s a full collection) is never
    garbage: out of the collector's sight, no collection in a timed phase walks it and no forked
    worker copies it (its reference counts and the collector's links would touch every page they are
    on). In the driver and every daemon: under a memory cap it leaves a forked task more room above the
    idle worker (without it BiGJoin was MEM at 512m at W = 2 as well as at W = 4: results/README)."""
    gc.freeze()


def warm_families(families: Iterable[str], order: tuple[str, ...] = FAMILIES) -> None:
    """Compile or load the kernels of `families`, in `order`, once per process and family: a worker forked
    from a warmed daemon is warm already, and a later session in the driver's process warms nothing twice."""
    wanted, steps = set(families), warm_steps()
    for family in order:
        if family in wanted and family not in _warmed:
            try:
                steps[family]()
            except (ImportError, AttributeError) as stale:
                if not _from_numba_cache(stale):
                    raise
                dropped = drop_compiled_kernels()  # compiled by code that has moved since: compile anew
                print(f"warm-up: numba's cache named code that has moved ({stale}); dropped {dropped} files", file=sys.stderr)
                steps[family]()
            _warmed.add(family)


def warm_steps() -> dict[str, Callable[[], None]]:
    """Each family's warm-up (FAMILIES)."""
    steps: dict[str, Callable[[], None]] = {
        "one-level": warm_one_level,
        "one-level" + ANTI: functools.partial(warm_one_level, True),
    }
    for anti in (False, True):
        for labels in (False, True):
            steps["local-gj" + (ANTI if anti else "") + (LABELS if labels else "")] = functools.partial(
                warm_local_gj, anti, labels
            )
    for name in DATAFLOW:
        steps[name], steps[name + ANTI] = functools.partial(warm_dataflow, name), functools.partial(warm_dataflow, name, True)
    return steps


def _from_numba_cache(error: BaseException) -> bool:
    """Whether `error` rose from reading numba's cache index, which pickles the types of a kernel's
    signature: a type whose module or name has changed since (a refactor) cannot be read back, and
    numba raises instead of compiling anew."""
    frames = traceback.extract_tb(error.__traceback__)
    return any(
        frame.name == "_load_index" and frame.filename.endswith(os.path.join("numba", "core", "caching.py")) for frame in frames
    )


def drop_compiled_kernels() -> int:
    """Delete every cached compilation of this package's kernels (all folders); returns how many files."""
    dropped = 0
    for cache in compiled_kernels():
        for path in cache.glob("*.nb[ic]"):
            path.unlink(missing_ok=True)
            dropped += 1
    return dropped


def warm_dataflow(name: str, anti: bool = False) -> None:
    """The dataflow variant `name` (bigjoin, bigjoin-carry or bigjoin-s) on each of `_RUNS`, or with
    `anti` of `_ANTI_RUNS`."""
    from implementations import REGISTRY
    from implementations.bigjoin import BiGJoin
    from implementations.gj import exchange
    from implementations.gj.budget import Budget
    from implementations.indices import block_index

    src, dst = _edge_arrays()
    indices: dict[tuple, Any] = {}
    try:
        for query, semantics, workers, batch in _ANTI_RUNS if anti else _RUNS:
            key = (semantics, workers)
            if key not in indices:
                index = _both_builds(src, dst, semantics == "undirected", workers)
                indices[key] = index
                if name == "bigjoin-s":  # lists of more than 2 entries in blocks: every path of the kernels
                    indices[key] = block_index.build_locally(index, exchange.local_tokens(workers), 2)
                    shutil.rmtree(index.root, ignore_errors=True)
            spec = _warm_spec(query, semantics)
            m = len(spec.attribute_order)
            # A pinned B', or a byte budget small enough to cut windows (the hub's lists).
            budget = Budget(None, batch, m, "warm-up") if batch is not None else Budget(256, None, m, "warm-up")
            impl = REGISTRY[name]
            assert issubclass(impl, BiGJoin)
            count, _, _ = impl.in_process(spec, workers, indices[key], budget).extend(5)
            _expect_matches(name, query, count)
    finally:
        for index in indices.values():
            shutil.rmtree(index.root, ignore_errors=True)


def _both_builds(src: np.ndarray, dst: np.ndarray, undirected: bool, workers: int):
    """The key-partitioned index built both ways a run builds it, so each way's kernels are warm: by the
    driver's counting sorts (a graph whose edges the driver holds) and by a Spark build's own tasks,
    here in this process; the second is returned."""
    from implementations.gj import exchange

    distributed_index.build_on_driver(src, dst, undirected, workers).close()
    return distributed_index.build_locally(src, dst, undirected, workers, exchange.local_tokens(workers))


def warm_one_level(anti: bool = False) -> None:
    """BiGJoin-S as published on its balanced index, and Delta-BiGJoin through update batches that insert, delete,
    compact and sample changes, each index built by its own tasks in this process; with `anti`, on
    patterns with anti-relations (`_ONE_LEVEL_ANTI_RUNS`)."""
    from implementations.bigjoin_s_paper import BiGJoinSPaper
    from implementations.delta_bigjoin import DeltaBiGJoin
    from implementations.gj import exchange
    from implementations.indices import balanced_index, versioned_index

    src, dst = _edge_arrays()
    roots = []
    try:
        for query, semantics, workers, batch in _ONE_LEVEL_ANTI_RUNS if anti else _ONE_LEVEL_RUNS:
            spec, tokens = _warm_spec(query, semantics), exchange.local_tokens(workers)
            params = {"batch": batch} if batch is not None else {}
            source = distributed_index.build_on_driver(src, dst, semantics == "undirected", workers)
            balanced = balanced_index.build_locally(source, tokens)
            roots += [source.root, balanced.root]
            count, _, _ = BiGJoinSPaper.in_process(spec, workers, balanced, params=params).extend_by_level(5)
            _expect_matches("bigjoin-s-paper", query, count)
            initial = np.arange(len(src)) % 2 == 0  # half the edges; the updates insert the rest
            index = versioned_index.build_locally(src[initial], dst[initial], semantics == "undirected", workers, tokens)
            roots.append(index.root)
            delta = DeltaBiGJoin.in_process(spec, workers, index, params={**params, "compact_ratio": 0.0})
            gone = np.flatnonzero(initial)[:3]
            total = delta.apply_updates(update_batch(src, dst, np.flatnonzero(~initial), gone)).delta
            delta.change_limit = 5  # the second batch compacts and samples its changes
            total += delta.apply_updates(update_batch(src, dst, gone, np.zeros(0, np.int64))).delta
            _expect_matches("delta-bigjoin", query, total)
    finally:
        for root in roots:
            shutil.rmtree(root, ignore_errors=True)


def _warm_spec(query: str, semantics: str):
    """The join spec of a warm-up run: a built-in query, or a pattern (`a-b,!a-c`, optionally `induced`)."""
    if query in BUILTINS:
        return make_join_spec(BUILTINS[query], semantics)
    pattern, _, induced = query.partition(" ")
    return make_join_spec(dataclasses.replace(parse_pattern_string(pattern), induced=induced == "induced"), semantics)


def _edge_arrays() -> tuple[np.ndarray, np.ndarray]:
    return np.array([s for s, _ in _EDGES], dtype=np.int64), np.array([d for _, d in _EDGES], dtype=np.int64)


def update_batch(src: np.ndarray, dst: np.ndarray, inserted: np.ndarray, deleted: np.ndarray):
    """An update batch as `UpdateStream.batch` gives it, a pyarrow Table (src, dst, diff, seq): the
    edges at rows `inserted` inserted, then those at rows `deleted` deleted."""
    import pyarrow as pa

    rows = np.concatenate([inserted, deleted])
    diff = np.concatenate([np.ones(len(inserted), np.int32), -np.ones(len(deleted), np.int32)])
    return pa.table({"src": src[rows], "dst": dst[rows], "diff": diff, "seq": np.arange(len(rows), dtype=np.int64)})


def _expect_matches(name: str, query: str, count: int) -> None:
    if count <= 0:
        raise RuntimeError(f"warm-up: {name} found no {query} in a graph with a 5-clique")
