"""Subgraph queries: conjunctive queries over the edge relation, parsing, validation, and the
join specification (semantics, symmetry-breaking order constraints, attribute order) that every
implementation and oracle receives."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

from harness.core.errors import DataError

SEMANTICS = ("undirected", "directed")


@dataclass(frozen=True)
class Query:
    """Q(a...) := edge(x1, y1), ..., edge(xn, yn). Attributes keep their first-appearance order."""

    name: str
    edges: tuple[tuple[str, str], ...]
    attributes: tuple[str, ...] = field(default=())
    # Pairs that must NOT be edges in a match (`!a-c`); `induced` makes every non-edge pair one
    # (`anti_pairs` gives the effective list under a semantics).
    anti_edges: tuple[tuple[str, str], ...] = ()
    induced: bool = False
    # (attribute, label): a match's value for the attribute must carry that vertex label.
    labels: tuple[tuple[str, int], ...] = ()

    def __post_init__(self):
        if not self.attributes:
            seen: dict[str, None] = {}
            for x, y in self.edges + self.anti_edges:
                seen.setdefault(x)
                seen.setdefault(y)
            object.__setattr__(self, "attributes", tuple(seen))

    def describe(self) -> str:
        atoms = [f"e({x},{y})" for x, y in self.edges] + [f"!e({x},{y})" for x, y in self.anti_edges]
        labels = " labels " + ",".join(f"{a}:{label}" for a, label in self.labels) if self.labels else ""
        return ",".join(atoms) + (" induced" if self.induced else "") + labels

    @property
    def label_of(self) -> dict[str, int]:
        """The label each labelled attribute requires."""
        return dict(self.labels)

    @property
    def has_anti(self) -> bool:
        """True if some pair of attributes must not be joined by an edge (anti-edges or induced)."""
        return bool(self.anti_edges) or self.induced


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
_VERTEX = rf"({_ATTR})(?:\s*:\s*(\d+))?"  # an attribute, with the vertex label it requires
_DASH_EDGE = re.compile(rf"^\s*(!?)\s*{_VERTEX}\s*-\s*{_VERTEX}\s*$")
_ATOM_EDGE = re.compile(rf"^\s*(!?)\s*(?:e|edge)\s*\(\s*{_VERTEX}\s*,\s*{_VERTEX}\s*\)\s*$")


def _add_labels(labels: dict[str, int], m: re.Match, where: str) -> None:
    """The labels an atom's `a:1` vertices require, into `labels`; one attribute, one label."""
    for name, label in ((m.group(2), m.group(3)), (m.group(4), m.group(5))):
        if label is None:
            continue
        if labels.setdefault(name, int(label)) != int(label):
            raise DataError(f"{where}: vertex {name} requires two labels ({labels[name]} and {label})")


def parse_pattern_string(text: str, name: str | None = None) -> Query:
    """`a-b,b-c,a-c` or the paper's `e(a1,a2),e(a1,a3),e(a2,a3)`; `!a-c` / `!e(a,c)` is an anti-edge."""
    body = text.split(":=", 1)[1] if ":=" in text else text
    atoms = re.findall(r"!?\s*(?:e|edge)\s*\([^)]*\)", body)
    parts = atoms if atoms else [p for p in body.split(",") if p.strip()]
    edges: list[tuple[str, str]] = []
    anti: list[tuple[str, str]] = []
    labels: dict[str, int] = {}
    for part in parts:
        m = _ATOM_EDGE.match(part) or _DASH_EDGE.match(part)
        if not m:
            raise DataError(f"query '{text}': cannot parse edge '{part.strip()}' (expected 'a-b', 'e(a,b)', '!a-b' or 'a:1-b')")
        (anti if m.group(1) else edges).append((m.group(2), m.group(4)))
        _add_labels(labels, m, f"query '{text}'")
    if not edges:
        raise DataError(f"query '{text}': no edges")
    if name is None and ":=" in text:
        name = text.split(":=", 1)[0].strip() or None
    query = Query(name or text.replace(" ", ""), tuple(edges), anti_edges=tuple(anti))
    return replace(query, labels=_in_attribute_order(query, labels))


