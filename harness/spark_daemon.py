"""PySpark's Python worker daemon, run as `python -m harness.spark_daemon` in local mode (the session's
`spark.python.daemon.module`), without the tracebacks of workers whose task was cancelled.

When a run times out the harness cancels its Spark jobs; the JVM then closes the sockets of the Python
workers still running, and each prints a BrokenPipeError (or ConnectionResetError) traceback to the
terminal, in the middle of the contest. Those say only that the task was cancelled, which the run
already reports as TIM. Every other traceback is printed as before."""

import sys
import traceback

from pyspark import daemon

CANCELLED = (BrokenPipeError, ConnectionResetError)
_print_exc = traceback.print_exc


def print_exc(*args, **kwargs) -> None:
    if isinstance(sys.exc_info()[1], CANCELLED):
        return
    _print_exc(*args, **kwargs)


if __name__ == "__main__":
    traceback.print_exc = print_exc  # daemon.manager's forked workers call traceback.print_exc
    daemon.manager()
