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


class ExecutionError(HarnessError):
    status = "EXE"
