"""Registry of implementations by name: the one list the harness, compare, the CLI and the tests take
them from. Adding an implementation is its module and one line here; the order is compare's."""

from __future__ import annotations

# First: importing it keys numba's cache on the kernels' source, before any kernel module's decorators run.
from harness.core import numba_cache  # noqa: F401
from harness.core.errors import DataError
from implementations.base import BatchOutcome, Implementation, Outcome, Param, RunContext, WorkerCap
from implementations.bigjoin import BiGJoin
from implementations.bigjoin_carry import BiGJoinCarry
from implementations.bigjoin_s import BiGJoinS
from implementations.bigjoin_s_paper import BiGJoinSPaper
from implementations.binary import BinaryJoin
from implementations.delta_bigjoin import DeltaBiGJoin
from implementations.local_gj import LocalGenericJoin
from implementations.nested_loop import NestedLoop
from implementations.replicated import Replicated
from implementations.shares import Shares

REGISTRY: dict[str, type[Implementation]] = {
    cls.name: cls
    for cls in (
        LocalGenericJoin,
        BiGJoin,
        BiGJoinCarry,
        BiGJoinS,
        DeltaBiGJoin,
        Shares,
        Replicated,
        BinaryJoin,
        BiGJoinSPaper,
        NestedLoop,
    )
}


def kernels_of(names, anti: bool = False, labels: bool = False) -> frozenset[str]:
    """The kernel families the named implementations use (unknown names: none; their runs fail alone),
    with their variants for patterns with anti-relations (`anti`) or vertex labels (`labels`):
    `warm.variants`."""
    from implementations.warm import variants

    return variants(frozenset().union(*(REGISTRY[n].kernels for n in names if n in REGISTRY)), anti, labels)


def get(name: str) -> type[Implementation]:
    try:
        return REGISTRY[name]
    except KeyError:
        raise DataError(f"unknown implementation '{name}' (registered: {', '.join(sorted(REGISTRY))})") from None


__all__ = ["REGISTRY", "BatchOutcome", "Implementation", "Outcome", "Param", "RunContext", "WorkerCap", "get"]
