"""Registry of implementations by name: the one list the harness, compare, the CLI and the tests take
them from. Adding an implementation is its module and one line here; the order is compare's."""

from __future__ import annotations

from harness.errors import DataError

from .base import BatchOutcome, Implementation, Outcome, Param, RunContext
from .bigjoin import BiGJoin
from .bigjoin_carry import BiGJoinCarry
from .bigjoin_s import BiGJoinS
from .bigjoin_s_paper import BiGJoinSPaper
from .binary import BinaryJoin
from .delta_bigjoin import DeltaBiGJoin
from .local_gj import LocalGenericJoin
from .nested_loop import NestedLoop
from .shares import Shares

REGISTRY: dict[str, type[Implementation]] = {
    cls.name: cls
    for cls in (
        LocalGenericJoin,
        BiGJoin,
        BiGJoinCarry,
        BiGJoinS,
        DeltaBiGJoin,
        Shares,
        BinaryJoin,
        BiGJoinSPaper,
        NestedLoop,
    )
}


def kernels_of(names) -> frozenset[str]:
    """The kernel families the named implementations use (unknown names: none; their runs fail alone)."""
    return frozenset().union(*(REGISTRY[n].kernels for n in names if n in REGISTRY))


def get(name: str) -> type[Implementation]:
    try:
        return REGISTRY[name]
    except KeyError:
        raise DataError(f"unknown implementation '{name}' (registered: {', '.join(sorted(REGISTRY))})") from None


__all__ = ["REGISTRY", "BatchOutcome", "Implementation", "Outcome", "Param", "RunContext", "get"]
