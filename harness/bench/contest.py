"""The contest view of a bench: on each case (query, dataset, semantics, W), one row per implementation
(and per value of a parameter the workload swept), ranked by index + query time (Graphalytics'
processing time, median over trials), and one sentence naming the winner and by how much.
Only a run whose count stands can win: OK, or UNVERIFIED (labelled); a wrong count (VAL), a timeout
(TIM) or a failure (EXE) is ranked after every finisher."""

from __future__ import annotations

import json
import statistics
import textwrap
from dataclasses import dataclass, field

from rich import box
from rich.table import Table

from harness.bench.record import FINISHED, RunRecord
from harness.bench.tables import fmt_bytes, fmt_int, fmt_si

_STATUS_ORDER = ("VAL", "EXE", "DAT", "MEM", "TIM", "UNVERIFIED", "OK")  # a case's worst trial names its status
CV_SHOWN = 0.10  # trials that vary more than this (stdev / mean) say so beside their time
WIDTH = 100  # the contest table's width at most, whatever the terminal's
SHARED_MARK = "*"  # a time that includes a reused index's build, charged at the seconds its builder took
SHORT_NAMES = {"memory_per_worker": "cap", "memory_budget": "budget"}  # a swept parameter in a row's label


@dataclass
class Entry:
    """One implementation on one case (at one value of each swept parameter), its trials summarised."""

    implementation: str
    status: str
    trials: int
    verified_by: list[str]  # the independent checks that agreed (every trial's)
    seconds: float | None  # median index + query over finished trials, reused indices charged (RunRecord.charged_s)
    timeout_s: float | None  # a TIM's limit
    tuples: int | None  # communicated between workers, in the implementation's own unit
    tuples_unit: str | None
    rounds: int | None
    peak_memory_bytes: int | None  # median over trials of the run's added peak RSS (RunRecord.added_peak_memory_bytes)
    ratio: float | None = None  # seconds / the fastest finisher's seconds
    swept: dict[str, object] = field(default_factory=dict)  # the swept parameters' values of this row
    cv: float | None = None  # stdev / mean of the finished trials' seconds (two or more)
    evps: float | None = None  # Graphalytics' EVPS: (vertices + edges) / seconds
    charged: list[str] = field(default_factory=list)  # the runs whose index builds a trial reused, charged in `seconds`

    @property
    def label(self) -> str:
        """The row's name: the implementation, then each swept parameter's value (bigjoin batch=1000)."""
        return " ".join([self.implementation, *(f"{SHORT_NAMES.get(k, k)}={v}" for k, v in self.swept.items())])


@dataclass
class Case:
    query: str
    dataset: str
    semantics: str
    workers: int
    entries: list[Entry]  # ranked: finishers fastest first, then the rest

    @property
    def title(self) -> str:
        return f"{self.query} on {self.dataset} ({self.semantics}, W={self.workers})"


def _rounds(record: RunRecord) -> int | None:
    logical = record.logical
    return logical.get("rounds") if logical.get("rounds") is not None else record.metrics.get("rounds")


def _median_int(values: list) -> int | None:
    present = [v for v in values if v is not None]
    return int(statistics.median(present)) if present else None


def coefficient_of_variation(seconds: list[float]) -> float | None:
    """stdev / mean over trials; None for fewer than two."""
    if len(seconds) < 2 or statistics.mean(seconds) <= 0:
        return None
    return statistics.stdev(seconds) / statistics.mean(seconds)


def _evps(runs: list[RunRecord], seconds: float | None) -> float | None:
    """Graphalytics' edges plus vertices per second of processing time, from the dataset's counts."""
    dataset = runs[0].dataset
    if not seconds or dataset.get("vertices") is None or dataset.get("edges") is None:
        return None
    return (dataset["vertices"] + dataset["edges"]) / seconds


