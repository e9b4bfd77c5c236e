"""The sorted-list primitives every Generic Join kernel here is built on, against numpy: each
intersection strategy on random sorted lists (empty, equal, disjoint, 1,000:1 size ratios, values over
all of int64), sub-ranges, counting without storing, and writing over one of its own inputs; and the
counting-sort CSR build and degree ranking against numpy's comparison sorts."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import njit

from implementations.gj.csr import (
    build_csr,
    dense_vertices,
    difference,
    gallop,
    intersect,
    intersect_gallop,
    intersect_merge,
    locate_sorted,
    lower_bound,
    vertex_ranks,
)
from implementations.gj.views import as_readonly

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
    k = fn(a, a_lo, a_hi, b, b_lo, b_hi, out, 0, store, work)
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


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_difference_equals_setdiff1d_on_sub_ranges_and_in_place(data):
    """The anti-intersect, both ways round, with 1,000:1 ratios (galloping) and written over its input."""
    values = st.integers(0, 300) if data.draw(st.booleans()) else INT64
    a = sorted_list(data.draw(st.lists(values, max_size=80)))
    b = sorted_list(data.draw(st.lists(values, max_size=80)) + (list(range(0, 300_000, 3)) if data.draw(st.booleans()) else []))
    for x, y in ((a, b), (b, a)):
        x_lo = data.draw(st.integers(0, len(x)))
        x_hi = data.draw(st.integers(x_lo, len(x)))
        y_lo = data.draw(st.integers(0, len(y)))
        y_hi = data.draw(st.integers(y_lo, len(y)))
        expected = np.setdiff1d(x[x_lo:x_hi], y[y_lo:y_hi])
        out = x.copy()  # in place: survivors written over x from x_lo on
        k = difference(out, x_lo, x_hi, y, y_lo, y_hi, out, x_lo, np.zeros(2, dtype=np.int64))
        assert np.array_equal(out[x_lo : x_lo + k], expected)


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
    _k, found = run(STRATEGIES[name], a, b, (a_lo, a_hi), (b_lo, b_hi))
    assert np.array_equal(found, expected)


@pytest.mark.parametrize("name", STRATEGIES)
@pytest.mark.parametrize("case", ["empty-empty", "empty-full", "equal", "disjoint", "ratio-1000", "ratio-1000-all-hits"])
def test_edge_cases(name, case):
    rng = np.random.default_rng(7)
    big = sorted_list(rng.integers(-(2**39), 2**39, 100_000))
    small = sorted_list(
        rng.choice(big, 100, replace=False)
        if case.endswith("all-hits")
        else np.concatenate([rng.choice(big, 50, replace=False), rng.integers(-(2**39), 2**39, 50)])
    )
    a, b = {
        "empty-empty": (big[:0], big[:0]),
        "empty-full": (big[:0], big),
        "equal": (big, big.copy()),
        "disjoint": (big[::2], big[1::2]),
        "ratio-1000": (small, big),
        "ratio-1000-all-hits": (small, big),
    }[case]
    expected = np.intersect1d(a, b)
    for x, y in ((a, b), (b, a)):
        k, found = run(STRATEGIES[name], x, y)
        assert k == len(expected) and np.array_equal(found, expected)


@pytest.mark.parametrize("name", STRATEGIES)
@pytest.mark.parametrize("sizes", [(400, 2500), (2500, 400), (300, 300), (20, 3000), (3000, 20)])
@pytest.mark.parametrize("offset", [0, 5])
@pytest.mark.parametrize("at", ["start", "same"])
def test_writing_over_the_first_input(name, sizes, offset, at):
    """Kernels narrow candidates in place: out may be a, from any position at or before a's range."""
    out_lo = 0 if at == "start" else offset
    rng = np.random.default_rng(sum(sizes) + offset)
    a = sorted_list(rng.integers(0, 3000, sizes[0]))
    b = sorted_list(rng.integers(0, 3000, sizes[1]))
    expected = np.intersect1d(a, b)
    work = np.zeros(2, dtype=np.int64)
    padded = np.concatenate([np.full(offset, -1), a])
    k = STRATEGIES[name](padded, offset, len(padded), b, 0, len(b), padded, out_lo, True, work)
    assert np.array_equal(padded[out_lo : out_lo + k], expected)


@pytest.mark.parametrize("name", ["merge", "adaptive"])
def test_writing_over_a_larger_first_input(name):
    """The case that broke when the adaptive intersection swapped its inputs and so wrote over b: the
    merge wrote a non-matching value of the other list over the candidate it was about to compare."""
    a, b = np.array([2, 5, 7, 9], dtype=np.int64), np.array([1, 2], dtype=np.int64)
    k = STRATEGIES[name](a, 0, 4, b, 0, 2, a, 0, True, np.zeros(2, dtype=np.int64))
    assert k == 1 and a[0] == 2


