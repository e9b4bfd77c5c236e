"""Dynamic runs: an implementation keeps a count current under a stream of update batches. After every
batch the harness applies the same batch to a reference edge set of its own (DuckDB, set semantics,
in order) and recounts the current graph with an oracle: networkx or DuckDB on small graphs, a fresh
BiGJoin run (index build + count, timed: the recompute the updates save) on large ones."""
from __future__ import annotations

import threading
import time
from pathlib import Path

from .errors import DataError
from .oracles import duckdb_sql, networkx_oracle
from .query import JoinSpec
from .updates import UpdateStream
from .verify import NETWORKX_AUTO_MAX_EDGES

DYNAMIC_ORACLES = ("auto", "networkx", "duckdb", "bigjoin", "none")
DUCKDB_AUTO_MAX_EDGES = 300_000  # above this `auto` recounts with BiGJoin


class Reference:
    """The current directed edge set, kept by DuckDB from the same Parquet files the implementation reads."""

    def __init__(self, stream: UpdateStream, workdir: Path, semantics: str):
        import duckdb

        self.con = duckdb.connect()
        self.con.execute("SET threads = 2")
        self.con.execute("SET enable_progress_bar = false")
        self.con.execute("SET disabled_optimizers = 'join_order'")  # as the DuckDB oracle: join in attribute order
        self.con.execute("SET memory_limit = '6GB'")
        self.con.execute(f"CREATE TABLE d AS SELECT DISTINCT src, dst FROM read_parquet('{stream.initial_path}/*.parquet')")
        self.updates = f"read_parquet('{stream.updates_path}/*.parquet')"
        self.workdir = workdir
        self.semantics = semantics
        canonical = ("SELECT DISTINCT least(src, dst) AS src, greatest(src, dst) AS dst FROM d WHERE src <> dst"
                     if semantics == "undirected" else "SELECT src, dst FROM d")
        self.con.execute(f"CREATE VIEW canonical AS {canonical}")

    def apply(self, batch: int) -> None:
        """Set semantics in order: each pair ends as its last update in the batch left it."""
        self.con.execute(f"CREATE OR REPLACE TEMP TABLE last AS SELECT src, dst, arg_max(diff, seq) AS diff "
                         f"FROM {self.updates} WHERE batch = {int(batch)} GROUP BY src, dst")
        self.con.execute("DELETE FROM d WHERE (src, dst) IN (SELECT src, dst FROM last)")
        self.con.execute("INSERT INTO d SELECT src, dst FROM last WHERE diff > 0")

    def edges(self) -> int:
        return self.con.execute("SELECT count(*) FROM canonical").fetchone()[0]

    def export(self, name: str) -> Path:
        (self.workdir / "states").mkdir(exist_ok=True)
        path = self.workdir / "states" / f"{name}.parquet"
        self.con.execute(f"COPY (SELECT * FROM canonical ORDER BY src, dst) TO '{path}' (FORMAT parquet)")
        return path

    def duckdb_count(self, spec: JoinSpec, timeout_s: float) -> int | None:
        """The count, or None if it took longer than timeout_s."""
        timer = threading.Timer(timeout_s, self.con.interrupt)
        timer.start()
        try:
            return int(self.con.execute(duckdb_sql(spec, "canonical")).fetchone()[0])
        except Exception as exc:
            if "interrupt" in str(exc).lower():
                return None
            raise
        finally:
            timer.cancel()

    def close(self) -> None:
        self.con.close()


def choose_oracle(choice: str, edges: int) -> str:
    if choice not in DYNAMIC_ORACLES:
        raise DataError(f"unknown oracle '{choice}' for an update stream (expected one of {', '.join(DYNAMIC_ORACLES)})")
    if choice != "auto":
        return choice
    if edges <= NETWORKX_AUTO_MAX_EDGES:
        return "networkx"
    return "duckdb" if edges <= DUCKDB_AUTO_MAX_EDGES else "bigjoin"


def recount(reference: Reference, spec: JoinSpec, choice: str, timeout_s: float, name: str, recompute) -> dict:
    """{oracle, oracle_count, oracle_seconds[, recompute_s]} for the current graph; count None if skipped.
    The initial state is not recomputed by BiGJoin: its count is a BiGJoin count already, and every
    later recount checks it (a running count is the initial count plus the deltas)."""
    edges = reference.edges()
    oracle = choose_oracle(choice, edges)
    start = time.perf_counter()
    out = {"oracle": oracle, "edges": edges, "oracle_count": None}
    if oracle == "bigjoin" and name == "initial":
        out["oracle_status"] = "not recounted: checked through every later recount"
    elif oracle == "networkx":
        out["oracle_count"] = networkx_oracle(str(reference.export(name)), spec, 0)[0]
    elif oracle == "duckdb":
        out["oracle_count"] = reference.duckdb_count(spec, timeout_s)
        if out["oracle_count"] is None:
            out["oracle_status"] = f"timeout after {timeout_s:g} s"
    elif oracle == "bigjoin":
        out["oracle_count"], out["recompute_s"] = recompute(reference.export(name))
    out["oracle_seconds"] = round(time.perf_counter() - start, 4)
    return out


def batch_entry(batch: int, updates: int, seconds: float, outcome, count: int, check: dict) -> dict:
    entry = {"batch": batch, "updates": updates, "seconds": round(seconds, 4), "delta_count": outcome.delta,
             "count": count, **check,
             "agrees": None if check["oracle_count"] is None else check["oracle_count"] == count,
             "output_changes": outcome.output_changes,
             "updates_per_s": round(updates / seconds, 1) if seconds else None,
             "output_changes_per_s": round(outcome.output_changes / seconds, 1) if seconds else None}
    if "recompute_s" in check and seconds:
        entry["recompute_over_update"] = round(check["recompute_s"] / seconds, 2)
    counters = outcome.counters
    entry["applied"] = {k: counters[k] for k in ("pairs_touched", "inserts_ignored", "deletes_ignored", "edges_inserted",
                                                 "edges_deleted", "relation_inserted", "relation_deleted", "compacted")
                        if k in counters}
    entry["index"] = counters.get("index", {})
    entry["logical"] = {k: counters[k] for k in ("tuples_exchanged", "rounds", "proposals", "delta_queries") if k in counters}
    if outcome.changes is not None:
        entry["changes"] = [{"match": list(m), "diff": d} for m, d in outcome.changes]
        entry["changes_truncated"] = outcome.changes_truncated
    return entry


def summary(initial: dict, entries: list[dict]) -> dict:
    """The run's verdict: every state (initial and after each batch) recounted and agreeing."""
    by_design = initial.get("oracle_status", "").startswith("not recounted")  # see recount()
    states = ([] if by_design else [initial]) + entries
    checked = [s for s in states if s["agrees"] is not None]
    wrong = [s.get("batch", "initial") for s in states if s["agrees"] is False]
    status = "ok" if len(checked) == len(states) else ("skipped" if not checked else "partial")
    oracles = sorted({s["oracle"] for s in states})
    check = {"name": "recount after every batch", "oracles": oracles, "status": status,
             "states": len(states), "states_checked": len(checked), "disagreeing_batches": wrong,
             "count": states[-1]["oracle_count"], "agrees": (not wrong) if checked else None,
             "seconds": round(sum(s.get("oracle_seconds", 0) for s in states), 3)}
    if status != "ok":
        check["reason"] = f"{len(states) - len(checked)} of {len(states)} states were not recounted (oracle {'/'.join(oracles)})"
    return check
