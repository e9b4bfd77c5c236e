"""Running a count in a spawned process that a timeout can kill: oracles and peer systems alike."""

from __future__ import annotations

import multiprocessing as mp
import time
from typing import Any


def _child(conn, fn, args: tuple) -> None:
    try:
        conn.send(("ok", fn(*args)))
    except BaseException as exc:  # report, never hang the parent
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


def run_in_child(fn, args: tuple, timeout_s: float) -> tuple[str, Any, float]:
    """fn(*args) in a spawned process (fn must be a module-level function), killed at the timeout.
    Returns (status ok|timeout|error, the value or the reason, seconds); never raises."""
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child, fn, args), daemon=True)
    start = time.perf_counter()
    proc.start()
    child.close()
    if parent.poll(timeout_s):
        try:
            status, payload = parent.recv()
        except EOFError:
            status, payload = (
                "error",
                f"child process died (exit code {proc.exitcode if proc.exitcode is not None else 'unknown'})",
            )
    else:
        status, payload = "timeout", f"no answer within {timeout_s:g} s"
    seconds = round(time.perf_counter() - start, 3)
    proc.kill() if proc.is_alive() else None
    proc.join(5)
    return status, payload, seconds
