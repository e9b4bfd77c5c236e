"""Workloads are data: a YAML file expands to datasets x queries x semantics x implementations x
parameters x trials. Schema errors name the file and the key."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from harness.bench.projection import ProjectionSpec, parse_spec
from harness.bench.runner import RunRequest
from harness.core import specs
from harness.core.errors import DataError
from harness.core.params import parse_size
from harness.core.query import SEMANTICS, query_from_mapping
from harness.data import updates
from harness.verify.check import ORACLE_CHOICES
from harness.verify.dynamic import DYNAMIC_ORACLES

WORKLOAD_DIR = Path(__file__).resolve().parents[2] / "workloads"

_LIST_KEYS = {"queries", "semantics", "datasets", "implementations", "workers"}
_SCALAR_KEYS = {
    "name",
    "description",
    "trials",
    "oracle",
    "timeout_s",
    "oracle_timeout_s",
    "params",
    "attribute_order",
    "updates",
    "time_threshold",
    "min_seconds",
    "allow_unverified",
    "expected_timeouts",
    "spark_floor",
    "expected_mem",
    "labels",
    "grow_with_workers",
    "fresh_executors",
    "projection",
}
_KEYS = _LIST_KEYS | _SCALAR_KEYS | {"tiers"}


@dataclass
class Workload:
    name: str
    path: Path
    description: str
    queries: list
    semantics: list[str]
    datasets: list[str]
    implementations: list[str]
    workers: list[int]
    trials: int = 1
    oracle: str = "auto"
    timeout_s: float | None = 600.0
    oracle_timeout_s: float = 600.0
    params: dict = field(default_factory=dict)
    attribute_order: list[str] | None = None
    tier: str = "default"
    time_threshold: float | None = None  # the regression gate's, for baselines of this workload
    min_seconds: float | None = None
    allow_unverified: bool = (
        False  # UNVERIFIED runs exit 0 (still labelled); never for the gate or a figure in README.md, docs/, results/README.md
    )
    # Implementations whose TIM is an expected result, each with its own timeout (None: timeout_s).
    expected_timeouts: dict[str, float | None] = field(default_factory=dict)
    spark_floor: bool = False  # time empty Spark jobs shaped like each run's query (Spark's floor)
    # Implementations whose MEM is an expected result: under every cap (key ANY_CAP), or under a cap of its own.
    expected_mem: dict[str, list[str]] = field(default_factory=dict)
    labels: str | None = None  # a vertex label file for every dataset (key `labels`, or bench --labels)
    # Weak scaling: datasets[i] runs at workers[i] only (the graph grows with W), not at every W.
    grow_with_workers: bool = False
    fresh_executors: bool = False  # under a cap, each run on new executors (a session of its own)
    projection: ProjectionSpec | None = None  # past this machine, from these runs (harness/bench/projection.py)

    def requests(self) -> list[RunRequest]:
        """Every run, datasets outermost so each graph is loaded once; under a swept memory cap, the
        implementations innermost, so that each cap's workers start once."""
        grid_keys = sorted(k for k, v in self.params.items() if isinstance(v, list))
        grids = [dict(zip(grid_keys, combo)) for combo in itertools.product(*(self.params[k] for k in grid_keys))]
        fixed = {k: v for k, v in self.params.items() if k not in grid_keys}
        out = []
        combos: Iterable[tuple[str, str, str, str, int, dict]] = itertools.product(
            self.datasets, self.semantics, self.queries, self.implementations, self.workers, grids or [{}]
        )
        # a weak-scaling series pairs datasets[i] with workers[i]; else every graph runs at every W
        pairs = list(
            zip(self.datasets, self.workers) if self.grow_with_workers else itertools.product(self.datasets, self.workers)
        )
        if self.grow_with_workers:
            combos = (
                (dataset, semantics, query, impl, workers, grid)
                for (dataset, workers), semantics, query, impl, grid in itertools.product(
                    pairs, self.semantics, self.queries, self.implementations, grids or [{}]
                )
            )
        if "memory_per_worker" in self.params:  # runs on the same capped workers (cap and W) together
            combos = (
                (dataset, semantics, query, impl, workers, grid)
                for (dataset, workers), semantics, query, grid, impl in itertools.product(
                    pairs, self.semantics, self.queries, grids or [{}], self.implementations
                )
            )
        for dataset, semantics, query, impl, workers, grid in combos:
            for trial in range(self.trials):
                out.append(
                    RunRequest(
                        query=query,
                        dataset=dataset,
                        impl=impl,
                        workers=workers,
                        semantics=semantics,
                        oracle=self.oracle,
                        timeout_s=self.expected_timeouts.get(impl) or self.timeout_s,
                        oracle_timeout_s=self.oracle_timeout_s,
                        params={**fixed, **grid},
                        attribute_order=tuple(self.attribute_order) if self.attribute_order else None,
                        workload=self.name,
                        trial=trial,
                        allow_unverified=self.allow_unverified,
                        timeout_expected=impl in self.expected_timeouts,
                        mem_expected=self.mem_expected(impl, {**fixed, **grid}),
                        spark_floor=self.spark_floor,
                        labels=self.labels,
                        series=WEAK_SCALING if self.grow_with_workers else None,
                        fresh_executors=self.fresh_executors,
                    )
                )
        return out

    def mem_expected(self, impl: str, params: dict) -> bool:
        """Whether the workload expects `impl` to end MEM under the run's cap (`params`)."""
        if impl in self.expected_mem.get(ANY_CAP, []):
            return True
        cap = params.get("memory_per_worker")
        return cap is not None and any(
            impl in names and parse_size(key) == parse_size(str(cap))
            for key, names in self.expected_mem.items()
            if key != ANY_CAP
        )

    def named_implementations(self) -> list[str]:
        """Every implementation an expectation names (a misspelt one would silently expect nothing)."""
        return [*self.expected_timeouts, *(name for names in self.expected_mem.values() for name in names)]