def _entry(impl: str, runs: list[RunRecord], swept: dict | None = None) -> Entry:
    status = min((str(r.status) for r in runs), key=lambda s: _STATUS_ORDER.index(s) if s in _STATUS_ORDER else -1)
    finished = [r for r in runs if r.finished]
    seconds = [t for r in finished if (t := r.charged_s) is not None]
    agreed = [{c["name"] for c in r.checks if c.get("agrees") is True} for r in runs]
    comm = [r.communication for r in finished]
    median = statistics.median(seconds) if seconds and status in FINISHED else None
    return Entry(
        implementation=impl,
        status=status,
        trials=len(runs),
        verified_by=sorted(set.intersection(*agreed)) if agreed and all(r.verified for r in runs) else [],
        seconds=median,
        timeout_s=next((r.timeout_s for r in runs if r.status == "TIM"), None),
        tuples=_median_int([c.tuples if c else None for c in comm]),
        tuples_unit=next((c.unit for c in comm if c), None),
        rounds=_median_int([_rounds(r) for r in finished]),
        peak_memory_bytes=_median_int([r.added_peak_memory_bytes for r in finished]),
        swept=swept or {},
        cv=coefficient_of_variation(seconds) if median is not None else None,
        evps=_evps(runs, median),
        charged=sorted({name for r in finished for name in r.index_builders}),
    )


def _param_value(value) -> str:
    return json.dumps(value, sort_keys=True, default=str)  # a dict-valued parameter (an update stream) compares too


def swept_params(runs: list[RunRecord]) -> list[str]:
    """The parameters whose values differ between these runs: what a workload swept (workers aside,
    which is part of the case)."""
    keys = sorted({k for r in runs for k in r.params} - {"workers"})
    return [k for k in keys if len({_param_value(r.params.get(k)) for r in runs}) > 1]


def _rows(runs: list[RunRecord]) -> list[Entry]:
    """One entry per implementation and, where it swept parameters, per value: trials fold, values do not."""
    by_impl: dict[str, list[RunRecord]] = {}
    for r in runs:
        by_impl.setdefault(r.implementation, []).append(r)
    entries = []
    for impl, impl_runs in by_impl.items():
        keys = swept_params(impl_runs)
        by_value: dict[str, list[RunRecord]] = {}
        for r in impl_runs:
            by_value.setdefault(_param_value([r.params.get(k) for k in keys]), []).append(r)
        for value_runs in by_value.values():
            entries.append(_entry(impl, value_runs, {k: value_runs[0].params.get(k) for k in keys}))
    return entries


def cases(records: list[RunRecord]) -> list[Case]:
    """Group a bench's records by case, in the order they ran; rank each case's rows."""
    groups: dict[tuple, list[RunRecord]] = {}
    for r in records:
        key = (str(r.query_name), str(r.dataset_name), r.semantics, r.workers)
        groups.setdefault(key, []).append(r)
    out = []
    for (query, dataset, semantics, workers), runs in groups.items():
        entries = _rows(runs)
        finishers = sorted((e for e in entries if e.seconds is not None), key=lambda e: e.seconds or 0.0)
        rest = [e for e in entries if e.seconds is None]
        if finishers:
            fastest = finishers[0].seconds or 1e-9
            for e in finishers:
                e.ratio = (e.seconds or 0.0) / fastest
        out.append(Case(query, dataset, semantics, int(workers or 0), finishers + rest))
    return out


def winner_sentence(case: Case) -> str:
    """One sentence: who won the case and by how much (against the runner-up; against the fastest Spark
    implementation too when the single-thread baseline won)."""
    finishers = [e for e in case.entries if e.seconds is not None]
    if len(case.entries) == 1:  # not a contest
        e = case.entries[0]
        took = f" in {e.seconds:.2f} s ({_what_is_timed(case)})" if e.seconds is not None else ""
        return f"{e.label} ran {case.title} alone: {e.status}{took}."
    others = len(case.entries) - len(finishers)
    tail = f" ({others} did not finish)" if others else ""
    if not finishers:
        return f"No implementation finished {case.title}{tail}."
    best = finishers[0]
    label = "" if best.status == "OK" else " (count unverified)"
    if len(finishers) == 1:
        return f"{best.label}{label} won {case.title}, the only one to finish, in {best.seconds:.2f} s{tail}."
    second = finishers[1]
    sentence = (
        f"{best.label}{label} won {case.title} in {best.seconds:.2f} s ({_what_is_timed(case)}), "
        f"{second.ratio:.1f}x faster than {second.label} ({second.seconds:.2f} s)"
    )
    spark = [e for e in finishers if e.implementation != "local-gj"]
    if best.implementation == "local-gj" and spark and spark[0] is not second:
        sentence += f"; the fastest on Spark, {spark[0].label}, took {spark[0].ratio:.1f}x as long"
    return sentence + tail + "."