@settings(max_examples=200, deadline=None)
@given(values=st.lists(INT64, max_size=100), x=INT64, start=st.integers(0, 100))
def test_gallop_is_lower_bound(values, x, start):
    v = sorted_list(values)
    start = min(start, len(v))
    assert gallop(v, start, len(v), x) == lower_bound(v, start, len(v), x) == start + np.searchsorted(v[start:], x)


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_counting_csr_equals_a_lexsort(data):
    n = data.draw(st.integers(1, 40))
    bound = data.draw(st.integers(1, 40))
    pairs = data.draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, bound - 1)), max_size=200))
    keys = np.array([k for k, _ in pairs], dtype=np.int32)
    values = np.array([v for _, v in pairs], dtype=np.int32)
    offsets, lists = build_csr(keys, values, n, bound)
    order = np.lexsort((values, keys))
    assert np.array_equal(lists, values[order])
    assert np.array_equal(offsets, np.concatenate([[0], np.cumsum(np.bincount(keys, minlength=n))]))


@settings(max_examples=100, deadline=None)
@given(degree=st.lists(st.integers(0, 50), max_size=100))
def test_degree_ranks_order_by_degree_then_id(degree):
    degree = np.array(degree, dtype=np.int64)
    ids = np.arange(len(degree), dtype=np.int64) * 3
    expected = np.empty(len(degree), dtype=np.int64)
    expected[np.lexsort((ids, degree))] = np.arange(len(degree))
    assert np.array_equal(vertex_ranks(ids, degree), expected)


@settings(max_examples=100, deadline=None)
@given(pairs=st.lists(st.tuples(INT64, INT64), max_size=50), small=st.booleans())
def test_dense_vertices_keep_every_edge(pairs, small):
    src = np.array([a for a, _ in pairs], dtype=np.int64)
    dst = np.array([b for _, b in pairs], dtype=np.int64)
    if small:
        src, dst = np.abs(src % 97), np.abs(dst % 97)
    s, d, ids = dense_vertices(src, dst)
    assert np.array_equal(ids[s], src) and np.array_equal(ids[d], dst)
    assert np.all(ids[1:] > ids[:-1])  # strictly increasing (np.diff would overflow across all of int64)


@settings(max_examples=200, deadline=None)
@given(values=st.lists(INT64, max_size=200), queries=st.lists(INT64, max_size=200), shared=st.lists(INT64, max_size=50))
def test_locate_sorted_equals_searchsorted(values, queries, shared):
    """BiGJoin-S's batched membership probe: sorted lookups galloping through a sorted index."""
    values, queries = sorted_list(values + shared), np.sort(np.asarray(queries + shared, dtype=np.int64))
    at, found = locate_sorted(values, queries)
    assert np.array_equal(at, np.searchsorted(values, queries))
    assert np.array_equal(found, np.isin(queries, values))


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(st.integers(0, 300), st.booleans(), max_size=120),
    st.dictionaries(st.integers(0, 300), st.booleans(), max_size=120),
)
def test_overriding_merge_equals_a_dict_update(old, new):
    """The versioned index's edge-set merge (and its compaction): new flags win, all codes sorted."""
    from implementations.indices.versioned_index import _overridden

    def arrays(d):
        keys = sorted(d)
        return np.array(keys, np.int64), np.array([d[k] for k in keys], np.bool_)

    codes, flags = _overridden(*arrays(old), *arrays(new))
    want = {**old, **new}
    assert codes.tolist() == sorted(want) and flags.tolist() == [want[k] for k in sorted(want)]


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(st.integers(0, 300), st.sampled_from([-1, 1]), max_size=120),
    st.lists(st.tuples(st.integers(0, 300), st.sampled_from([-1, 1])), max_size=120),
)
def test_signed_merge_sums_the_signs_of_equal_codes(history, batch):
    """The overlay's merge of its changes so far (sorted, unique) with a batch's (sorted, repeats allowed)."""
    from implementations.indices.versioned_index import _summed

    old = sorted(history)
    batch = sorted(batch)
    codes, net = _summed(
        np.array(old, np.int64),
        np.array([history[k] for k in old], np.int8),
        np.array([c for c, _ in batch], np.int64),
        np.array([s for _, s in batch], np.int8),
    )
    want: dict[int, int] = dict(history)
    for c, s in batch:
        want[c] = want.get(c, 0) + s
    assert codes.tolist() == sorted(want) and net.tolist() == [want[k] for k in sorted(want)]


@njit
def _total(values):
    return values.sum()


@njit
def _total_of_both(writable, readonly):
    return _total(as_readonly(writable)), _total(as_readonly(readonly))


def test_a_read_only_view_makes_one_compilation_serve_writable_and_read_only_arrays():
    """`as_readonly`, as the kernels hand candidates out of line: a kernel called with a writable and
    with a read-only array through it compiles once, and reads the very same memory (no copy)."""
    writable, readonly = np.arange(10), np.arange(5)
    readonly.setflags(write=False)
    assert _total_of_both(writable, readonly) == (45, 10)
    assert len(_total.signatures) == 1 and not _total.signatures[0][0].mutable
    writable[0] = 100
    assert _total_of_both(writable, readonly) == (145, 10)
    assert writable.flags.writeable  # the caller's array is untouched
