"""The micro-benchmarks' comparison with the saved run (`make gate`). On another machine pytest-benchmark
warns with both machine descriptions in full, one line of some 3,000 characters; here that warning
becomes one short line naming what differs."""

from __future__ import annotations

import json
import sys
import warnings

import pytest

DIFFERENT = "Benchmark machine_info is different"
FIRST = ("node", "cpu.brand_raw", "cpu.count", "python_version", "release")  # named first: what a reader asks
SHOWN = 3  # differing keys named with their values; the rest are counted


def differing_keys(current: dict, saved: dict, prefix: str = "") -> list[str]:
    """The dotted keys whose values differ between two machine descriptions (nested dicts walked)."""
    out = []
    for key in sorted(set(current) | set(saved)):
        mine, theirs = current.get(key), saved.get(key)
        if isinstance(mine, dict) and isinstance(theirs, dict):
            out += differing_keys(mine, theirs, f"{prefix}{key}.")
        elif mine != theirs:
            out.append(f"{prefix}{key}")
    return sorted(out, key=lambda k: FIRST.index(k) if k in FIRST else len(FIRST))


def _value(info: dict, dotted: str) -> str:
    for part in dotted.split("."):
        info = info.get(part) if isinstance(info, dict) else None  # type: ignore[assignment]
    text = str(info)
    return text if len(text) <= 16 else text[:15] + "…"  # a CPU's flag list is hundreds of characters


def summary(current: dict, saved: dict) -> str:
    """One line: the keys that differ, the first few with both values (saved -> this machine)."""
    current, saved = json.loads(json.dumps(current)), json.loads(json.dumps(saved))  # tuples as the saved lists
    keys = differing_keys(current, saved)
    named = ", ".join(f"{k} {_value(saved, k)} -> {_value(current, k)}" for k in keys[:SHOWN])
    more = f" (+{len(keys) - SHOWN} more)" if len(keys) > SHOWN else ""
    return f"micro-benchmarks: saved on another machine: {named}{more}"


@pytest.hookimpl(wrapper=True)
def pytest_benchmark_compare_machine_info(config, benchmarksession, machine_info, compared_benchmark):
    """pytest-benchmark's own check runs inside; its long warning is caught and said in one line."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = yield
    for w in caught:
        if DIFFERENT in str(w.message):
            print(summary(machine_info, compared_benchmark["machine_info"]), file=sys.stderr)
        else:  # any other warning as it would have been
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return result
