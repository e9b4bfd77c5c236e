"""Closures that Spark ships to executors must reach numba kernels through their module.

cloudpickle pickles a nested function by value, with every global it names. A numba dispatcher named
bare in it is rebuilt in each Python worker as a new dispatcher, which compiles again (Shares' cell
join paid 6.5 s per cell for that) instead of using the module's warm, cached one."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import types

from numba import njit
from numba.core.registry import CPUDispatcher

import implementations

COMPREHENSIONS = ("<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>")


def _nested_code(code: types.CodeType, depth: int = 1):
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield const, depth
            yield from _nested_code(const, depth + 1)


def bare_kernels_in_closures(module) -> list[tuple[str, str, str]]:
    """(outer function, nested code, kernel name) for every nested function of `module` that names one
    of the module's numba dispatchers as a bare global. A comprehension directly in a module-level
    function runs there, so it is not a closure (a lambda is)."""
    found = []
    for name, obj in vars(module).items():
        functions = []
        if inspect.isfunction(obj) and obj.__module__ == module.__name__:
            functions.append((name, obj.__code__))
        elif inspect.isclass(obj) and obj.__module__ == module.__name__:
            functions += [(f"{name}.{k}", v.__code__) for k, v in vars(obj).items() if inspect.isfunction(v)]
        for outer, code in functions:
            for inner, depth in _nested_code(code):
                if depth == 1 and inner.co_name in COMPREHENSIONS:
                    continue
                for used in inner.co_names:
                    if isinstance(getattr(module, used, None), CPUDispatcher):
                        found.append((outer, inner.co_name, used))
    return found


@njit(cache=False)
def _kernel(x):
    return x + 1


def _ships_a_bare_kernel():
    def task(iterator):
        for x in iterator:
            yield _kernel(x)

    return task


def _ships_a_bare_kernel_in_a_lambda():
    return lambda x: _kernel(x)


def _runs_a_kernel_here(xs):
    return [_kernel(x) for x in xs]


def test_the_scan_finds_a_bare_kernel_in_a_closure():
    import sys

    assert bare_kernels_in_closures(sys.modules[__name__]) == [
        ("_ships_a_bare_kernel", "task", "_kernel"),
        ("_ships_a_bare_kernel_in_a_lambda", "<lambda>", "_kernel"),
    ]


def test_no_implementation_closure_names_a_kernel_bare():
    modules = [importlib.import_module(f"implementations.{m.name}") for m in pkgutil.iter_modules(implementations.__path__)]
    assert len(modules) > 10
    assert [(m.__name__, *hit) for m in modules for hit in bare_kernels_in_closures(m)] == []