ANY_CAP = "*"
WEAK_SCALING = "the graph grown with W"  # the series a grow_with_workers workload's runs belong to


def resolve_path(name_or_path: str) -> Path:
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.is_file():
        if not path.is_file():
            raise DataError(f"workload file {path}: not found")
        return path
    candidate = WORKLOAD_DIR / f"{name_or_path}.yaml"
    if not candidate.is_file():
        known = ", ".join(sorted(p.stem for p in WORKLOAD_DIR.glob("*.yaml")))
        raise DataError(f"unknown workload '{name_or_path}' (known: {known})")
    return candidate


def load(name_or_path: str, tier: str | None = None) -> Workload:
    path = resolve_path(name_or_path)
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f":{mark.line + 1}" if mark is not None else ""
        raise DataError(f"{path}{at}: invalid YAML ({getattr(exc, 'problem', None) or exc})") from None
    if not isinstance(data, dict):
        raise DataError(f"{path}: a workload must be a mapping of keys")
    _check_keys(data, _KEYS, str(path))
    tiers = data.pop("tiers", {}) or {}
    if not isinstance(tiers, dict):
        raise DataError(f"{path}: key 'tiers' must map tier names to overrides")
    if tier and tier != "default":
        if tier not in tiers:
            raise DataError(f"{path}: no tier '{tier}' (tiers: {', '.join(['default', *tiers])})")
        override = tiers[tier]
        if not isinstance(override, dict):
            raise DataError(f"{path}: key 'tiers.{tier}' must be a mapping")
        _check_keys(override, _KEYS - {"tiers", "name"}, f"{path}: tiers.{tier}")
        data = {**data, **override}
    return _build(data, path, tier or "default")


def _check_keys(data: dict, allowed: set[str], where: str) -> None:
    for key in data:
        if key not in allowed:
            raise DataError(f"{where}: unknown key '{key}' (allowed: {', '.join(sorted(allowed))})")


