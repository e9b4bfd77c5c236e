"""Subgraph queries: conjunctive queries over the edge relation, parsing, validation, and the
join specification (semantics, symmetry-breaking order constraints, attribute order) that every
implementation and oracle receives."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .errors import DataError

SEMANTICS = ("undirected", "directed")


@dataclass(frozen=True)
class Query:
    """Q(a...) := edge(x1, y1), ..., edge(xn, yn). Attributes keep their first-appearance order."""

    name: str
    edges: tuple[tuple[str, str], ...]
    attributes: tuple[str, ...] = field(default=())

    def __post_init__(self):
        if not self.attributes:
            seen: dict[str, None] = {}
            for x, y in self.edges:
                seen.setdefault(x)
                seen.setdefault(y)
            object.__setattr__(self, "attributes", tuple(seen))

    def describe(self) -> str:
        return ",".join(f"e({x},{y})" for x, y in self.edges)


def _clique(k: int) -> tuple[tuple[str, str], ...]:
    return tuple((f"a{i}", f"a{j}") for i in range(1, k + 1) for j in range(i + 1, k + 1))


BUILTINS: dict[str, Query] = {
    "triangle": Query("triangle", _clique(3)),
    "clique4": Query("clique4", _clique(4)),
    "diamond": Query("diamond", (("a1", "a2"), ("a2", "a3"), ("a4", "a1"), ("a4", "a3"))),
    "house": Query("house", _clique(4) + (("a2", "a5"), ("a3", "a5"))),
    "clique5": Query("clique5", _clique(5)),
}

_ATTR = r"[A-Za-z_][A-Za-z0-9_]*"
_DASH_EDGE = re.compile(rf"^\s*({_ATTR})\s*-\s*({_ATTR})\s*$")
_ATOM_EDGE = re.compile(rf"^\s*(?:e|edge)\s*\(\s*({_ATTR})\s*,\s*({_ATTR})\s*\)\s*$")


def parse_pattern_string(text: str, name: str | None = None) -> Query:
    """`a-b,b-c,a-c` or the paper's `e(a1,a2),e(a1,a3),e(a2,a3)`."""
    body = text.split(":=", 1)[1] if ":=" in text else text
    atoms = re.findall(r"(?:e|edge)\s*\([^)]*\)", body)
    parts = atoms if atoms else [p for p in body.split(",") if p.strip()]
    edges = []
    for part in parts:
        m = _ATOM_EDGE.match(part) or _DASH_EDGE.match(part)
        if not m:
            raise DataError(f"query '{text}': cannot parse edge '{part.strip()}' (expected 'a-b' or 'e(a,b)')")
        edges.append((m.group(1), m.group(2)))
    if not edges:
        raise DataError(f"query '{text}': no edges")
    if name is None and ":=" in text:
        name = text.split(":=", 1)[0].strip() or None
    return Query(name or text.replace(" ", ""), tuple(edges))


_QUERY_KEYS = {"name", "edges", "allow_repeated_edges", "description"}


def query_from_mapping(data: object, where: str) -> tuple[Query, dict]:
    """A query given as YAML data: {name, edges: [[a, b], ...] or "a-b,...", allow_*}."""
    if not isinstance(data, dict):
        raise DataError(f"{where}: a query must be a mapping with key 'edges'")
    if "allow_disconnected" in data:
        raise DataError(
            f"{where}: key 'allow_disconnected' is not supported: no implementation counts a disconnected "
            "pattern (count each connected part as a query of its own)"
        )
    unknown = set(data) - _QUERY_KEYS
    if unknown:
        raise DataError(f"{where}: unknown key '{sorted(unknown)[0]}' (allowed: {', '.join(sorted(_QUERY_KEYS))})")
    if "edges" not in data:
        raise DataError(f"{where}: missing key 'edges'")
    raw = data["edges"]
    name = data.get("name")
    if isinstance(raw, str):
        query = parse_pattern_string(raw, name)
    elif isinstance(raw, list) and raw:
        edges = []
        for i, item in enumerate(raw):
            if isinstance(item, str) and _DASH_EDGE.match(item):
                m = _DASH_EDGE.match(item)
                assert m is not None
                edges.append((m.group(1), m.group(2)))
            elif isinstance(item, list) and len(item) == 2 and all(isinstance(v, str) and re.fullmatch(_ATTR, v) for v in item):
                edges.append((item[0], item[1]))
            else:
                raise DataError(f"{where}: key 'edges[{i}]' must be [a, b] or 'a-b', got {item!r}")
        query = Query(str(name or "custom"), tuple(edges))
    else:
        raise DataError(f"{where}: key 'edges' must be a non-empty list or a pattern string")
    options = {k: bool(data[k]) for k in ("allow_repeated_edges",) if k in data}
    for k in options:
        if not isinstance(data[k], bool):
            raise DataError(f"{where}: key '{k}' must be true or false")
    return query, options


