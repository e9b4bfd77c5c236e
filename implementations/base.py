"""The plug-in interface. The harness times `prepare` (index_s) and `count` (query_s), collects
Spark's counters, verifies the count and writes results; an implementation only computes."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession

from harness.core.errors import DataError
from harness.core.params import Param, resolve
from harness.core.query import JoinSpec
from harness.data.datasets import Graph

if TYPE_CHECKING:
    from harness.data.updates import UpdateStream


@dataclass(frozen=True)
class WorkerCap:
    """A run on capped workers: what each worker may hold and what it already holds, for whatever
    sizes itself from the room left (BiGJoin's default budget)."""

    cap: int  # bytes per worker (--memory-per-worker)
    idle: int  # the busiest worker's resident bytes as the run began (executor JVM and Python workers)
    # The most any worker's executor JVM has grown since the run began, read when called: its heap
    # does not give back what an index build's shuffles took.
    executor_growth: Callable[[], int]
    # Each executor's heap ceiling (-Xmx): a query's shuffles grow the heap towards it after any
    # budget is chosen (rmat-21 in docs/capacity.md), so what sizes itself reserves at least this.
    executor_heap: int = 0


@dataclass
class RunContext:
    spark: SparkSession
    graph: Graph
    spec: JoinSpec
    workers: int
    params: dict = field(default_factory=dict)  # as given; the implementation reads them typed: Implementation.param
    # Indices built for this graph by earlier runs (shared arrangements); implementations may reuse them.
    arrangements: dict = field(default_factory=dict)
    # Dynamic runs: the initial graph and its update batches (harness.data.updates.UpdateStream).
    stream: UpdateStream | None = None
    # Set by the harness at a run's deadline. Spark jobs are cancelled through their job group; work
    # on the driver (local-gj's kernel) checks this between slices and raises RunCancelled.
    cancelled: threading.Event = field(default_factory=threading.Event)
    # How far the run has got, for the harness's live display (e.g. level, batches_done,
    # batches_estimate); written by the implementation's driver thread, read by the display.
    progress: dict = field(default_factory=dict)
    # Under a memory cap (--memory-per-worker); None without one.
    worker_cap: WorkerCap | None = None

    def report(self, **fields) -> None:
        self.progress.update(fields)

    @property
    def edges(self) -> DataFrame:
        """The canonical edge relation (src, dst), cached in Spark."""
        return self.graph.df


class RunCancelled(Exception):
    """Driver-side work stopped because the harness set `RunContext.cancelled`."""


@dataclass
class Outcome:
    count: int
    counters: dict = field(default_factory=dict)  # logical counters the implementation wants reported
    # Measured quantities that belong beside Spark's own counters in the result's `metrics`
    # (e.g. Shares' `shares` and `tuples_shipped`); they may not replace a Spark counter.
    metrics: dict = field(default_factory=dict)


@dataclass
class Listed(Outcome):
    """What `write_matches` reports: the count (at most the limit), and how long the first match took."""

    first_match_s: float | None = None  # seconds from the call to the first match found, where the implementation knows it


@dataclass
class BatchOutcome:
    """What an implementation reports for one update batch."""

    delta: int  # signed change of the count
    output_changes: int  # match changes the delta queries produced (added + removed, before netting)
    counters: dict = field(default_factory=dict)
    changes: list[tuple[tuple, int]] | None = None  # (match, +1 | -1), netted, when asked for
    changes_truncated: bool = False
    applied: dict = field(default_factory=dict)  # what the batch did to the stored graph (edges inserted, ...)


class Implementation(ABC):
    name: str = ""
    description: str = ""
    index_reused: bool = False  # set by prepare() when it reused an index from ctx.arrangements
    maintains_updates: bool = False  # dynamic: prepare() indexes ctx.stream.initial, count() counts it
    # Computes on the driver from ctx.graph.edge_arrays(): the harness reads them before prepare() and
    # reports that as driver_load_s, so index_s holds only the implementation's own work.
    driver_edges: bool = False
    runs_in_driver: bool = False  # counts in the driver's process, which a per-worker memory cap does not bound
    # The kernel families (implementations.warm.FAMILIES) its runs call, in the driver or in Python workers:
    # a session warms those of the implementations it will run, before anything is timed.
    kernels: frozenset[str] = frozenset()
    # The most edges it accepts (a toy for tiny graphs); prepare() refuses more, compare skips larger graphs.
    max_edges: int | None = None
    # Honours JoinSpec.anti (anti-edges, induced patterns); others refuse such a query with a DataError.
    anti_edges: bool = False
    # Filters candidates by the vertex labels a pattern requires (JoinSpec.query.labels); others refuse them.
    vertex_labels: bool = False
    # Lists its matches (`write_matches`): --output writes them, --limit stops after N; others refuse both.
    writes_matches: bool = False
    # The parameters it reads from ctx.params: anything else given is a DataError, and the CLI's flags
    # and their help come from these declarations.
    params: tuple[Param, ...] = ()

    @classmethod
    def wants_driver_edges(cls, edges: int, params: dict) -> bool:
        """Whether the harness should read the edge arrays on the driver before prepare() (driver_load_s),
        for a graph of `edges` edges and these run parameters (as given)."""
        return cls.driver_edges

    def apply_updates(self, updates) -> BatchOutcome:
        """Apply one batch, a pyarrow Table (src, dst, diff, seq) in order, held by the driver, and
        return the change of the count. Timed per batch."""
        raise NotImplementedError(f"{self.name} does not maintain counts under updates")

    def __init__(self, ctx: RunContext):
        self.ctx = ctx
        self._params = resolve(type(self).params, ctx.params, self.name)
        if ctx.spec.anti and not type(self).anti_edges:
            raise DataError(f"query {ctx.spec.query.name}: {self.name} does not count patterns with anti-edges or induced: true")
        if ctx.spec.query.labels and not type(self).vertex_labels:
            raise DataError(f"query {ctx.spec.query.name}: {self.name} does not count patterns with vertex labels")

    def param(self, name: str):
        """The typed value of declared parameter `name`: as given, else its default."""
        return self._params[name]

    def prepare(self) -> None:  # noqa: B027 (an optional hook: the default builds nothing)
        """Build indices or arrangements. Timed as index_s. Default: nothing to build."""

    @abstractmethod
    def count(self) -> Outcome:
        """Count the matches without collecting them to the driver. Timed as query_s."""

    def write_matches(self, path: str | None, limit: int | None) -> Listed:
        """count()'s work, listing the matches: each written (path given) as Parquet into the directory
        `path`, one column per attribute of spec.query in its order, original vertex ids, by the processes
        that find them (never collected on the driver); stopping once `limit` are found (None: all), so
        count is min(limit, matches). path None: counted only, stopping at the limit. Timed as query_s."""
        raise DataError(f"{self.name} does not list its matches (--output, --limit): {writers()}")

    @abstractmethod
    def matches(self, limit: int) -> list[tuple]:
        """Up to `limit` matches, as tuples in `spec.query.attributes` order (used only to verify)."""


def writers() -> str:
    """Which registered implementations list their matches, for the error that says one does not."""
    from implementations import REGISTRY

    names = [name for name, cls in REGISTRY.items() if cls.writes_matches]
    return f"{', '.join(names) or 'none'} {'does' if len(names) == 1 else 'do'}"