def _as_list(data: dict, key: str, path: Path, item_type, required: bool = True) -> list:
    if key not in data:
        if required:
            raise DataError(f"{path}: missing key '{key}'")
        return []
    value = data[key]
    items = value if isinstance(value, list) else [value]
    if not items:
        raise DataError(f"{path}: key '{key}' must not be empty")
    for i, item in enumerate(items):
        if not isinstance(item, item_type) or isinstance(item, bool):
            kind = item_type.__name__ if isinstance(item_type, type) else " or ".join(t.__name__ for t in item_type)
            raise DataError(f"{path}: key '{key}[{i}]' must be a {kind}, got {item!r}")
    return items


def _number(data: dict, key: str, path: Path, default, positive: bool = True, integer: bool = False):
    if key not in data:
        return default
    value = data[key]
    if value is None and not integer:
        return None
    ok = isinstance(value, int) if integer else isinstance(value, (int, float))
    if not ok or isinstance(value, bool) or (positive and value <= 0):
        raise DataError(f"{path}: key '{key}' must be a positive {'integer' if integer else 'number'}, got {value!r}")
    return value


def _build(data: dict, path: Path, tier: str) -> Workload:
    queries = _as_list(data, "queries", path, (str, dict))
    for i, q in enumerate(queries):
        if isinstance(q, dict):
            query_from_mapping(q, f"{path}: queries[{i}]")
        elif q.endswith((".yaml", ".yml")) and not Path(q).is_absolute():
            queries[i] = str(path.parent / q)  # query files are relative to the workload
    semantics = _as_list(data, "semantics", path, str, required=False) or ["undirected"]
    for i, s in enumerate(semantics):
        if s not in SEMANTICS:
            raise DataError(f"{path}: key 'semantics[{i}]' must be one of {', '.join(SEMANTICS)}, got {s!r}")
    workers = _as_list(data, "workers", path, int, required=False) or [2]
    for i, w in enumerate(workers):
        if w < 1:
            raise DataError(f"{path}: key 'workers[{i}]' must be at least 1, got {w}")
    oracle = data.get("oracle", "auto")
    choices = ORACLE_CHOICES if "updates" not in data else DYNAMIC_ORACLES
    if oracle not in choices:
        raise DataError(f"{path}: key 'oracle' must be one of {', '.join(choices)}, got {oracle!r}")
    params = data.get("params", {}) or {}
    if not isinstance(params, dict):
        raise DataError(f"{path}: key 'params' must be a mapping")
    order = data.get("attribute_order")
    if order is not None and not (isinstance(order, list) and all(isinstance(a, str) for a in order)):
        raise DataError(f"{path}: key 'attribute_order' must be a list of attribute names")
    params = dict(params)
    if "updates" in data:  # update streams for dynamic implementations: specs, mappings or file paths
        streams = data["updates"] if isinstance(data["updates"], list) else [data["updates"]]
        texts = [
            _stream_text(spec, path, f"updates[{i}]" if isinstance(data["updates"], list) else "updates")
            for i, spec in enumerate(streams)
        ]
        params["updates"] = texts if isinstance(data["updates"], list) else texts[0]
    description = data.get("description", "")
    if not isinstance(description, str):
        raise DataError(f"{path}: key 'description' must be a string")
    allow_unverified = data.get("allow_unverified", False)
    if not isinstance(allow_unverified, bool):
        raise DataError(f"{path}: key 'allow_unverified' must be true or false, got {allow_unverified!r}")
    spark_floor = data.get("spark_floor", False)
    if not isinstance(spark_floor, bool):
        raise DataError(f"{path}: key 'spark_floor' must be true or false, got {spark_floor!r}")
    implementations = _as_list(data, "implementations", path, str)
    expected_timeouts = _expected_timeouts(data, path)
    datasets = _as_list(data, "datasets", path, str)
    grow = data.get("grow_with_workers", False)
    if not isinstance(grow, bool):
        raise DataError(f"{path}: key 'grow_with_workers' must be true or false, got {grow!r}")
    if grow and len(datasets) != len(workers):
        raise DataError(
            f"{path}: key 'grow_with_workers' pairs datasets[i] with workers[i]: {len(datasets)} datasets, {len(workers)} workers"
        )
    fresh = data.get("fresh_executors", False)
    if not isinstance(fresh, bool):
        raise DataError(f"{path}: key 'fresh_executors' must be true or false, got {fresh!r}")
    return Workload(
        name=str(data.get("name") or path.stem),
        path=path,
        description=description,
        queries=queries,
        semantics=semantics,
        datasets=datasets,
        implementations=implementations,
        workers=workers,
        trials=_number(data, "trials", path, 1, integer=True),
        oracle=oracle,
        timeout_s=_number(data, "timeout_s", path, 600.0),
        oracle_timeout_s=_number(data, "oracle_timeout_s", path, 600.0) or 600.0,
        params=params,
        attribute_order=order,
        tier=tier,
        time_threshold=_number(data, "time_threshold", path, None),
        min_seconds=_number(data, "min_seconds", path, None),
        allow_unverified=allow_unverified,
        expected_timeouts=expected_timeouts,
        spark_floor=spark_floor,
        expected_mem=_expected_mem(data, path),
        grow_with_workers=grow,
        fresh_executors=fresh,
        projection=parse_spec(data.get("projection"), str(path)),
        labels=_label_file(data, path),
    )


