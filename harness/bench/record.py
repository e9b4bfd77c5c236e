"""One run's result record (docs/results-schema.md), typed: the runner fills it step by step, the tables,
plots, contest, gate and report read it, and `to_json` / `from_json` are its file. The fields are
declared in the order the file lists them; nested parts (metrics, logical, checks, ...) stay as
written, with names here for what readers ask of them often."""

from __future__ import annotations

from dataclasses import Field, dataclass, field, fields
from typing import Any, NamedTuple

from harness.core import results
from harness.spark.memory import ProcessPeak, process_peaks

FINISHED = ("OK", "UNVERIFIED")  # a count that stands (labelled when unverified): what can be ranked and plotted

# Fields' metadata. A field the runner writes only for some runs is left out of the file while it is
# None, or while the field it is written beside is; what the record holds but its file does not.
_SOMETIMES: dict[str, Any] = {"beside": None}
_WITH_BATCHES: dict[str, Any] = {"beside": "batches"}
_NOT_IN_FILE: dict[str, Any] = {"in_file": False}


def _in_file(f: Field) -> bool:
    return f.metadata.get("in_file", True)


class Communication(NamedTuple):
    """What one run moved between workers, in the implementation's own unit."""

    tuples: int
    unit: str


@dataclass(kw_only=True)
class RunRecord:
    """A run's record. Every field has the value a record without it meant (an older file lacks some),
    so a file of any age reads."""

    schema_version: int = results.SCHEMA_VERSION
    run_id: str = ""
    timestamp: str = ""
    git: dict = field(default_factory=dict)
    machine: dict = field(default_factory=dict)
    workload: str | None = None
    trial: int = 0
    semantics: str = "undirected"
    query: dict = field(default_factory=dict)  # {name} as requested, the resolved pattern once checked
    dataset: dict = field(default_factory=dict)  # {name} as requested, the loaded graph's description once loaded
    implementation: str = ""
    params: dict = field(default_factory=dict)  # workers and the run's parameters
    timeout_s: float | None = None
    status: str | None = None  # results.STATUSES; None until the run has ended
    error: str | None = None
    allow_unverified: bool = False
    timeout_expected: bool = False
    mem_expected: bool = False
    count: int | None = None
    limit: int | None = None  # --limit N: count is min(N, matches), verified as such
    output: dict | None = None  # --output: the Parquet directory the matches went to, its rows and columns
    verified: bool = False
    unverified_reason: str | None = None
    oracle: dict | None = None
    checks: list[dict] = field(default_factory=list)
    metrics: dict = field(default_factory=dict)
    logical: dict = field(default_factory=dict)
    spark: dict | None = field(default=None, metadata=_SOMETIMES)  # once the session is up
    census: dict | None = field(default=None, metadata=_SOMETIMES)  # a motif census
    initial: dict | None = field(default=None, metadata=_SOMETIMES)  # a dynamic run: the initial state's recount,
    batches: list[dict] | None = field(default=None, metadata=_SOMETIMES)  # each batch,
    agreement: dict | None = field(default=None, metadata=_WITH_BATCHES)  # and the recompute's (null without one)
    traceback: str | None = field(default=None, metadata=_SOMETIMES)  # a failure's cause
    memory_cap_hit: dict | None = field(default=None, metadata=_SOMETIMES)  # a MEM: which worker, what was killed, in which phase
    series: str | None = field(default=None, metadata=_SOMETIMES)  # runs plotted together across graphs (weak scaling)
    unknown: dict = field(default_factory=dict, metadata=_NOT_IN_FILE)  # a file's keys not named above, kept
    read_from: str | None = field(default=None, compare=False, metadata=_NOT_IN_FILE)  # its run directory (report)

    def to_json(self) -> dict:
        """The record as its file holds it: the fields in order, those written only sometimes when
        present, then any unknown keys it was read with. Nested parts are shared, not copied."""
        out = {}
        for f in fields(self):
            if not _in_file(f):
                continue
            if "beside" in f.metadata and getattr(self, f.metadata["beside"] or f.name) is None:
                continue
            out[f.name] = getattr(self, f.name)
        return out | self.unknown

    @classmethod
    def from_json(cls, data: dict, read_from: str | None = None) -> RunRecord:
        """A record from its file's dict, of this schema or an older one: missing fields default, keys
        not named here are kept in `unknown`."""
        named = {f.name for f in fields(cls) if _in_file(f)}
        return cls(
            **{k: v for k, v in data.items() if k in named},
            unknown={k: v for k, v in data.items() if k not in named},
            read_from=read_from,
        )

    @property
    def query_name(self) -> str | None:
        return self.query.get("name")

    @property
    def dataset_name(self) -> str | None:
        return self.dataset.get("name")

    @property
    def workers(self) -> int | None:
        return self.params.get("workers")

    @property
    def case_name(self) -> str:
        """The run's query and graph, as tables and plots name a case: "clique4 on rmat-12"."""
        return f"{self.query_name} on {self.dataset_name}"

    @property
    def scaling_case(self) -> str:
        """The case a scaling plot or table puts the run in: its case, or its query across a series of
        graphs (weak scaling: "triangle on the graph grown with W"), with its cap per worker if it ran under one."""
        case = f"{self.query_name} on {self.series}" if self.series else self.case_name
        cap = self.params.get("memory_per_worker")
        return f"{case}, capped at {cap}" if cap else case

    @property
    def run_key(self) -> str:
        """What the run measures (results.run_key): the gate's and the report's name for it."""
        return results.run_key(self)

    @property
    def finished(self) -> bool:
        """The count stands: OK, or UNVERIFIED (labelled)."""
        return self.status in FINISHED

    @property
    def index_s(self) -> float | None:
        return self.metrics.get("index_s")

    @property
    def query_s(self) -> float | None:
        return self.metrics.get("query_s")

    @property
    def processing_s(self) -> float | None:
        """Index + query seconds, Graphalytics' processing time (metrics.graphalytics), from the fields every
        record has, older ones included; None when the run stopped before its answer."""
        if self.index_s is None or self.query_s is None:
            return None
        return self.index_s + self.query_s

    @property
    def index_charged_s(self) -> float:
        """The builds of the shared indices this run reused, at the seconds the runs that built them took
        (shared_index); 0 when it built its own, or in a record older than the field."""
        return float(self.metrics.get("index_charged_s") or 0.0)

    @property
    def index_builders(self) -> list[str]:
        """The implementations whose index builds this run reused (shared_index, `index_shared`), sorted;
        empty when it built its own."""
        return sorted({b["implementation"] for b in self.metrics.get("index_shared") or []})

    @property
    def charged_s(self) -> float | None:
        """Index + query with every index the run used charged to it: its own processing time plus the
        builds it reused from earlier runs. What a contest ranks, so each row is one implementation's whole cost."""
        own = self.processing_s
        return None if own is None else own + self.index_charged_s

    @property
    def process_peaks(self) -> dict[str, ProcessPeak]:
        """The run's own processes' resident bytes at its start and peak (metrics.memory); empty without them."""
        memory = self.metrics.get("memory") or {}
        return process_peaks(memory) if memory else {}

    @property
    def added_peak_memory_bytes(self) -> int | None:
        """What the run added at its peak to the driver's Python, the driver's JVM and the JVM's Python
        workers (each peak minus its start, summed): local-gj's work shows in the first, Spark's in the others."""
        peaks = self.process_peaks.values()
        if not any(p.peak_bytes for p in peaks):
            return None
        return sum(max(0, (p.peak_bytes or 0) - (p.start_bytes or 0)) for p in peaks)

    @property
    def memory_cap(self) -> dict:
        """A capped run's measurements (metrics.memory_cap); empty for an uncapped run."""
        return self.metrics.get("memory_cap") or {}

    @property
    def communication(self) -> Communication | None:
        """Tuples moved between workers by the run, in the implementation's own unit."""
        m, lg = self.metrics, self.logical
        if m.get("tuples_shipped") is not None:
            return Communication(m["tuples_shipped"], "tuples shipped to cells")
        if lg.get("tuples_exchanged") is not None:
            return Communication(lg["tuples_exchanged"], "prefix tuples exchanged")
        if m.get("shuffle_records"):
            return Communication(m["shuffle_records"], "Spark shuffle records")
        return None
