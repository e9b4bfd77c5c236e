"""The sorted-list primitives every Generic Join kernel here is built on, against numpy: each
intersection strategy on random sorted lists (empty, equal, disjoint, 1,000:1 size ratios, values over
all of int64), sub-ranges, counting without storing, and writing over one of its own inputs."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from implementations.csr import gallop, intersect, intersect_gallop, intersect_merge, lower_bound

STRATEGIES = {"merge": intersect_merge, "gallop": intersect_gallop, "adaptive": intersect}
INT64 = st.integers(-(2**63), 2**63 - 1)


def sorted_list(values) -> np.ndarray:
    return np.unique(np.asarray(values, dtype=np.int64))


def run(fn, a, b, a_range=None, b_range=None, store=True):
    a_lo, a_hi = a_range or (0, len(a))
    b_lo, b_hi = b_range or (0, len(b))
    out = np.full(max(1, min(len(a), len(b))), -7, dtype=np.int64)
    work = np.zeros(2, dtype=np.int64)
    # gallop and merge take the smaller list first only by convention; both must hold either way
    k = fn(a, a_lo, a_hi, b, b_lo, b_hi, out, store, work)
    return k, out[:k]


@pytest.mark.parametrize("name", STRATEGIES)
@settings(max_examples=200, deadline=None)
@given(a=st.lists(INT64, max_size=60), b=st.lists(INT64, max_size=60), shared=st.lists(INT64, max_size=30))
def test_random_lists_equal_intersect1d(name, a, b, shared):
    a, b = sorted_list(a + shared), sorted_list(b + shared)
    expected = np.intersect1d(a, b)
    for x, y in ((a, b), (b, a)):
        k, found = run(STRATEGIES[name], x, y)
        assert k == len(expected) and np.array_equal(found, expected)
        assert run(STRATEGIES[name], x, y, store=False)[0] == len(expected)


@pytest.mark.parametrize("name", STRATEGIES)
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_sub_ranges(name, data):
    a = sorted_list(data.draw(st.lists(st.integers(0, 200), max_size=80)))
    b = sorted_list(data.draw(st.lists(st.integers(0, 200), max_size=80)))
    a_lo = data.draw(st.integers(0, len(a)))
    a_hi = data.draw(st.integers(a_lo, len(a)))
    b_lo = data.draw(st.integers(0, len(b)))
    b_hi = data.draw(st.integers(b_lo, len(b)))
    expected = np.intersect1d(a[a_lo:a_hi], b[b_lo:b_hi])
    k, found = run(STRATEGIES[name], a, b, (a_lo, a_hi), (b_lo, b_hi))
    assert np.array_equal(found, expected)


@pytest.mark.parametrize("name", STRATEGIES)
@pytest.mark.parametrize("case", ["empty-empty", "empty-full", "equal", "disjoint", "ratio-1000", "ratio-1000-all-hits"])
def test_edge_cases(name, case):
    rng = np.random.default_rng(7)
    big = sorted_list(rng.integers(-(2**39), 2**39, 100_000))
    small = sorted_list(rng.choice(big, 100, replace=False) if case.endswith("all-hits")
                        else np.concatenate([rng.choice(big, 50, replace=False), rng.integers(-(2**39), 2**39, 50)]))
    a, b = {"empty-empty": (big[:0], big[:0]), "empty-full": (big[:0], big), "equal": (big, big.copy()),
            "disjoint": (big[::2], big[1::2]), "ratio-1000": (small, big), "ratio-1000-all-hits": (small, big)}[case]
    expected = np.intersect1d(a, b)
    for x, y in ((a, b), (b, a)):
        k, found = run(STRATEGIES[name], x, y)
        assert k == len(expected) and np.array_equal(found, expected)


@pytest.mark.parametrize("name", STRATEGIES)
@pytest.mark.parametrize("into", ["a", "b"])
def test_writing_over_an_input(name, into):
    """local-gj narrows a level's candidates in place: out may be either input when its range starts at 0."""
    rng = np.random.default_rng(11)
    a = sorted_list(rng.integers(0, 3000, 400))
    b = sorted_list(rng.integers(0, 3000, 2500))
    expected = np.intersect1d(a, b)
    target = a if into == "a" else b
    work = np.zeros(2, dtype=np.int64)
    k = STRATEGIES[name](a, 0, len(a), b, 0, len(b), target, True, work)
    assert np.array_equal(target[:k], expected)


@settings(max_examples=200, deadline=None)
@given(values=st.lists(INT64, max_size=100), x=INT64, start=st.integers(0, 100))
def test_gallop_is_lower_bound(values, x, start):
    v = sorted_list(values)
    start = min(start, len(v))
    assert gallop(v, start, len(v), x) == lower_bound(v, start, len(v), x) == start + np.searchsorted(v[start:], x)
