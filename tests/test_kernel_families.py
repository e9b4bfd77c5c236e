"""A session warms the kernel families of the runs it will make, and of each only the variants its
patterns call: a kernel's anti-intersect, and local-gj's label and anti-relation arguments, are
compilations of their own that a plain pattern never pays for (`implementations.warm.variants`).
That the variants' warm-ups cover every type a run meets is checked where the runs are
(tests/test_dataflow.py, tests/test_one_level_in_process.py: no kernel compiled in a timed stage)."""

from __future__ import annotations

import pytest

from harness.bench.runner import RunRequest, planned_kernels
from harness.core.query import Query
from implementations import warm

CONTEST = ("local-gj", "shares", "bigjoin", "bigjoin-carry", "bigjoin-s", "binary")
PLAIN = frozenset({"local-gj", "bigjoin", "bigjoin-carry", "bigjoin-s"})
DATAFLOW_ANTI = {"bigjoin/anti", "bigjoin-carry/anti", "bigjoin-s/anti"}


def _planned(query, impls=CONTEST) -> frozenset[str]:
    return planned_kernels([RunRequest(query, "rmat:scale=7", impl) for impl in impls])


def test_a_plain_contest_warms_no_variant():
    assert _planned("triangle") == _planned("clique5") == PLAIN


@pytest.mark.parametrize("query", ["a-b,b-c,!a-c", {"name": "p3", "edges": [["a", "b"], ["b", "c"]], "induced": True}])
def test_an_anti_pair_or_an_induced_pattern_warms_the_anti_variants(query):
    assert _planned(query) == PLAIN | DATAFLOW_ANTI | {"local-gj/anti"}


def test_labels_warm_local_gj_s_label_variants_only():
    labelled = Query("labelled", (("a", "b"), ("b", "c"), ("a", "c")), labels=(("a", 1),))
    assert _planned(labelled) == PLAIN | {"local-gj/labels"}
    both = Query("both", (("a", "b"), ("b", "c")), anti_edges=(("a", "c"),), labels=(("a", 1),))
    assert _planned(both) == PLAIN | DATAFLOW_ANTI | {"local-gj/anti/labels"}


def test_a_census_warms_what_its_shapes_call():
    """motifs:4 counts induced shapes: every shape's spec, not the first one's alone."""
    assert "bigjoin/anti" in _planned("motifs:4", ("bigjoin",))


def test_a_request_that_fails_its_check_adds_nothing_and_one_level_engines_have_variants():
    assert _planned("no-such-query", ("bigjoin",)) == frozenset()
    assert _planned("a-b,b-c,!a-c", ("delta-bigjoin",)) == {"bigjoin", "bigjoin/anti", "one-level", "one-level/anti"}


def test_every_family_has_a_warm_up_and_names_its_base():
    assert set(warm.warm_steps()) == set(warm.FAMILIES)
    assert {warm.base_family(f) for f in warm.FAMILIES} == {"local-gj", *warm.DATAFLOW, "one-level"}