def _label_file(data: dict, path: Path) -> str | None:
    """`labels`: a vertex label file for the datasets (relative to the workload file), over the registry's."""
    value = data.get("labels")
    if value is None:
        return None
    if not isinstance(value, str):
        raise DataError(f"{path}: key 'labels' must be the path of a label file, got {value!r}")
    return str(path.parent / value)


def _expected_mem(data: dict, path: Path) -> dict[str, list[str]]:
    """`expected_mem`: a list of implementations (MEM expected under every cap), or a mapping from a cap
    (a size, as memory_per_worker gives it) to those expected to end MEM under it."""
    value = data.get("expected_mem")
    if not isinstance(value, dict):
        names = _as_list(data, "expected_mem", path, str, required=False)
        return {ANY_CAP: names} if names else {}
    out: dict[str, list[str]] = {}
    for cap, names in value.items():
        try:
            parse_size(str(cap))
        except DataError:
            raise DataError(f"{path}: key 'expected_mem.{cap}' must be a size such as 640m") from None
        key = f"expected_mem.{cap}"
        out[str(cap)] = _as_list({key: names}, key, path, str)
    return out


def _expected_timeouts(data: dict, path: Path) -> dict[str, float | None]:
    """`expected_timeouts`: a list of implementations (timed out at timeout_s), or a mapping from each to
    its own timeout in seconds. A tier may run none of them."""
    value = data.get("expected_timeouts")
    if not isinstance(value, dict):
        return dict.fromkeys(_as_list(data, "expected_timeouts", path, str, required=False))
    out: dict[str, float | None] = {}
    for impl, seconds in value.items():
        if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or seconds <= 0:
            raise DataError(f"{path}: key 'expected_timeouts.{impl}' must be a positive number of seconds, got {seconds!r}")
        out[str(impl)] = float(seconds)
    return out


def _stream_text(spec, path: Path, key: str) -> str:
    if isinstance(spec, str) and "=" not in spec:
        if not (path.parent / spec).is_file():
            raise DataError(f"{path}: key '{key}': update file {path.parent / spec} not found")
        return str(path.parent / spec)
    if isinstance(spec, (str, dict)):
        try:
            return specs.to_text(updates.parse_spec(spec))
        except DataError as exc:
            raise DataError(f"{path}: key '{key}': {exc}") from None
    raise DataError(f"{path}: key '{key}' must be a stream spec, a mapping or a file path")
