"""PySpark's Python worker daemon, run as `python -m harness.spark.daemon` on this machine's executors
(the session's `spark.python.daemon.module`): every kernel is compiled or loaded first (implementations.warm),
so each worker it forks starts warm, even one that replaces a worker killed with a cancelled task; and
workers print no tracebacks for cancelled tasks. On a host that does not see the session's store probe
it compiles nothing: the session's first job reports that host and the session ends (harness.spark.session).

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
    import os

    from harness.core.store import PROBE_SETTING
    from implementations.warm import freeze_what_warming_left, warm_up

    probe = os.environ.get(PROBE_SETTING)  # set on a cluster
    if probe is None or os.path.exists(probe):  # else this host does not see the store: its cache would not be shared
        warm_up()  # before any fork; nothing on stdout, where the daemon reports its port
    freeze_what_warming_left()
    traceback.print_exc = print_exc  # daemon.manager's forked workers call traceback.print_exc
    daemon.manager()
