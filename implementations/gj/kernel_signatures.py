"""How many numba kernel signatures this process has compiled or loaded: a timed stage that sees the
number grow paid for a compilation (`kernels_compiled`). A module of its own, below the dataflows
that count with it and the warm-up (`warm`) that runs them."""

from __future__ import annotations

import sys

_dispatchers: dict[str, list] = {}  # per module of the project's, found once it is imported
_modules_seen = 0  # len(sys.modules) when _dispatchers was last brought up to date


def dispatchers() -> list:
    """The project's numba kernels in every module imported so far (each module read once)."""
    from numba.core.registry import CPUDispatcher

    global _modules_seen
    if len(sys.modules) != _modules_seen:  # a module was imported since: look for new kernels
        _modules_seen = len(sys.modules)
        for name, module in list(sys.modules.items()):
            if name.startswith("implementations.") and module is not None and name not in _dispatchers:
                _dispatchers[name] = [v for v in vars(module).values() if isinstance(v, CPUDispatcher)]
    return [d for found in _dispatchers.values() for d in found]


def signatures() -> int:
    """Kernel signatures this process has compiled or loaded so far, over the project's numba
    kernels: a timed stage that sees this grow paid for a compilation (`kernels_compiled`)."""
    return sum(len(d.overloads) for d in dispatchers())  # not .signatures: it hashes every type
