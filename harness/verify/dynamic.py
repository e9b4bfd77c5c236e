"""Dynamic runs: an implementation keeps a count current under a stream of update batches. The
harness applies the same batches to a reference edge set of its own (DuckDB, set semantics, in order)
and recounts the initial graph and the graph after every batch with an independent oracle (networkx,
DuckDB, GraphBLAS or the native counter, as `auto` picks them): never with an implementation."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from harness.core.errors import DataError
from harness.data.updates import UpdateStream
from harness.verify.oracles import Pattern, choose, run_oracle, sql

DYNAMIC_ORACLES = ("auto", "networkx", "duckdb", "graphblas", "native", "none")


class Reference:
    """The current directed edge set, kept by DuckDB from the same Parquet files the implementation reads."""

    def __init__(self, stream: UpdateStream, workdir: Path, semantics: str):
        self.con = sql.connect()
        self.con.execute(f"CREATE TABLE d AS SELECT DISTINCT src, dst FROM read_parquet('{stream.initial_path}/*.parquet')")
        self.updates = f"read_parquet('{stream.updates_path}/*.parquet')"
        self.workdir = workdir
        self.semantics = semantics
        canonical = (
            "SELECT DISTINCT least(src, dst) AS src, greatest(src, dst) AS dst FROM d WHERE src <> dst"
            if semantics == "undirected"
            else "SELECT src, dst FROM d"
        )
        self.con.execute(f"CREATE VIEW canonical AS {canonical}")

    def apply(self, batch: int) -> None:
        """Set semantics in order: each pair ends as its last update in the batch left it."""
        self.con.execute(
            f"CREATE OR REPLACE TEMP TABLE last AS SELECT src, dst, arg_max(diff, seq) AS diff "
            f"FROM {self.updates} WHERE batch = {int(batch)} GROUP BY src, dst"
        )
        self.con.execute("DELETE FROM d WHERE (src, dst) IN (SELECT src, dst FROM last)")
        self.con.execute("INSERT INTO d SELECT src, dst FROM last WHERE diff > 0")

    def edges(self) -> int:
        return self.con.execute("SELECT count(*) FROM canonical").fetchone()[0]

    def export(self, name: str) -> Path:
        (self.workdir / "states").mkdir(exist_ok=True)
        path = self.workdir / "states" / f"{name}.parquet"
        self.con.execute(f"COPY (SELECT * FROM canonical ORDER BY src, dst) TO '{path}' (FORMAT parquet)")
        return path

    def duckdb_count(self, pattern: Pattern, timeout_s: float) -> int | None:
        """The DuckDB oracle's count on the current graph, or None if it took longer than timeout_s."""
        timer = threading.Timer(timeout_s, self.con.interrupt)
        timer.start()
        try:
            return sql.count_on(self.con, pattern, "canonical")
        except Exception as exc:
            if "interrupt" in str(exc).lower():
                return None
            raise
        finally:
            timer.cancel()

    def close(self) -> None:
        self.con.close()


def choose_oracle(choice: str, pattern: Pattern, edges: int) -> str:
    if choice not in DYNAMIC_ORACLES:
        raise DataError(f"unknown oracle '{choice}' for an update stream (expected one of {', '.join(DYNAMIC_ORACLES)})")
    return choice if choice in ("none",) else choose(choice, pattern, edges)[0]


def recount(reference: Reference, pattern: Pattern, choice: str, timeout_s: float, name: str) -> dict:
    """{oracle, edges, oracle_count (None if not recounted), oracle_status, oracle_seconds[, oracle_count_s]}
    for the current graph."""
    edges = reference.edges()
    oracle = choose_oracle(choice, pattern, edges)
    start = time.perf_counter()
    out = {"oracle": oracle, "edges": edges, "oracle_count": None, "oracle_status": "ok"}
    if oracle == "none":
        out["oracle_status"] = "skipped: --oracle none"
    elif oracle == "duckdb":  # in place, on the reference's own table
        out["oracle_count"] = reference.duckdb_count(pattern, timeout_s)
        if out["oracle_count"] is None:
            out["oracle_status"] = f"timeout after {timeout_s:g} s"
    else:
        path = reference.export(name)
        check = run_oracle(oracle, str(path), pattern, timeout_s, match_limit=0)
        out["oracle_count"] = check["count"]
        out["oracle_count_s"] = check["count_s"]
        if check["status"] != "ok":
            out["oracle_status"] = f"{check['status']}: {check['reason']}"
    out["oracle_seconds"] = round(time.perf_counter() - start, 4)
    return out


def batch_entry(batch: int, updates: int, seconds: float, outcome, count: int, check: dict, recompute: dict | None) -> dict:
    entry = {
        "batch": batch,
        "updates": updates,
        "seconds": round(seconds, 4),
        "delta_count": outcome.delta,
        "count": count,
        **check,
        "agrees": None if check["oracle_count"] is None else check["oracle_count"] == count,
        "output_changes": outcome.output_changes,
        "updates_per_s": round(updates / seconds, 1) if seconds else None,
        "output_changes_per_s": round(outcome.output_changes / seconds, 1) if seconds else None,
    }
    if recompute is not None:  # a timing comparison; its count is agreement, not verification
        entry.update(
            recompute_s=recompute["seconds"], recompute_count=recompute["count"], recompute_agrees=recompute["count"] == count
        )
        if seconds:
            entry["recompute_over_update"] = round(recompute["seconds"] / seconds, 2)
    if check.get("oracle_count_s") and seconds:
        entry["oracle_count_over_update"] = round(check["oracle_count_s"] / seconds, 2)
    counters = outcome.counters
    entry["applied"] = outcome.applied
    entry["index"] = counters.get("index", {})
    entry["logical"] = {
        k: counters[k]
        for k in (
            "tuples_exchanged",
            "rounds",
            "proposals",
            "delta_queries",
            "kernels_compiled",
            "spark_jobs",
            "proposals_saved_by_sharing",
            "peak_bytes_in_flight_per_worker",
        )
        if k in counters
    }
    if outcome.changes is not None:
        entry["changes"] = [{"match": list(m), "diff": d} for m, d in outcome.changes]
        entry["changes_truncated"] = outcome.changes_truncated
    return entry


def summary(initial: dict, entries: list[dict]) -> dict:
    """The run's verdict: every state (initial and after each batch) recounted by an oracle and agreeing."""
    states = [initial] + entries
    checked = [s for s in states if s["agrees"] is not None]
    wrong = [s.get("batch", "initial") for s in states if s["agrees"] is False]
    status = "ok" if len(checked) == len(states) else ("skipped" if not checked else "partial")
    oracles = sorted({s["oracle"] for s in states})
    check = {
        "name": "recount after every batch",
        "oracles": oracles,
        "status": status,
        "states": len(states),
        "states_checked": len(checked),
        "disagreeing_batches": wrong,
        "count": states[-1]["oracle_count"],
        "agrees": (not wrong) if checked else None,
        "seconds": round(sum(s.get("oracle_seconds", 0) for s in states), 3),
    }
    if status != "ok":
        missed = [s for s in states if s["agrees"] is None]
        check["reason"] = (
            f"{len(missed)} of {len(states)} states were not recounted "
            f"({missed[0].get('batch', 'initial')}: {missed[0].get('oracle_status')})"
        )
    return check
