"""The folders are the layers (docs/layout.md): a module imports only from its own package and from
the layers below it, at the top of a file or inside a function alike. Read from the code's own
imports, so a new import that breaks the order fails here."""

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# Bottom to top. Packages on one rank are siblings: neither imports the other.
LAYERS = (
    ("harness.core",),
    ("harness.data",),
    ("harness.verify", "implementations.gj"),
    ("implementations.indices",),
    ("implementations.extension",),
    ("implementations",),  # the variants, their registry and the warm-up
    ("harness.spark",),
    ("harness.bench",),
    ("harness",),  # the files of the top folder: the command line (cli, dataset_cli, __main__)
)
NEVER = (("implementations", "harness.verify", "the oracles share no code with the implementations, either way"),)
RANK = {package: rank for rank, packages in enumerate(LAYERS) for package in packages}


def _modules() -> dict[str, Path]:
    found = {}
    for top in ("harness", "implementations"):
        for path in sorted((REPO / top).rglob("*.py")):
            parts = path.relative_to(REPO).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = _modules()


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(f"{package}.")


def layer_of(module: str) -> str:
    """The longest package of LAYERS that holds `module`."""
    holders = [p for p in RANK if _within(module, p)]
    if not holders:
        raise AssertionError(f"{module} is in no layer: add its package to LAYERS")
    return max(holders, key=len)


def imported(module: str, path: Path) -> set[str]:
    """The project's modules that `module` imports anywhere in its file (relative imports resolved)."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            origin = (
                ".".join(package[: len(package) - node.level + 1] + [node.module or ""]).strip(".") if node.level else node.module
            )
            for alias in node.names:
                names.add(f"{origin}.{alias.name}" if f"{origin}.{alias.name}" in MODULES else str(origin))
    return {name for name in names if name in MODULES}


def _breaks(module: str, target: str) -> str | None:
    source, goal = layer_of(module), layer_of(target)
    for low, high, why in NEVER:
        if _within(module, low) and _within(target, high):
            return why
    if source == goal or RANK[goal] < RANK[source]:
        return None
    return f"{source} (rank {RANK[source]}) may not import {goal} (rank {RANK[goal]})"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_a_module_imports_only_its_own_package_and_the_layers_below(module):
    broken = {target: why for target in imported(module, MODULES[module]) if (why := _breaks(module, target))}
    assert not broken, f"{module}: {broken}"


def test_the_check_sees_a_breach():
    """The rule itself: the store may not call up to the runner, nor an index to a variant, nor a
    variant to an oracle; a variant may use the plan, and the command line anything."""
    assert _breaks("harness.core.store", "harness.bench.runner")
    assert _breaks("implementations.indices.distributed_index", "implementations.bigjoin")
    assert _breaks("implementations.bigjoin", "harness.verify.oracles.sql")
    assert _breaks("harness.verify.check", "implementations.gj.plan")
    assert not _breaks("implementations.bigjoin", "implementations.gj.plan")
    assert not _breaks("harness.cli", "harness.bench.runner")
    assert "harness.core.query" in imported("implementations.gj.plan", MODULES["implementations.gj.plan"])
