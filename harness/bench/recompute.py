"""The recompute an update saves (a dynamic run's `params.recompute: NAME`): a fresh run of the
registered implementation NAME on each state of the graph, timed (index build + count). It is this
project's own code, so its count is agreement with the maintained count, recorded as such and never
as verification: the states are verified by dynamic.recount's independent oracle. Which
implementation recomputes comes from configuration, by its registry name; nothing here names one."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from harness.core.errors import DataError
from harness.core.query import JoinSpec
from harness.data import datasets

if TYPE_CHECKING:
    from implementations import Implementation


def implementation(name: str | None) -> type[Implementation] | None:
    """The registered implementation `params.recompute` names; None when there is no recompute."""
    if name is None:
        return None
    from implementations import get

    try:
        return get(name)
    except DataError as exc:
        raise DataError(f"params.recompute: {exc}") from None


def on_state(impl_cls: type[Implementation], spark, state: Path, spec: JoinSpec, name: str, workers: int) -> dict:
    """{count, seconds}: a fresh `impl_cls` prepares and counts the graph at `state`, with arrangements
    of its own, which are removed afterwards (nothing else shares them)."""
    from implementations import RunContext

    graph = datasets.from_canonical_parquet(spark, state, spec.semantics, name, workers)
    arrangements: dict = {}
    fresh = impl_cls(RunContext(spark, graph, spec, workers, {}, arrangements))
    start = time.perf_counter()
    fresh.prepare()
    count = fresh.count().count
    seconds = time.perf_counter() - start
    graph.df.unpersist()
    for arrangement in arrangements.values():  # e.g. the BiGJoin family's on-disk index
        close = getattr(arrangement, "close", None)
        if callable(close):
            close()
    return {"count": count, "seconds": round(seconds, 4)}


def agreement(name: str, agrees: list[bool]) -> dict:
    """The run's `agreement` field: how many recomputed states agreed with the maintained count."""
    return {
        "with": f"a fresh {name} run on every state (timing comparison, not verification)",
        "states": len(agrees),
        "agreeing": sum(agrees),
    }
