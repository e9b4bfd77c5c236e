"""Query parsing, validation, automorphisms and symmetry breaking (no Spark)."""

import itertools
import math
import random
import re

import pytest
from hypothesis import given, settings

from harness.core.errors import DataError
from harness.core.query import BUILTINS, Query, automorphisms, load_query, make_join_spec, parse_pattern_string, symmetry_breaking
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


def test_anti_edges_parse_in_every_form():
    for text in ("a-b,b-c,!a-c", "e(a,b),e(b,c),!e(a,c)", "wedge := e(a,b), e(b,c), !e(a,c)"):
        q = parse_pattern_string(text)
        assert q.edges == (("a", "b"), ("b", "c")) and q.anti_edges == (("a", "c"),)
    q, _ = load_query({"name": "w", "edges": [["a", "b"], "b-c"], "anti_edges": [["a", "c"]]})
    assert q.anti_edges == (("a", "c"),) and not q.induced
    q, _ = load_query({"edges": "a-b,b-c", "induced": True})
    assert q.induced and make_join_spec(q, "undirected").anti == (("a", "c"),)


def test_induced_makes_every_non_edge_an_anti_edge_in_each_semantics():
    q, _ = load_query({"edges": "a-b,b-c,c-d,d-a", "induced": True})
    assert make_join_spec(q, "undirected").anti == (("a", "c"), ("b", "d"))
    directed = make_join_spec(q, "directed").anti
    assert len(directed) == 4 * 3 - 4 and ("b", "a") in directed and ("a", "b") not in directed


def test_symmetry_breaking_keeps_the_anti_edges():
    # The path a-b-c-d has |Aut| = 2 (reversal); the anti-edge a-c is not mapped onto itself by it.
    q = parse_pattern_string("a-b,b-c,c-d,!a-c")
    assert len(automorphisms(q)) == 1 and make_join_spec(q, "undirected").less_than == ()
    induced_cycle, _ = load_query({"edges": "a-b,b-c,c-d,d-a", "induced": True})
    assert len(automorphisms(induced_cycle)) == 8


@pytest.mark.parametrize(
    "spec,message",
    [
        ("a-b,!a-b", "both an edge and an anti-edge"),
        ("a-b,!b-a", "both an edge and an anti-edge"),
        ("a-b,!a-a", "self-loop"),
        ("a-b,b-c,!a-c,!c-a", "repeated anti-edge"),
        ("a-b,c-d,!b-c", "disconnected ({a,b} and {c,d}) (anti-edges do not connect"),
    ],
)
def test_bad_anti_edges_are_data_errors(spec, message):
    with pytest.raises(DataError, match=re.escape(message)):
        make_join_spec(parse_pattern_string(spec), "undirected")


@pytest.mark.parametrize(
    "data,key",
    [
        ({"edges": "a-b", "anti_edges": "a-c"}, "'anti_edges'"),
        ({"edges": "a-b", "anti_edges": [["a", 1]]}, "'anti_edges[0]'"),
        ({"edges": "a-b", "induced": "yes"}, "'induced'"),
    ],
)
def test_bad_anti_edge_keys_name_the_key(data, key):
    with pytest.raises(DataError, match=re.escape(key)):
        load_query(data)


def test_vertex_labels_parse_from_strings_and_yaml_and_break_symmetry():
    q = parse_pattern_string("a:1-b:2,b-c")
    assert q.labels == (("a", 1), ("b", 2)) and q.edges == (("a", "b"), ("b", "c"))
    # The wedge's ends swap unless only one is labelled.
    assert len(automorphisms(parse_pattern_string("a:1-b,b-c"))) == 1
    same, _ = load_query({"edges": "a-b,b-c", "labels": {"a": 1, "c": 1}})
    assert len(automorphisms(same)) == 2 and make_join_spec(same, "undirected").less_than == (("a", "c"),)


@pytest.mark.parametrize(
    "spec,message",
    [
        ({"edges": "a-b", "labels": {"z": 1}}, "key 'labels.z': z is not a vertex"),
        ({"edges": "a-b", "labels": {"a": "x"}}, "key 'labels.a' must be a non-negative integer"),
        ({"edges": "a:1-b", "labels": {"a": 2}}, "key 'labels.a': a requires two labels"),
        ("a:1-b,a:2-c", "vertex a requires two labels (1 and 2)"),
        ("a:x-b", "cannot parse edge 'a:x-b'"),
    ],
)
def test_bad_labels_are_data_errors_naming_the_key(spec, message):
    with pytest.raises(DataError, match=re.escape(message)):
        load_query(spec)