def _what_is_timed(case: Case) -> str:
    """What every time of the case is: each implementation's own index + query, shared builds charged."""
    if any(e.charged for e in case.entries):
        return "index + query, reused index builds charged"
    return "index + query"


def winner_lines(case: Case, width: int) -> list[str]:
    """The note on shared indices, if any, then the winner's sentence, wrapped to the console's width (a
    terminal's, or COLUMNS)."""
    note = shared_note(case)
    lines = textwrap.wrap(note, width, break_on_hyphens=False) if note else []
    return lines + textwrap.wrap(winner_sentence(case), width, break_on_hyphens=False)


def _status_cell(e: Entry) -> str:
    colour = {"OK": "green", "UNVERIFIED": "yellow"}.get(e.status, "red")
    return f"[{colour}]{e.status}[/]"


def _ratio_cell(e: Entry, fastest: float | None) -> str:
    if e.ratio is not None:
        return f"{e.ratio:.1f}x"
    if e.status == "TIM" and e.timeout_s and fastest:
        return f">{e.timeout_s / fastest:.0f}x"
    return "-"


def _time_cell(e: Entry) -> str:
    """The median seconds, and how much the trials varied when that is more than CV_SHOWN (12.30 ±14%)."""
    if e.seconds is None:
        return f">{e.timeout_s:g}" if e.timeout_s else "-"
    varied = f" ±{e.cv:.0%}" if e.cv is not None and e.cv > CV_SHOWN else ""
    return f"{e.seconds:.2f}{SHARED_MARK if e.charged else ''}{varied}"


def shared_note(case: Case) -> str | None:
    """The line under a table that says which times include an index another run built (and charge it)."""
    marked = [e for e in case.entries if e.charged and e.seconds is not None]
    if not marked:
        return None
    said = "; ".join(f"{e.label}'s from {', '.join(e.charged)}" for e in marked)
    return f"{SHARED_MARK} reused an index built by an earlier run, its build time charged here: {said}."


def table(case: Case, wide: bool = False) -> Table:
    """The contest table: fits 100 columns (a swept parameter's long label wraps first); `wide` adds the
    trials, Graphalytics' EVPS and the unit of each tuple count."""
    fastest = next((e.seconds for e in case.entries if e.seconds is not None), None)
    t = Table(title=case.title, box=box.SIMPLE_HEAD, pad_edge=False)
    for name, justify in (
        ("implementation", "left"),
        ("status", "left"),
        ("verified by", "left"),
        ("time s", "right"),
        ("vs best", "right"),
        ("tuples moved", "right"),
        ("rounds", "right"),
        ("peak mem", "right"),
    ):
        t.add_column(name, justify=justify)  # type: ignore[arg-type]
    if wide:
        t.add_column("trials", justify="right")
        t.add_column("EVPS", justify="right")
        t.add_column("tuples are", justify="left")
    for e in case.entries:
        row = [
            e.label,
            _status_cell(e),
            ", ".join(e.verified_by) or ("[yellow]nobody[/]" if e.status in FINISHED else "-"),
            _time_cell(e),
            _ratio_cell(e, fastest),
            fmt_int(e.tuples) if e.tuples is not None else ("0" if e.status in FINISHED else "-"),
            fmt_int(e.rounds),
            fmt_bytes(e.peak_memory_bytes) if e.peak_memory_bytes is not None else "-",
        ]
        if wide:
            row += [str(e.trials), fmt_si(e.evps), e.tuples_unit or "-"]
        t.add_row(*row)
    return t
