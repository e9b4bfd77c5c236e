"""Where a cold warm-up's time goes: each kernel's compilations, their seconds (its own, without the
kernels it calls), and for a kernel compiled more than once, the arguments whose types told the
compilations apart (a literal constant, a read-only array). In a process of its own whose numba cache
is an empty folder, so nothing is loaded and the user's cache is not touched:

    python -m implementations.compile_profile bigjoin [one-level ...]

What it printed on 2026-11-29 is in results/profiles/compile-bigjoin-20261129.md."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from typing import Any, NamedTuple


class Compilation(NamedTuple):
    kernel: str  # module.name
    argument_names: tuple[str, ...]
    argument_types: tuple[Any, ...]
    own_s: float  # without the nested compilations of the kernels it calls


def record(families: list[str]) -> tuple[float, list[Compilation]]:
    """Warm `families` on an empty cache; the wall time and every compilation, in order of completion."""
    from numba.core import event

    found: list[Compilation] = []
    open_spans: list[list[float]] = []  # [start, seconds of nested compilations]

    class Listener(event.Listener):
        def on_start(self, _event):
            open_spans.append([time.perf_counter(), 0.0])

        def on_end(self, ended):
            start, nested = open_spans.pop()
            total = time.perf_counter() - start
            if open_spans:
                open_spans[-1][1] += total
            kernel, args = ended.data["dispatcher"].py_func, tuple(ended.data["args"])
            names = kernel.__code__.co_varnames[: len(args)]
            found.append(Compilation(f"{kernel.__module__}.{kernel.__name__}", names, args, total - nested))

    event.register("numba:compile", Listener())
    from implementations.warm import warm_families

    began = time.perf_counter()
    warm_families(families)
    return time.perf_counter() - began, found


def report(wall_s: float, found: list[Compilation], top: int = 25) -> list[str]:
    by_kernel: dict[str, list[Compilation]] = defaultdict(list)
    for c in found:
        by_kernel[c.kernel].append(c)
    seconds = {kernel: sum(c.own_s for c in cs) for kernel, cs in by_kernel.items()}
    ranked = sorted(by_kernel.items(), key=lambda kv: -seconds[kv[0]])
    lines = [f"wall {wall_s:.1f} s, {len(found)} compilations, {sum(seconds.values()):.1f} s in all", ""]
    lines += [f"{seconds[kernel]:7.1f} s {len(cs):3d}x  {kernel}" for kernel, cs in ranked[:top]]
    lines += ["", "kernels compiled more than once, and the arguments whose types differ:"]
    for kernel, cs in ranked:
        if len(cs) > 1 and len({len(c.argument_types) for c in cs}) == 1:
            lines += [f"{seconds[kernel]:7.1f} s  {kernel}", *_differences(cs)]
    return lines


def _differences(cs: list[Compilation]) -> list[str]:
    differ = [i for i in range(len(cs[0].argument_types)) if len({str(c.argument_types[i]) for c in cs}) > 1]
    return [
        f"          {c.own_s:5.1f} s  " + "; ".join(f"{c.argument_names[i]}={str(c.argument_types[i])[:48]}" for i in differ)
        for c in cs
    ]


_EMPTY_CACHE = "HARNESS_COMPILE_PROFILE_CACHE"  # set in the process that profiles: its cache is empty


def main(families: list[str]) -> int:
    """Profile `families` in a new process whose numba cache is an empty folder (numba and the project's
    locator read NUMBA_CACHE_DIR as the kernels' modules are imported, before this runs)."""
    empty = os.environ.get(_EMPTY_CACHE)
    if empty and empty == os.environ.get("NUMBA_CACHE_DIR"):
        wall_s, found = record(families)
        print("\n".join(report(wall_s, found)))
        return 0
    cache = tempfile.mkdtemp(prefix="compile-profile-")
    try:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache, **{_EMPTY_CACHE: cache})
        return subprocess.call([sys.executable, "-m", "implementations.compile_profile", *families], env=env)
    finally:
        shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["bigjoin"]))
