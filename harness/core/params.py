"""Declared run parameters: each implementation lists the parameters it reads (name, type, default,
help) and the harness checks a run's parameters against those declarations before Spark starts. The
command line's flags and their help text come from the same declarations."""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from harness.core.errors import DataError

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)


class Param(NamedTuple):
    """One parameter an implementation (or the harness itself) reads from a run's `params`."""

    name: str
    type: type  # int, float, str or bool
    default: Any
    help: str

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def check(self, value: Any, owner: str) -> Any:
        """The value as this parameter's type; a DataError naming the key if it is not one."""
        if value is None:  # an explicit null keeps the default, as an absent key does
            return self.default
        # bool is an int in Python, but `batch: true` is a mistake, not 1.
        ok = isinstance(value, self.type) and not (self.type is not bool and isinstance(value, bool))
        if self.type is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        if not ok:
            raise DataError(f"params.{self.name}: {owner} expects {self.type.__name__}, got {value!r}")
        return value


def resolve(declared: tuple[Param, ...], given: dict, owner: str) -> dict[str, Any]:
    """Every declared parameter's typed value (given, else its default); an undeclared key is a DataError."""
    by_name = {p.name: p for p in declared}
    for key in given:
        if key not in by_name:
            known = ", ".join(sorted(by_name)) or "none"
            raise DataError(f"params.{key}: unknown parameter for {owner} (it reads: {known})")
    return {p.name: p.check(given.get(p.name), owner) for p in declared}


def parse_size(text: str, key: str = "--memory-budget") -> int:
    """Bytes from '512m', '1g', '1.5GiB' or a plain number of bytes."""
    found = _SIZE.match(str(text))
    if not found:
        raise DataError(f"{key}: '{text}' is not a size (e.g. 512m, 2g or a number of bytes)")
    number, unit = found.groups()
    return int(float(number) * 1024 ** "bkmgt".index((unit or "b").lower()))


def human(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return str(n)
