"""Query parsing, validation, automorphisms and symmetry breaking (no Spark)."""

import itertools
import math
import random

import pytest
from hypothesis import given, settings

from harness.errors import DataError
from harness.query import (
    BUILTINS,
    Query,
    automorphisms,
    load_query,
    make_join_spec,
    parse_pattern_string,
    symmetry_breaking,
)
from tests.strategies import connected_patterns


@pytest.mark.parametrize(
    "name,vertices,edges,aut",
    [
        ("triangle", 3, 3, 6),
        ("clique4", 4, 6, 24),
        ("diamond", 4, 4, 8),
        ("house", 5, 8, 4),
        ("clique5", 5, 10, 120),
    ],
)
def test_builtins_match_the_paper(name, vertices, edges, aut):
    q = BUILTINS[name]
    assert len(q.attributes) == vertices and len(q.edges) == edges
    assert len(automorphisms(q)) == aut


def test_pattern_string_forms_agree():
    dash = parse_pattern_string("a-b,b-c,a-c")
    atoms = parse_pattern_string("tri := e(a,b), e(b,c), e(a,c)")
    assert dash.edges == atoms.edges == (("a", "b"), ("b", "c"), ("a", "c"))
    assert atoms.name == "tri" and dash.attributes == ("a", "b", "c")


def test_yaml_query_file(tmp_path):
    path = tmp_path / "bowtie.yaml"
    path.write_text("name: bowtie\nedges: [[a, b], [b, c], [a, c], [c, d], [d, e], 'c-e']\n")
    q, options = load_query(str(path))
    assert q.name == "bowtie" and len(q.edges) == 6 and options == {}
    assert len(automorphisms(q)) == 8


@pytest.mark.parametrize(
    "spec,message",
    [
        ("nosuchquery", "unknown query 'nosuchquery'"),
        ("a-b,b-", "cannot parse edge"),
        ("missing.yaml", "missing.yaml: not found"),
    ],
)
def test_bad_query_specs(spec, message):
    with pytest.raises(DataError, match=message):
        load_query(spec)


def test_yaml_schema_errors_name_the_key(tmp_path):
    path = tmp_path / "q.yaml"
    path.write_text("name: x\nedgez: [[a, b]]\n")
    with pytest.raises(DataError, match=r"q.yaml: unknown key 'edgez'"):
        load_query(str(path))
    path.write_text("edges: [[a, b], [b, 3]]\n")
    with pytest.raises(DataError, match=r"key 'edges\[1\]'"):
        load_query(str(path))
    path.write_text("edges: [[a, b]\n")
    with pytest.raises(DataError, match=r"q.yaml:\d+: invalid YAML"):
        load_query(str(path))


def test_repeated_edges_are_rejected_unless_allowed_and_disconnected_patterns_always(tmp_path):
    with pytest.raises(DataError, match="repeated edge b-a"):
        make_join_spec(parse_pattern_string("a-b,b-a,b-c"), "undirected")
    # In directed semantics e(a,b) and e(b,a) are different atoms.
    make_join_spec(parse_pattern_string("a-b,b-a,b-c"), "directed")
    with pytest.raises(DataError, match="repeated edge"):
        make_join_spec(parse_pattern_string("a-b,a-b"), "directed")
    for semantics in ("undirected", "directed"):
        with pytest.raises(DataError, match=r"pattern is disconnected \({a,b} and {c,d}\); no implementation counts"):
            make_join_spec(parse_pattern_string("a-b,c-d"), semantics)
    with pytest.raises(DataError, match="self-loop"):
        make_join_spec(parse_pattern_string("a-a,a-b"), "undirected")
    make_join_spec(parse_pattern_string("a-b,b-a,b-c"), "undirected", allow_repeated_edges=True)
    path = tmp_path / "p.yaml"
    path.write_text("edges: 'a-b,c-d'\nallow_disconnected: true\n")
    with pytest.raises(DataError, match=r"p.yaml: key 'allow_disconnected' is not supported"):
        load_query(str(path))


def test_attribute_order_must_stay_connected():
    q = BUILTINS["diamond"]  # a 4-cycle a1-a2-a3-a4-a1
    with pytest.raises(DataError, match="not adjacent"):
        make_join_spec(q, "undirected", ("a1", "a3", "a2", "a4"))
    spec = make_join_spec(q, "undirected")
    order = spec.attribute_order
    assert all(any({order[j], a} in map(set, q.edges) for j in range(i)) for i, a in enumerate(order) if i)


def test_directed_spec_has_no_filters():
    spec = make_join_spec(BUILTINS["triangle"], "directed")
    assert spec.less_than == () and spec.distinct == ()


def test_undirected_clique_is_totally_ordered():
    spec = make_join_spec(BUILTINS["clique4"], "undirected")
    assert all(spec.implies_less(f"a{i}", f"a{j}") for i in range(1, 5) for j in range(i + 1, 5))
    assert spec.distinct == ()


def _one_representative_per_instance(query: Query) -> bool:
    """Label the attributes with distinct values; the matches of that one subgraph instance are the
    labelling composed with each automorphism. Exactly one of them may satisfy the constraints."""
    constraints = symmetry_breaking(query)
    values = list(range(len(query.attributes)))
    random.Random(len(query.edges)).shuffle(values)
    labelling = dict(zip(query.attributes, values))
    satisfying = 0
    for g in automorphisms(query):
        match = {a: labelling[g[a]] for a in query.attributes}
        satisfying += all(match[x] < match[y] for x, y in constraints)
    return satisfying == 1


@pytest.mark.parametrize("name", list(BUILTINS))
def test_symmetry_breaking_builtins(name):
    assert _one_representative_per_instance(BUILTINS[name])


@settings(max_examples=150, deadline=None)
@given(connected_patterns(max_vertices=6))
def test_symmetry_breaking_random_patterns(query):
    constraints = symmetry_breaking(query)
    # Every labelling of the attributes, not just one: exactly |labellings| / |Aut| pass.
    attrs = query.attributes
    passing = sum(
        all(perm[attrs.index(x)] < perm[attrs.index(y)] for x, y in constraints)
        for perm in itertools.permutations(range(len(attrs)))
    )
    assert passing * len(automorphisms(query)) == math.factorial(len(attrs))


def test_instance_key_identifies_subgraphs():
    spec = make_join_spec(BUILTINS["triangle"], "undirected")
    assert spec.instance_key((1, 2, 3)) == spec.instance_key((3, 1, 2))
    directed = make_join_spec(BUILTINS["triangle"], "directed")
    assert directed.instance_key((1, 2, 3)) != directed.instance_key((3, 1, 2))