def _in_attribute_order(query: Query, labels: dict[str, int]) -> tuple[tuple[str, int], ...]:
    return tuple(
        sorted(
            labels.items(),
            key=lambda item: query.attributes.index(item[0]) if item[0] in query.attributes else len(query.attributes),
        )
    )


_QUERY_KEYS = {"name", "edges", "anti_edges", "induced", "labels", "allow_repeated_edges", "description"}


def _pairs_from_yaml(raw: object, key: str, where: str) -> list[tuple[str, str]]:
    """`[[a, b], 'c-d', ...]` as (a, b) pairs; a `!` prefix is not allowed here (the key says which)."""
    if not isinstance(raw, list) or not raw:
        raise DataError(f"{where}: key '{key}' must be a non-empty list of [a, b] or 'a-b'")
    pairs = []
    for i, item in enumerate(raw):
        m = _DASH_EDGE.match(item) if isinstance(item, str) else None
        if m and not m.group(1) and m.group(3) is None and m.group(5) is None:
            pairs.append((m.group(2), m.group(4)))
        elif isinstance(item, list) and len(item) == 2 and all(isinstance(v, str) and re.fullmatch(_ATTR, v) for v in item):
            pairs.append((item[0], item[1]))
        else:
            raise DataError(f"{where}: key '{key}[{i}]' must be [a, b] or 'a-b', got {item!r}")
    return pairs


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
        query = Query(str(name or "custom"), tuple(_pairs_from_yaml(raw, "edges", where)))
    else:
        raise DataError(f"{where}: key 'edges' must be a non-empty list or a pattern string")
    for k in ("allow_repeated_edges", "induced"):
        if k in data and not isinstance(data[k], bool):
            raise DataError(f"{where}: key '{k}' must be true or false")
    anti = query.anti_edges + tuple(_pairs_from_yaml(data["anti_edges"], "anti_edges", where) if "anti_edges" in data else ())
    if anti or data.get("induced"):
        query = Query(query.name, query.edges, anti_edges=anti, induced=bool(data.get("induced")), labels=query.labels)
    if "labels" in data:
        query = replace(query, labels=_labels_from_yaml(query, data["labels"], where))
    options = {k: bool(data[k]) for k in ("allow_repeated_edges",) if k in data}
    return query, options


def _labels_from_yaml(query: Query, raw: object, where: str) -> tuple[tuple[str, int], ...]:
    """`labels: {a: 1, b: 2}`: each key a pattern vertex, each value a non-negative integer."""
    if not isinstance(raw, dict) or not raw:
        raise DataError(f"{where}: key 'labels' must be a mapping of pattern vertex to label, e.g. {{a: 1}}")
    labels = query.label_of
    for name, label in raw.items():
        if name not in query.attributes:
            raise DataError(
                f"{where}: key 'labels.{name}': {name} is not a vertex of the pattern ({', '.join(query.attributes)})"
            )
        if isinstance(label, bool) or not isinstance(label, int) or label < 0:
            raise DataError(f"{where}: key 'labels.{name}' must be a non-negative integer label, got {label!r}")
        if labels.setdefault(name, label) != label:
            raise DataError(f"{where}: key 'labels.{name}': {name} requires two labels ({labels[name]} and {label})")
    return _in_attribute_order(query, labels)


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


def anti_pairs(query: Query, semantics: str) -> tuple[tuple[str, str], ...]:
    """The pairs a match must not join by an edge: the anti-edges, and with `induced` every pair that
    is not an edge. Undirected: unordered pairs, each once, in attribute order (the pair has no edge in
    either direction); directed: ordered pairs (no edge x -> y)."""
    rank = {a: i for i, a in enumerate(query.attributes)}
    if semantics == "directed":
        edges = set(query.edges)
        listed = list(query.anti_edges)
        if query.induced:
            listed += [(x, y) for x in query.attributes for y in query.attributes if x != y and (x, y) not in edges]
        return tuple(dict.fromkeys(listed))
    listed = [(x, y) if rank[x] < rank[y] else (y, x) for x, y in query.anti_edges]
    if query.induced:
        positive = undirected_edges(query)
        listed += [p for p in itertools.combinations(query.attributes, 2) if frozenset(p) not in positive]
    return tuple(dict.fromkeys(listed))


