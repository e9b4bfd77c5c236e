"""`key=value,...` specs (or YAML mappings) to and from typed, validated parameter dataclasses.
Used by generator specs and update-stream specs."""

from __future__ import annotations

import dataclasses

from harness.core.errors import DataError


def parse(cls, source: str | dict, what: str, noun: str = "parameter"):
    """Build `cls` from `k=v,k=v` text or a mapping; name `what` and the key in every error."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    if isinstance(source, dict):
        items = list(source.items())
    else:
        items = [(k, v if eq else None) for k, eq, v in (p.strip().partition("=") for p in source.split(",") if p.strip())]
    values: dict[str, object] = {}
    for key, raw in items:
        if key not in fields or raw is None:
            raise DataError(f"{what}: unknown {noun} '{key}' (known: {', '.join(fields)})")
        typ = fields[key].type
        try:
            if typ in ("bool", bool):
                values[key] = raw if isinstance(raw, bool) else str(raw).lower() in ("1", "true", "yes")
            elif typ in ("int", int, "int | None"):
                values[key] = int(raw)
            elif typ in ("str", str):
                values[key] = "/".join(str(x) for x in raw) if isinstance(raw, list) else str(raw)
            else:
                values[key] = float(raw)
        except (TypeError, ValueError):
            raise DataError(f"{what}: {noun} '{key}' has bad value {raw!r}") from None
    missing = [k for k, f in fields.items() if f.default is dataclasses.MISSING and k not in values]
    if missing:
        raise DataError(f"{what}: {noun} '{missing[0]}' is required")
    obj = cls(**values)
    obj.validate()
    return obj


def to_text(obj) -> str:
    """The canonical `k=v,...` form of a parameter dataclass (every field in declaration order, bar
    empty text fields and optional ones not given)."""
    return ",".join(f"{f.name}={getattr(obj, f.name)}" for f in dataclasses.fields(obj) if getattr(obj, f.name) not in ("", None))
