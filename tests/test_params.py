"""Declared parameters: implementations list what they read from a run's params; the harness checks a
run's params against the declarations (before Spark starts) and the CLI's flags come from them."""

import pytest

import implementations
from harness import cli
from harness.bench.runner import RUN_PARAMS, Runner, RunRequest, split_params
from harness.core.errors import DataError
from harness.core.params import Param, resolve

BATCH = Param("batch", int, 7, "proposals")
RATIO = Param("ratio", float, 0.5, "a share")


def test_resolve_gives_typed_values_and_defaults():
    assert resolve((BATCH, RATIO), {}, "toy") == {"batch": 7, "ratio": 0.5}
    assert resolve((BATCH, RATIO), {"batch": 3, "ratio": 1}, "toy") == {"batch": 3, "ratio": 1.0}
    assert resolve((BATCH,), {"batch": None}, "toy") == {"batch": 7}  # YAML null: the default


@pytest.mark.parametrize(
    "given,message",
    [
        ({"bacth": 3}, r"params.bacth: unknown parameter for toy \(it reads: batch, ratio\)"),
        ({"batch": "3"}, r"params.batch: toy expects int, got '3'"),
        ({"batch": True}, r"params.batch: toy expects int, got True"),
        ({"ratio": "x"}, r"params.ratio: toy expects float, got 'x'"),
    ],
)
def test_resolve_rejects_unknown_keys_and_wrong_types_naming_the_key(given, message):
    with pytest.raises(DataError, match=message):
        resolve((BATCH, RATIO), given, "toy")


@pytest.mark.parametrize("name", sorted(implementations.REGISTRY))
def test_every_declaration_is_well_formed(name):
    cls = implementations.REGISTRY[name]
    names = [p.name for p in cls.params]
    assert len(names) == len(set(names)) and not set(names) & {p.name for p in RUN_PARAMS}
    for p in cls.params:
        assert isinstance(p, Param) and p.help and p.type in (int, float, str, bool)
        assert p.default is None or isinstance(p.default, p.type)


def test_split_params_separates_the_harness_keys_from_the_implementation_keys():
    delta = implementations.get("delta-bigjoin")
    run, own = split_params(delta, {"updates": "holdback=0.1", "changes": 5, "batch": 100})
    assert run == {"updates": "holdback=0.1", "recompute": None, "memory_per_worker": None, "census_method": None} | {
        "output": None,
        "limit": None,
    }
    assert own == {"changes": 5, "batch": 100}


def test_an_undeclared_parameter_is_DAT_before_spark_starts():
    runner = Runner()
    record = runner.run(RunRequest("triangle", "rmat-small", "binary", params={"batch": 5}))
    assert record.status == "DAT" and record.error == "params.batch: unknown parameter for binary (it reads: none)"
    record = runner.run(RunRequest("triangle", "rmat-small", "bigjoin", params={"batch": "big"}))
    assert record.status == "DAT" and record.error == "params.batch: bigjoin expects int, got 'big'"
    assert runner._spark is None


def test_the_run_flags_and_their_help_come_from_the_declarations(capsys):
    with pytest.raises(SystemExit):
        cli.main(["run", "--help"])
    out = " ".join(capsys.readouterr().out.split()).replace("- ", "-")  # argparse wraps lines after hyphens too
    for cls in implementations.REGISTRY.values():
        for p in cls.params:
            assert p.flag in out and " ".join(p.help.split()).replace("- ", "-") in out
    assert "(bigjoin, bigjoin-carry, bigjoin-s, delta-bigjoin)" in out  # the readers of --batch, one flag


def test_the_harness_names_no_implementation_class():
    """harness/ reaches implementations through the registry (implementations.get, REGISTRY, kernels_of) and the
    plug-in interface (RunContext, WorkerCap, Param): it never names one implementation's class. (spark.py's
    warm-up imports the shared kernels' modules, not an implementation.)"""
    import ast
    from pathlib import Path

    interface = {"REGISTRY", "RunContext", "WorkerCap", "get", "kernels_of", "Param", "Implementation", "Outcome", "BatchOutcome"}
    classes = {cls.__name__ for cls in implementations.REGISTRY.values()}
    for path in sorted((Path(__file__).parent.parent / "harness").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "implementations":
                assert {a.name for a in node.names} <= interface, f"{path.name} imports {[a.name for a in node.names]}"
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("implementations."):
                assert not {a.name for a in node.names} & classes, f"{path.name} imports a class from {node.module}"
            if isinstance(node, (ast.Name, ast.Attribute)):
                assert getattr(node, "id", getattr(node, "attr", None)) not in classes, f"{path.name} names a class"