def load_query(spec: str | dict | Query) -> tuple[Query, dict]:
    """Resolve a built-in name, a pattern string, a YAML file path or an inline mapping."""
    if isinstance(spec, Query):
        return spec, {}
    if isinstance(spec, dict):
        return query_from_mapping(spec, "query")
    if spec in BUILTINS:
        return BUILTINS[spec], {}
    path = Path(spec)
    if spec.endswith((".yaml", ".yml")) or path.is_file():
        if not path.is_file():
            raise DataError(f"query file {spec}: not found")
        try:
            data = yaml.safe_load(path.read_text())
        except yaml.YAMLError as exc:
            line = getattr(getattr(exc, "problem_mark", None), "line", None)
            at = f":{line + 1}" if line is not None else ""
            raise DataError(f"{spec}{at}: invalid YAML ({getattr(exc, 'problem', exc)})") from None
        return query_from_mapping(data, str(spec))
    if "-" in spec or "(" in spec:
        return parse_pattern_string(spec), {}
    raise DataError(f"unknown query '{spec}' (built-ins: {', '.join(BUILTINS)}; or a pattern like 'a-b,b-c,a-c', or a YAML path)")


# ---------------------------------------------------------------- validation and structure


def undirected_edges(query: Query) -> set[frozenset[str]]:
    return {frozenset(e) for e in query.edges if e[0] != e[1]}


def validate(query: Query, semantics: str, allow_repeated_edges: bool = False) -> None:
    if semantics not in SEMANTICS:
        raise DataError(f"unknown semantics '{semantics}' (expected one of {', '.join(SEMANTICS)})")
    seen: set = set()
    for x, y in query.edges:
        key = frozenset((x, y)) if semantics == "undirected" else (x, y)
        if key in seen and not allow_repeated_edges:
            raise DataError(
                f"query {query.name}: repeated edge {x}-{y}"
                + (" (in undirected semantics a-b and b-a are the same edge)" if semantics == "undirected" else "")
            )
        seen.add(key)
        if x == y and semantics == "undirected":
            raise DataError(f"query {query.name}: self-loop {x}-{y} can never match a simple undirected graph")
    if not is_connected(query):
        parts = " and ".join("{" + ",".join(p) + "}" for p in components(query))
        raise DataError(
            f"query {query.name}: pattern is disconnected ({parts}); no implementation counts a "
            "disconnected pattern: count each connected part as a query of its own"
        )


def components(query: Query) -> list[list[str]]:
    """The connected parts of the pattern, each in attribute order."""
    adj = adjacency(query)
    parts: list[list[str]] = []
    for start in query.attributes:
        if any(start in p for p in parts):
            continue
        seen, stack = {start}, [start]
        while stack:
            for n in adj[stack.pop()]:
                if n not in seen:
                    seen.add(n)
                    stack.append(n)
        parts.append([a for a in query.attributes if a in seen])
    return parts


def is_connected(query: Query) -> bool:
    return len(components(query)) == 1


def adjacency(query: Query) -> dict[str, set[str]]:
    adj: dict[str, set[str]] = {a: set() for a in query.attributes}
    for x, y in query.edges:
        if x != y:
            adj[x].add(y)
            adj[y].add(x)
    return adj


def automorphisms(query: Query) -> list[dict[str, str]]:
    """All permutations of the attributes that map the undirected edge set onto itself."""
    attrs = query.attributes
    adj = adjacency(query)
    edges = undirected_edges(query)
    result: list[dict[str, str]] = []

    def extend(mapping: dict[str, str], used: set[str]) -> None:
        i = len(mapping)
        if i == len(attrs):
            if all(frozenset((mapping[x], mapping[y])) in edges for x, y in map(tuple, edges)):
                result.append(dict(mapping))
            return
        a = attrs[i]
        for b in attrs:
            if b in used or len(adj[a]) != len(adj[b]):
                continue
            if all((frozenset((b, mapping[n])) in edges) == (n in adj[a]) for n in mapping):
                mapping[a] = b
                used.add(b)
                extend(mapping, used)
                del mapping[a]
                used.discard(b)

    extend({}, set())
    return result


