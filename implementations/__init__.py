"""Registry of implementations by name."""
from __future__ import annotations

from harness.errors import DataError

from .base import BatchOutcome, Implementation, Outcome, Param, RunContext
from .bigjoin import BiGJoin
from .bigjoin_s import BiGJoinS
from .binary import BinaryJoin
from .delta_bigjoin import DeltaBiGJoin
from .local_gj import LocalGenericJoin
from .shares import Shares

REGISTRY: dict[str, type[Implementation]] = {cls.name: cls for cls in (BinaryJoin, LocalGenericJoin, BiGJoin, BiGJoinS, DeltaBiGJoin, Shares)}


def get(name: str) -> type[Implementation]:
    try:
        return REGISTRY[name]
    except KeyError:
        raise DataError(f"unknown implementation '{name}' (registered: {', '.join(sorted(REGISTRY))})") from None


__all__ = ["REGISTRY", "BatchOutcome", "Implementation", "Outcome", "Param", "RunContext", "get"]
