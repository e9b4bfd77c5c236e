"""Indices shared between runs, and who paid for them. Runs on one graph share its indices (an
implementation's `ctx.arrangements`, as differential dataflow's arrangements are shared): a later run
finds the index built and its own index time is near nothing. So that a contest compares each
implementation's own index + query, a run that reuses an index is charged the index time of the run
that built it (`index_charged_s`), and the record names that run (`index_shared`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Build:
    """One run's index build: which run (its implementation and trial) and its index seconds."""

    implementation: str
    trial: int
    index_s: float

    def to_json(self) -> dict:
        return {"implementation": self.implementation, "trial": self.trial, "index_s": self.index_s}


class Arrangements(dict):
    """A graph's shared indices by key (RunContext.arrangements), noting the keys each run reads and the
    run that built each one."""

    def __init__(self) -> None:
        super().__init__()
        self._read: set = set()
        self._builds: dict = {}  # key -> Build

    def __getitem__(self, key):
        self._read.add(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        if key in self:
            self._read.add(key)
        return super().get(key, default)

    def begin(self) -> frozenset:
        """A run starts: forget the keys read so far; returns the keys built before it."""
        self._read = set()
        return frozenset(self)

    def settle(self, before: frozenset, implementation: str, trial: int, index_s: float) -> list[Build]:
        """A run has prepared: the keys it added are its builds (of `index_s`); returns the builds of the
        other runs whose indices it read, once per building run."""
        built = set(self) - before
        for key in built:
            self._builds[key] = Build(implementation, trial, round(index_s, 4))
        reused = {self._builds[key] for key in self._read - built if key in self._builds}
        return sorted(reused, key=lambda b: (b.implementation, b.trial))


def charge(metrics: dict, builds: list[Build]) -> None:
    """The run's record: the shared builds it used and their seconds, charged beside its own index_s."""
    metrics["index_charged_s"] = round(sum(b.index_s for b in builds), 4)
    if builds:
        metrics["index_shared"] = [b.to_json() for b in builds]