def _validate_anti_edges(query: Query, semantics: str) -> None:
    positive = undirected_edges(query) if semantics == "undirected" else set(query.edges)
    seen: set = set()
    for x, y in query.anti_edges:
        key = frozenset((x, y)) if semantics == "undirected" else (x, y)
        if x == y and semantics == "undirected":
            raise DataError(f"query {query.name}: anti-edge !{x}-{y} is a self-loop, which a simple undirected graph never has")
        if key in positive:
            raise DataError(f"query {query.name}: {x}-{y} is both an edge and an anti-edge")
        if key in seen:
            raise DataError(f"query {query.name}: repeated anti-edge !{x}-{y}")
        seen.add(key)


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
    _validate_anti_edges(query, semantics)
    if not is_connected(query):
        parts = " and ".join("{" + ",".join(p) + "}" for p in components(query))
        joined = " (anti-edges do not connect a pattern)" if query.anti_edges else ""
        raise DataError(
            f"query {query.name}: pattern is disconnected ({parts}){joined}; no implementation counts a "
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
    """All permutations of the attributes that map the undirected edge set onto itself, and the
    undirected anti-edges onto themselves, and keep every vertex label."""
    attrs = query.attributes
    adj = adjacency(query)
    edges = undirected_edges(query)
    anti = {frozenset(p) for p in anti_pairs(query, "undirected")}
    label = query.label_of
    result: list[dict[str, str]] = []

    def fits(a: str, b: str, mapping: dict[str, str]) -> bool:
        """a -> b keeps a's label, and every edge and anti-edge to the attributes mapped so far."""
        return label.get(a) == label.get(b) and all(
            (frozenset((b, mapping[n])) in edges) == (n in adj[a])
            and (frozenset((b, mapping[n])) in anti) == (frozenset((a, n)) in anti)
            for n in mapping
        )

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
            if fits(a, b, mapping):
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
    `anti` (both): the pairs (x, y) with no edge between their values (`anti_pairs`); in directed
    semantics no edge x -> y.
    """

    query: Query
    semantics: str
    attribute_order: tuple[str, ...]
    less_than: tuple[tuple[str, str], ...] = ()
    distinct: tuple[tuple[str, str], ...] = ()
    anti: tuple[tuple[str, str], ...] = ()

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
        edges = tuple(sorted(tuple(sorted((value[x], value[y]))) for x, y in self.query.edges))
        # Matches on the same edges are distinct instances when their anti-edges or labelled vertices differ.
        if self.anti:
            edges += (tuple(sorted(tuple(sorted((value[x], value[y]))) for x, y in self.anti)),)
        if self.query.labels:
            edges += (tuple(sorted((value[a], label) for a, label in self.query.labels)),)
        return edges


def make_join_spec(query: Query, semantics: str, attribute_order: tuple[str, ...] | None = None, **validate_options) -> JoinSpec:
    validate(query, semantics, **validate_options)
    order = tuple(attribute_order) if attribute_order else default_attribute_order(query)
    if sorted(order) != sorted(query.attributes):
        raise DataError(f"attribute order {order} must be a permutation of {query.attributes}")
    adj = adjacency(query)
    for i, a in enumerate(order[1:], start=1):
        if not adj[a] & set(order[:i]):
            raise DataError(f"attribute order {','.join(order)}: {a} is not adjacent to any earlier attribute")
    anti = anti_pairs(query, semantics)
    if semantics == "directed":
        return JoinSpec(query, semantics, order, anti=anti)
    less = tuple(symmetry_breaking(query))
    spec = JoinSpec(query, semantics, order, less)
    distinct = tuple(
        (x, y)
        for x, y in itertools.combinations(query.attributes, 2)
        if y not in adj[x] and not spec.implies_less(x, y) and not spec.implies_less(y, x)
    )
    return JoinSpec(query, semantics, order, less, distinct, anti)
