"""Typed failures. Each maps to a result status (LDBC Graphalytics style)."""

from __future__ import annotations


class HarnessError(Exception):
    """Base class; `status` is what a run that fails this way records."""

    status = "EXE"


class DataError(HarnessError):
    """Bad input: malformed edge file, unknown name, invalid pattern or YAML."""

    status = "DAT"


class RunTimeout(HarnessError):
    status = "TIM"


class MemoryCapExceeded(HarnessError):
    """A worker went over the run's memory cap (`memory_per_worker`)."""

    status = "MEM"


class ExecutionError(HarnessError):
    status = "EXE"