def symmetry_breaking(query: Query) -> list[tuple[str, str]]:
    """Order constraints x < y such that exactly one injective match per subgraph instance satisfies
    them (Grochow & Kellis): fix the attribute with the largest orbit, require it to be the smallest
    of its orbit, restrict to its stabiliser, repeat until the group is trivial."""
    group = automorphisms(query)
    constraints: list[tuple[str, str]] = []
    while len(group) > 1:
        orbits = {a: sorted({g[a] for g in group}, key=query.attributes.index) for a in query.attributes}
        pivot = max(query.attributes, key=lambda a: (len(orbits[a]), -query.attributes.index(a)))
        constraints.extend((pivot, other) for other in orbits[pivot] if other != pivot)
        group = [g for g in group if g[pivot] == pivot]
    return constraints


def default_attribute_order(query: Query, start: tuple[str, ...] = ()) -> tuple[str, ...]:
    """Greedy: start from `start` (default: the first attribute), then repeatedly take the attribute
    with the most edges into the chosen prefix (ties: declaration order). The first two are always
    adjacent when `start` is one attribute or an edge."""
    adj = adjacency(query)
    order = list(start or query.attributes[:1])
    rest = [a for a in query.attributes if a not in order]
    while rest:
        best = max(rest, key=lambda a: (len(adj[a] & set(order)), -rest.index(a)))
        order.append(best)
        rest.remove(best)
    return tuple(order)


def in_query_order(query: Query, order: Sequence[str], rows: Iterable[Sequence]) -> list[tuple[int, ...]]:
    """Matches given as rows in attribute order `order`, as tuples in the query's attribute order."""
    where = [list(order).index(a) for a in query.attributes]
    return [tuple(int(row[i]) for i in where) for row in rows]


@dataclass(frozen=True)
class JoinSpec:
    """What to compute: the query under a semantics, plus the filters that make the count exact.

    undirected: matches are injective maps into the simple graph; `less_than` breaks the pattern's
    symmetries so each subgraph instance is produced once; `distinct` lists the non-adjacent attribute
    pairs that still need an explicit inequality (adjacent ones differ because there are no loops).
    directed: the plain join over the distinct directed edge relation; no extra filters.
    """

    query: Query
    semantics: str
    attribute_order: tuple[str, ...]
    less_than: tuple[tuple[str, str], ...] = ()
    distinct: tuple[tuple[str, str], ...] = ()

    def implies_less(self, x: str, y: str) -> bool:
        """True if the constraints force x < y (transitively)."""
        frontier, seen = [x], {x}
        while frontier:
            a = frontier.pop()
            for lo, hi in self.less_than:
                if lo == a and hi not in seen:
                    if hi == y:
                        return True
                    seen.add(hi)
                    frontier.append(hi)
        return False

    def instance_key(self, match: tuple) -> tuple:
        """Identity of a result: the subgraph (its edge set) for undirected, the tuple for directed."""
        if self.semantics == "directed":
            return tuple(match)
        value = dict(zip(self.query.attributes, match))
        return tuple(sorted(tuple(sorted((value[x], value[y]))) for x, y in self.query.edges))


def make_join_spec(query: Query, semantics: str, attribute_order: tuple[str, ...] | None = None, **validate_options) -> JoinSpec:
    validate(query, semantics, **validate_options)
    order = tuple(attribute_order) if attribute_order else default_attribute_order(query)
    if sorted(order) != sorted(query.attributes):
        raise DataError(f"attribute order {order} must be a permutation of {query.attributes}")
    adj = adjacency(query)
    for i, a in enumerate(order[1:], start=1):
        if not adj[a] & set(order[:i]):
            raise DataError(f"attribute order {','.join(order)}: {a} is not adjacent to any earlier attribute")
    if semantics == "directed":
        return JoinSpec(query, semantics, order)
    less = tuple(symmetry_breaking(query))
    spec = JoinSpec(query, semantics, order, less)
    distinct = tuple(
        (x, y)
        for x, y in itertools.combinations(query.attributes, 2)
        if y not in adj[x] and not spec.implies_less(x, y) and not spec.implies_less(y, x)
    )
    return JoinSpec(query, semantics, order, less, distinct)
