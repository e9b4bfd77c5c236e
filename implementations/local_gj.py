"""`local-gj`: the COST baseline (§5.2.1). A native single-threaded Generic Join on the driver:
degree-ordered ids, sorted CSR adjacency, each level's candidates intersected from its lists
(merge when sizes are comparable, galloping when one is much smaller, so a hub's list is never
scanned), candidate sets carried down to the next level, the last level counted without listing it.
An anti-relation (JoinSpec.anti) takes its list's values out of a level's candidates (csr.difference);
a labelled position keeps the candidates whose vertex carries its label (a per-candidate test)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import NamedTuple

import numpy as np
import pyarrow.parquet as pq
from numba import njit

from harness.core.query import in_query_order
from implementations.base import Implementation, Listed, Outcome, RunCancelled
from implementations.gj import match_files
from implementations.gj.constants import INT32_MAX
from implementations.gj.csr import build_csr, contains, dense_vertices, difference, intersect, vertex_ranks
from implementations.gj.csr import lower_bound as _lower_bound
from implementations.gj.extension_kernels import admissible, count_differing, value_bounds
from implementations.gj.plan import ExtensionPlan


@njit(cache=True, nogil=True)
def _same_relation(rel_pos, rel_kind, j, s, i, r):
    return rel_pos[j, s] == rel_pos[i, r] and rel_kind[j, s] == rel_kind[i, r]


@njit(cache=True, nogil=True)
def level_plan(rel_count, rel_pos, rel_kind, above, below, differ, loop):
    """Per level j: `carry[j]`, whether level j's candidates are level j-1's narrowed by more lists
    (every relation of j-1 binds j too, keyed the same way, and every lower bound of j-1 holds at j);
    `extra[j, :extra_count[j]]`, the relations of j still to intersect; `checked[j]`, whether a
    candidate needs a per-value test (below, differ, self-loop) after the lists and lower bounds."""
    m = rel_count.shape[0]
    carry = np.zeros(m, np.bool_)
    checked = np.zeros(m, np.bool_)
    extra = np.zeros(rel_pos.shape, np.int64)
    extra_count = np.zeros(m, np.int64)
    for j in range(m):
        checked[j] = loop[j]
        for p in range(j):
            checked[j] = checked[j] or below[j, p] or differ[j, p]
        if j >= 2:
            ok = True
            for r in range(rel_count[j - 1]):
                found = False
                for s in range(rel_count[j]):
                    found = found or _same_relation(rel_pos, rel_kind, j, s, j - 1, r)
                ok = ok and found
            for p in range(j - 1):
                ok = ok and (above[j, p] or not above[j - 1, p])
            carry[j] = ok
        for s in range(rel_count[j]):
            inherited = False
            if carry[j]:
                for r in range(rel_count[j - 1]):
                    inherited = inherited or _same_relation(rel_pos, rel_kind, j, s, j - 1, r)
            if not inherited:
                extra[j, extra_count[j]] = s
                extra_count[j] += 1
    return carry, extra, extra_count, checked


@njit(cache=True, nogil=True)
def anti_level_plan(carry, extra, extra_count, rel_count, anti_count, anti_pos, anti_kind):
    """level_plan's carry, extras and checks narrowed by the anti-relations. Level j's candidates
    leave out its anti-relations' lists, so level j carries them down only if every anti-relation of
    j - 1 is also one of j's (else j intersects all its relations afresh); `anti_extra[j,
    :anti_extra_count[j]]` are those j still applies. An anti-relation keyed by its own position (a
    directed `!a-a`) is `no_loop[j]`: a per-value test that the candidate has no self-loop."""
    m = rel_count.shape[0]
    carry, extra, extra_count = carry.copy(), extra.copy(), extra_count.copy()
    no_loop = np.zeros(m, np.bool_)
    anti_extra = np.zeros(anti_pos.shape, np.int64)
    anti_extra_count = np.zeros(m, np.int64)
    for j in range(m):
        for a in range(anti_count[j]):
            no_loop[j] = no_loop[j] or anti_pos[j, a] == j
        if carry[j] and not _anti_within(anti_count, anti_pos, anti_kind, j - 1, j):
            carry[j] = False
            extra_count[j] = rel_count[j]
            for s in range(rel_count[j]):
                extra[j, s] = s
        for a in range(anti_count[j]):
            inherited = carry[j] and _has_anti(anti_count, anti_pos, anti_kind, j - 1, anti_pos[j, a], anti_kind[j, a])
            if anti_pos[j, a] != j and not inherited:
                anti_extra[j, anti_extra_count[j]] = a
                anti_extra_count[j] += 1
    return carry, extra, extra_count, anti_extra, anti_extra_count, no_loop


@njit(cache=True, nogil=True)
def _has_anti(anti_count, anti_pos, anti_kind, j, pos, kind):
    found = False
    for a in range(anti_count[j]):
        found = found or (anti_pos[j, a] == pos and anti_kind[j, a] == kind)
    return found


@njit(cache=True, nogil=True)
def _anti_within(anti_count, anti_pos, anti_kind, i, j):
    """Whether every list anti-relation of level i is one of level j's (a self-loop test is per value)."""
    for a in range(anti_count[i]):
        if anti_pos[i, a] != i and not _has_anti(anti_count, anti_pos, anti_kind, j, anti_pos[i, a], anti_kind[i, a]):
            return False
    return True


@njit(cache=True, nogil=True)
def hoist_plan(carry, extra, extra_count, anti_extra, anti_extra_count, rel_pos, anti_pos):
    """Levels whose anti-relations are worked out once per value two levels up, not once per value of
    the level just above. Level t (not carried) hoists when it has an anti-relation and a relation
    both keyed by positions before t - 1: their difference (`early[t, :early_count[t]]` intersected,
    less `early_anti[t, :early_anti_count[t]]`) does not change with the value at t - 1, so it is
    made once per value at t - 2 (`_hoisted`), and level t starts from it; `extra` and `anti_extra`
    keep the relations keyed by t - 1. (The induced 4-cycle a,b,c,d: N+(a) less N+(b) once per
    (a, b), not once per (a, b, c).) A plain pattern hoists nothing."""
    m = carry.shape[0]
    extra, extra_count = extra.copy(), extra_count.copy()
    anti_extra, anti_extra_count = anti_extra.copy(), anti_extra_count.copy()
    hoist = np.zeros(m, np.bool_)
    early = np.zeros(extra.shape, np.int64)
    early_count = np.zeros(m, np.int64)
    early_anti = np.zeros(anti_extra.shape, np.int64)
    early_anti_count = np.zeros(m, np.int64)
    for t in range(2, m):
        rels, antis = 0, 0
        for e in range(extra_count[t]):
            rels += rel_pos[t, extra[t, e]] < t - 1
        for e in range(anti_extra_count[t]):
            antis += anti_pos[t, anti_extra[t, e]] < t - 1
        if carry[t] or rels == 0 or antis == 0:
            continue
        hoist[t] = True
        _split_early(t, extra, extra_count, rel_pos, early, early_count)
        _split_early(t, anti_extra, anti_extra_count, anti_pos, early_anti, early_anti_count)
    return hoist, early, early_count, early_anti, early_anti_count, extra, extra_count, anti_extra, anti_extra_count


@njit(cache=True, nogil=True)
def _split_early(t, listed, listed_count, pos, early, early_count):
    """Move level t's listed relations keyed by positions before t - 1 to early[t], keeping the rest in order."""
    late = 0
    for e in range(listed_count[t]):
        r = listed[t, e]
        if pos[t, r] < t - 1:
            early[t, early_count[t]] = r
            early_count[t] += 1
        else:
            listed[t, late] = r
            late += 1
    listed_count[t] = late


@njit(cache=True, nogil=True)
def _hoisted(
    t,
    vals,
    above,
    flat,
    row,
    offsets,
    rel_pos,
    rel_kind,
    anti_pos,
    anti_kind,
    early,
    early_count,
    early_anti,
    early_anti_count,
    cand,
    at,
    work,
):
    """Level t's hoisted candidates (hoist_plan) from the values bound before t - 1, written to cand[at:]:
    its early relations' lists from the lower bound those values set, intersected smallest first, less
    its early anti-relations' lists. Returns where they end."""
    floor = 0
    for q in range(t - 1):
        if above[t, q]:
            floor = max(floor, vals[q] + 1)
    smallest, size = 0, -1
    for e in range(early_count[t]):
        lo, hi = _list_from(t, early[t, e], vals, flat, row, offsets, rel_pos, rel_kind, floor)
        if size < 0 or hi - lo < size:
            smallest, size = e, hi - lo
    lo, hi = _list_from(t, early[t, smallest], vals, flat, row, offsets, rel_pos, rel_kind, floor)
    from_buf = False
    for e in range(early_count[t]):
        if e != smallest and hi > lo:
            b_lo, b_hi = _list_from(t, early[t, e], vals, flat, row, offsets, rel_pos, rel_kind, floor)
            found = intersect(cand if from_buf else flat, lo, hi, flat, b_lo, b_hi, cand, at, True, work)
            from_buf, lo, hi = True, at, at + found
    for e in range(early_anti_count[t]):
        if hi > lo:
            first = cand[lo] if from_buf else flat[lo]
            b_lo, b_hi = _list_from(t, early_anti[t, e], vals, flat, row, offsets, anti_pos, anti_kind, first)
            found = difference(cand if from_buf else flat, lo, hi, flat, b_lo, b_hi, cand, at, work)
            from_buf, lo, hi = True, at, at + found
    return hi if from_buf else at


@njit(cache=True, nogil=True)
def _less_anti(nj, last, vals, flat, row, offsets, anti_pos, anti_kind, anti_extra, k_anti, cand, width, from_buf, lo, hi, work):
    """Level nj's candidates (cand or flat [lo, hi)) less its k_anti anti-relations' lists, each from the
    first candidate on, written to cand at nj * width; at a last level that is only counted, the last
    list's part is not written but counted as the candidates less their intersection with it (the work
    an edge there would cost). Returns (from_buf, lo, hi) as generic_join keeps them."""
    for e in range(k_anti):
        if hi <= lo:
            break
        b_lo, b_hi = _list_from(
            nj, anti_extra[nj, e], vals, flat, row, offsets, anti_pos, anti_kind, cand[lo] if from_buf else flat[lo]
        )
        if last and e == k_anti - 1:
            hi -= intersect(cand if from_buf else flat, lo, hi, flat, b_lo, b_hi, cand, 0, False, work)
            break
        found = difference(cand if from_buf else flat, lo, hi, flat, b_lo, b_hi, cand, nj * width, work)
        from_buf, lo, hi = True, nj * width, nj * width + found
    return from_buf, lo, hi


@njit(cache=True, nogil=True)
def _count_bounded(src, lo, hi, ceiling, nj, prefix, differ):
    """How many of a last level's candidates src[lo:hi) pass its `below` and `differ` tests, without
    visiting them: those up to the ceiling (a bound search), less the values it must differ from that
    are among them (`count_differing`), so a 4-path's last level costs O(log) and not its list."""
    if ceiling < INT32_MAX:
        hi = _lower_bound(src, lo, hi, ceiling + 1)
    return count_differing(src, lo, hi, nj, prefix, 0, differ)


@njit(cache=True, nogil=True)
def _list_from(t, r, vals, flat, row, offsets, pos, kind_of, floor):
    """[lo, hi) in flat of level t's relation (or anti-relation) r's list, from the first value >= floor."""
    kind, key = kind_of[t, r], vals[pos[t, r]]
    hi = kind * row + offsets[kind, key + 1]
    return _lower_bound(flat, kind * row + offsets[kind, key], hi, floor), hi


@njit(cache=True, nogil=True)
def _search(
    offsets,
    values,
    rel_count,
    rel_pos,
    rel_kind,
    above,
    below,
    differ,
    loop,
    loops,
    anti_count,
    anti_pos,
    anti_kind,
    label,
    vertex_label,
    limit,
    out,
    work,
    first_lo,
    first_hi,
    found_before,
    buf,
):
    """generic_join's search, on the arrays its records hold (one array a local: the hot loop reads no
    record's field, which would cost a reference count each): count matches whose first position lies
    in [first_lo, first_hi); write the first matches into out[found_before:limit] (in attribute-order
    positions).

    Level j binds position j. rel_*[j, :rel_count[j]] are the relations (bound position, index) that
    bind it; above/below/differ[j, p] say the value must be >, < or != the one at position p; loop[j]
    requires a self-loop (loops: the sorted vertices that have one); anti_*[j, :anti_count[j]] are the
    anti-relations whose lists a candidate at j must be absent from (plan.anti_*); label[j] is the
    label the value at j must carry (-1: any), vertex_label[v] vertex v's (-1: none). offsets/values are
    (K, n + 1) and (K, *) arrays of K indices, both C-contiguous; buf is (2m, longest list) scratch
    (`scratch`). A level's candidates are the intersection of its lists from their lower bound on,
    smallest list first (csr.intersect: merge or gallop by size), or the previous level's candidates
    narrowed by its new lists, or its hoisted candidates (`hoist_plan`) narrowed by the rest, then
    less its anti-relations' lists (csr.difference; a plain pattern has none); the last level is
    counted without being listed when no match is written. Adds candidates
    examined to work[0] and list elements stepped over to work[1]. Bounds and filters are the
    BiGJoin kernels' (`value_bounds`, `admissible`), the intersection csr's, as BiGJoin's.
    It holds no Python objects and releases the GIL, so the harness's threads run beside it."""
    m = rel_count.shape[0]
    carry, extra, extra_count, checked = level_plan(rel_count, rel_pos, rel_kind, above, below, differ, loop)
    # A plain pattern passes anti_count None: numba prunes every `anti_count is not None` branch when it
    # compiles that signature, so plain patterns run the loop as it was before anti-relations.
    if anti_count is not None:
        carry, extra, extra_count, anti_extra, anti_extra_count, no_loop = anti_level_plan(
            carry, extra, extra_count, rel_count, anti_count, anti_pos, anti_kind
        )
        checked = checked | no_loop
        hoist, early, early_count, early_anti, early_anti_count, extra, extra_count, anti_extra, anti_extra_count = hoist_plan(
            carry, extra, extra_count, anti_extra, anti_extra_count, rel_pos, anti_pos
        )
        hoisted_end = np.zeros(m, dtype=np.int64)  # level j's hoisted candidates: cand[(m + j) * width:hoisted_end[j]]
    # Likewise an unlabelled pattern passes label None. A labelled level tests each candidate's label
    # where it takes it, as it tests `differ`: the candidate sets carried down or hoisted stay unfiltered
    # (a level's label says nothing of the next's), and a labelled last level is listed, not counted.
    if label is not None:
        checked = checked | (label >= 0)
    # The last level is counted unless it tests a self-loop or a label; its `below` and `differ` tests
    # are counted by bound searches (_count_bounded).
    countable_last = not loop[m - 1]
    if anti_count is not None:
        countable_last = countable_last and not no_loop[m - 1]
    if label is not None:
        countable_last = countable_last and label[m - 1] < 0
    # Flat views made once: a row view per intersection would cost reference counting per call.
    flat, row = values.reshape(values.size), values.shape[1]  # index kind's lists start at kind * row
    cand, width = buf.reshape(buf.size), buf.shape[1]  # level j's buffer starts at j * width
    vals = np.zeros(m, dtype=np.int64)
    prefix = vals.reshape(1, m)  # the bound values as the one prefix the shared kernels read
    ceiling = np.full(m, INT32_MAX, dtype=np.int64)  # level j's upper bound (its `below` constraints)
    pos = np.zeros(m, dtype=np.int64)
    end = np.zeros(m, dtype=np.int64)
    begin = np.zeros(m, dtype=np.int64)
    in_buf = np.zeros(m, dtype=np.bool_)  # level j's candidates: cand[begin:end] if set, else flat[begin:end]
    order = np.zeros(rel_pos.shape[1], dtype=np.int64)
    sizes = np.zeros(rel_pos.shape[1], dtype=np.int64)
    count = 0
    j = 0
    pos[0], end[0] = first_lo, first_hi
    while j >= 0:
        if pos[j] >= end[j]:
            j -= 1
            if j >= 0:
                pos[j] += 1
            continue
        if j == 0:
            c = pos[0]
        elif in_buf[j]:
            c = cand[pos[j]]
        else:
            c = flat[pos[j]]
        work[0] += 1
        ok = True
        if checked[j]:
            ok = c <= ceiling[j] and admissible(c, prefix, 0, j, differ, loop[j], loops)
            if anti_count is not None:
                ok = ok and not (no_loop[j] and contains(loops, 0, len(loops), c))
            if label is not None:
                ok = ok and (label[j] < 0 or vertex_label[c] == label[j])
        if not ok:
            pos[j] += 1
            continue
        vals[j] = c
        if j == m - 1:
            if found_before + count < limit:
                out[found_before + count, :] = vals
            count += 1
            pos[j] += 1
            continue
        # Level nj's candidates: [lo, hi) of cand (from_buf) or of flat.
        nj = j + 1
        floor, ceiling[nj] = value_bounds(nj, prefix, 0, above, below)
        k_extra = extra_count[nj]
        for e in range(k_extra):  # the new lists, trimmed to the floor, in order of size
            r = extra[nj, e]
            kind, key = rel_kind[nj, r], vals[rel_pos[nj, r]]
            base = kind * row
            sizes[e] = (
                base
                + offsets[kind, key + 1]
                - _lower_bound(flat, base + offsets[kind, key], base + offsets[kind, key + 1], floor)
            )
            order[e] = r
            q = e
            while q > 0 and sizes[q] < sizes[q - 1]:
                sizes[q], sizes[q - 1] = sizes[q - 1], sizes[q]
                order[q], order[q - 1] = order[q - 1], order[q]
                q -= 1
        first = 0
        if carry[nj]:
            from_buf = in_buf[j]
            # Values up to c = vals[j] cannot follow it when nj must exceed it: skip them outright.
            lo = _lower_bound(cand if from_buf else flat, pos[j] + 1 if above[nj, j] else begin[j], end[j], floor)
            hi = end[j]
        elif anti_count is not None and hoist[nj]:
            from_buf, hi = True, hoisted_end[nj]
            lo = _lower_bound(cand, (m + nj) * width, hi, floor)
        else:
            r = order[0]
            kind, key = rel_kind[nj, r], vals[rel_pos[nj, r]]
            from_buf = False
            hi = kind * row + offsets[kind, key + 1]
            lo = hi - sizes[0]
            first = 1
        # Matches are listed only until the first `limit` are written (Shares' sample, --limit); after
        # that the last level is counted again.
        listing = found_before + count < limit
        last = nj == m - 1 and not listing and countable_last
        # Only an unchecked last level may stop at a count; a bounded one needs its candidates listed.
        counted = last and not checked[nj]
        k_anti = 0
        if anti_count is not None:
            k_anti = anti_extra_count[nj]
        for e in range(first, k_extra):
            if hi <= lo:
                break
            r = order[e]
            kind, key = rel_kind[nj, r], vals[rel_pos[nj, r]]
            b_hi = kind * row + offsets[kind, key + 1]
            store = not (counted and e == k_extra - 1 and k_anti == 0)
            found = intersect(cand if from_buf else flat, lo, hi, flat, b_hi - sizes[e], b_hi, cand, nj * width, store, work)
            from_buf, lo, hi = True, nj * width, nj * width + found
            if not store:
                break
        if anti_count is not None and k_anti:
            from_buf, lo, hi = _less_anti(
                nj,
                counted,
                vals,
                flat,
                row,
                offsets,
                anti_pos,
                anti_kind,
                anti_extra,
                k_anti,
                cand,
                width,
                from_buf,
                lo,
                hi,
                work,
            )
        if last:
            found = max(0, hi - lo)
            if checked[nj]:
                found = _count_bounded(cand if from_buf else flat, lo, hi, ceiling[nj], nj, prefix, differ)
            count += found
            work[0] += found
            pos[j] += 1
            continue
        in_buf[nj], begin[nj], pos[nj], end[nj] = from_buf, lo, lo, hi
        if anti_count is not None and nj + 1 < m and hoist[nj + 1] and hi > lo:
            t = nj + 1
            hoisted_end[t] = _hoisted(
                t, vals, above, flat, row, offsets, rel_pos, rel_kind, anti_pos, anti_kind,
                early, early_count, early_anti, early_anti_count, cand, (m + t) * width, work,
            )  # fmt: skip
        j = nj
    return count


class SearchIndex(NamedTuple):
    """generic_join's lists: K indices as CSR, offsets (K, n + 1) and values (K, *), both C-contiguous,
    and the sorted vertices that have a self-loop."""

    offsets: np.ndarray
    values: np.ndarray
    loops: np.ndarray


class SearchPlan(NamedTuple):
    """What generic_join binds at each level j (ExtensionPlan's arrays): rel_*[j, :rel_count[j]] are the
    relations (bound position, index) that bind position j; above/below/differ[j, p] say its value must
    be >, < or != the one at position p; loop[j] requires a self-loop."""

    rel_count: np.ndarray
    rel_pos: np.ndarray
    rel_kind: np.ndarray
    above: np.ndarray
    below: np.ndarray
    differ: np.ndarray
    loop: np.ndarray

    @classmethod
    def of(cls, plan: ExtensionPlan, rel_kind: np.ndarray | None = None) -> SearchPlan:
        """The plan's arrays; `rel_kind` the index each relation reads where it is not its kind (Shares' cells)."""
        kinds = plan.rel_kind if rel_kind is None else rel_kind
        return cls(plan.rel_count, plan.rel_pos, kinds, plan.above, plan.below, plan.differ, plan.loop)


class AntiRelations(NamedTuple):
    """counts[j] anti-relations (pos[j, a], kind[j, a]) whose lists a candidate at j must be absent from."""

    counts: np.ndarray
    pos: np.ndarray
    kind: np.ndarray

    @classmethod
    def of(cls, count: np.ndarray, pos: np.ndarray, kind: np.ndarray) -> AntiRelations | None:
        """The plan's anti-relations, or None for a plain pattern, whose signature then compiles
        without the anti-relations' code (numba prunes every `anti is not None` branch)."""
        return cls(count, pos, kind) if count.any() else None


class Labels(NamedTuple):
    """required[j]: the label the value at j must carry (-1: any); of_vertex[v]: vertex v's (-1: none)."""

    required: np.ndarray
    of_vertex: np.ndarray

    @classmethod
    def of(cls, plan: ExtensionPlan) -> Labels | None:
        """The plan's labels, or None for an unlabelled pattern, whose signature then compiles without the test."""
        return cls(plan.label, plan.vertex_label) if (plan.label >= 0).any() else None


class Listing(NamedTuple):
    """Where generic_join writes matches: out[found_before:limit], in attribute-order positions."""

    out: np.ndarray
    limit: int
    found_before: int


@njit(cache=True, nogil=True)
def generic_join(index, plan, anti, labels, listing, first_lo, first_hi, work, buf):
    """Count matches whose first position lies in [first_lo, first_hi) of `index` (SearchIndex) under
    `plan` (SearchPlan), less `anti` (AntiRelations, None: none) and labelled as `labels` say (Labels,
    None: unlabelled); write the first matches into `listing` (Listing). buf is (2m, longest list)
    scratch (`scratch`). The search itself is `_search`; numba compiles it without the anti-relations'
    or the labels' branches where they are None."""
    if anti is None:
        anti_count, anti_pos, anti_kind = None, None, None
    else:
        anti_count, anti_pos, anti_kind = anti.counts, anti.pos, anti.kind
    if labels is None:
        label, vertex_label = None, None
    else:
        label, vertex_label = labels.required, labels.of_vertex
    return _search(
        index.offsets, index.values, plan.rel_count, plan.rel_pos, plan.rel_kind, plan.above, plan.below,
        plan.differ, plan.loop, index.loops, anti_count, anti_pos, anti_kind, label, vertex_label,
        listing.limit, listing.out, work, first_lo, first_hi, listing.found_before, buf,
    )  # fmt: skip


def scratch(offsets: np.ndarray, m: int) -> np.ndarray:
    """generic_join's per-level candidate buffers, and its hoisted candidates' (`hoist_plan`): 2m rows
    as long as the longest list."""
    longest = int(np.diff(offsets, axis=1).max()) if offsets.shape[1] > 1 else 0
    return np.empty((2 * m, max(1, longest)), dtype=np.int64)


def warm_up(anti: bool = False, labels: bool = False) -> None:
    """Compile (or load from numba's cache) generic_join for the argument types its callers use, and
    run it over a triangle with every filter, counting and listing, so no measured run pays for
    either: a fresh process was measured taking seconds over its first real call even with the code
    cached. Plain patterns, and the list builders; with `anti` and/or `labels` instead the types of
    patterns with an anti-relation and/or vertex labels (each a compilation of its own, which a
    session whose patterns have none need not pay: `warm.variants`)."""
    above = np.tril(np.ones((3, 3), dtype=np.bool_), -1)
    none = np.zeros((3, 3), dtype=np.bool_)
    # Vertices labelled 0, 1, 0: the triangle labelled 0, 1, 0 in attribute order, and not 1, 1, any.
    vertex_label = np.array([0, 1, 0], np.int64)
    if not anti:
        triangle = (np.array([0, 1, 2], np.int64), np.array([[0, 0], [0, 0], [0, 1]], np.int64))
        if labels:
            found = _on_a_triangle(
                *triangle, above, none, np.zeros(3, np.bool_), None, Labels(np.array([0, 1, 0]), vertex_label), 0
            )
            found += _on_a_triangle(
                *triangle, above, none, np.zeros(3, np.bool_), None, Labels(np.array([1, 1, -1]), vertex_label), 0
            )
        else:
            found = _on_a_triangle(*triangle, above, ~above, np.ones(3, np.bool_), None, None, 1)
            found += _on_a_triangle(*triangle, above, none, np.zeros(3, np.bool_), None, None, 0)
        if found != 1:
            raise RuntimeError(f"generic_join self-check found {found} triangles in a triangle (labels: {labels})")
    else:
        # The wedge b-a-c less the edge b-c: none in a triangle, labelled or not.
        wedge = (np.array([0, 1, 1], np.int64), np.zeros((3, 2), np.int64))
        anti_edge = AntiRelations(np.array([0, 0, 1], np.int64), np.array([[0], [0], [1]], np.int64), np.zeros((3, 1), np.int64))
        label_of = Labels(np.array([-1, 1, 0]), vertex_label) if labels else None
        if _on_a_triangle(*wedge, above, none, np.zeros(3, np.bool_), anti_edge, label_of, 0) != 0:
            raise RuntimeError(f"generic_join self-check found an induced wedge in a triangle (labels: {labels})")
    if not (anti or labels):  # the index builders too: the native reference's timing excludes compiling its list builder
        s, d = np.array([0, 0, 1], np.int64), np.array([1, 2, 2], np.int64)
        if build_csr(s, d, 3)[1].tolist() != [1, 2, 2] or vertex_ranks(np.arange(3), np.array([2, 1, 1])).tolist() != [2, 0, 1]:
            raise RuntimeError("local-gj's list builders failed their self-check on a triangle")


def _on_a_triangle(rel_count, rel_pos, above, differ, loop, anti, labels, limit) -> int:
    """generic_join over the forward lists of the triangle 0-1-2 (warm_up's self-check)."""
    offsets = np.array([[0, 2, 3, 3]], dtype=np.int64)
    values = np.array([[1, 2, 2]], dtype=np.int64)
    none = np.zeros((3, 3), dtype=np.bool_)
    out, work = np.zeros((1, 3), dtype=np.int64), np.zeros(2, dtype=np.int64)
    plan = SearchPlan(rel_count, rel_pos, np.zeros((3, 2), dtype=np.int64), above, none, differ, loop)
    index = SearchIndex(offsets, values, np.zeros(0, np.int64))
    return generic_join(index, plan, anti, labels, Listing(out, limit, 0), 0, 3, work, scratch(offsets, 3))


CHUNK_S = 0.25  # seconds per kernel call: the longest a timed-out run keeps going
FIRST_RATE = 1e6  # the work per second the first slice assumes: a quarter of a million units of 1 + degree²
FIRST_RATE_LIMITED = 1e4  # with a limit, a first slice a hundredth of that (slices grow 4x each): stops soon after N
LIST_ROWS = 1 << 16  # write_matches: the matches one slice lists before the buffer grows


def list_by_slice(kernel, slices, m: int, limit: int | None, write, work: np.ndarray) -> tuple[int, float | None]:
    """Lists matches slice by slice. `kernel(lo, hi, out, work)` counts the matches whose first value
    lies in [lo, hi) and lists the first len(out) of them into `out`; a slice that finds more than the
    buffer holds runs again into one that holds them (that rerun's work kept apart). Each slice's
    matches go to `write` (None: counted only, into a buffer of no rows). Stops after the slice that
    reaches `limit` (None: runs every slice). Returns the count (at most the limit) and the seconds to
    the end of the first slice that found a match."""
    spare = np.zeros_like(work)
    out = np.zeros((LIST_ROWS if write is not None else 0, m), dtype=np.int64)
    started, first_match_s, count = time.perf_counter(), None, 0
    for lo, hi in slices:
        found = kernel(lo, hi, out, work)
        if write is not None and found > len(out):
            out = np.zeros((found, m), dtype=np.int64)
            kernel(lo, hi, out, spare)
        take = found if limit is None else min(found, limit - count)
        if write is not None and take:
            write(out[:take])
        count += take
        if first_match_s is None and count:
            first_match_s = time.perf_counter() - started
        if limit is not None and count >= limit:
            break
    return count, first_match_s


def work_slices(degree: np.ndarray, first_work: float) -> Iterator[tuple[int, int]]:
    """Slices [lo, hi) of first-position vertices by estimated work (1 + degree² a vertex), the first
    about `first_work`, each next one 4x the last: a limited listing stops soon after its first
    matches, and an unlimited one makes few kernel calls."""
    estimate = work_estimate(degree)
    lo, target = 0, first_work
    while lo < len(degree):
        hi = slice_end(estimate, lo, target)
        yield lo, hi
        lo, target = hi, target * 4


def work_estimate(degree: np.ndarray) -> np.ndarray:
    """The estimated work of the first-position vertices before each, 1 + degree² a vertex: work climbs
    steeply towards the high-degree end of the ranking, a vertex count would not."""
    d = degree.astype(np.float64)
    return np.concatenate([[0.0], np.cumsum(1.0 + d * d)])


def slice_end(estimate: np.ndarray, lo: int, work: float) -> int:
    """The end of the slice from `lo` that holds about `work` (at least one vertex)."""
    n = len(estimate) - 1
    return min(n, max(lo + 1, int(np.searchsorted(estimate, estimate[lo] + work, side="right")) - 1))


class RankedIndex(NamedTuple):
    """local-gj's index of a graph: its vertices ranked (by degree and id, undirected), and the CSR
    lists of each kind (FORWARD, REVERSE, BOTH) a plan reads, by rank."""

    ids: np.ndarray  # rank -> vertex id
    degree: np.ndarray  # by rank
    loops: np.ndarray  # the ranks with a self-loop, sorted (as admissible looks them up)
    offsets: np.ndarray  # (3, n + 1)
    values: np.ndarray  # (3, the longest kind's entries)


def used_kinds(plan: ExtensionPlan) -> set[int]:
    """The kinds of lists the plan's relations and anti-relations read (a triangle reads FORWARD alone)."""
    p = plan
    return {int(k) for j in range(p.m) for k in (*p.rel_kind[j, : p.rel_count[j]], *p.anti_kind[j, : p.anti_count[j]])}


def ranked_index(src: np.ndarray, dst: np.ndarray, undirected: bool, used: set[int]) -> RankedIndex:
    """The index of the edges (src, dst): dense ranks, and the lists of the `used` kinds, each built by
    counting sorts (the others empty)."""
    s, d, ids = dense_vertices(src, dst)
    n = len(ids)
    degree = np.bincount(s, minlength=n) + np.bincount(d, minlength=n)
    rank = vertex_ranks(ids, degree if undirected else None)
    by_rank = np.empty(n, dtype=np.int64)
    by_rank[rank] = ids
    degree[rank] = degree.copy()
    s, d = rank[s], rank[d]
    loops = np.unique(s[s == d])
    if undirected:  # FORWARD lower rank -> higher, REVERSE back, BOTH every neighbour
        s, d = np.minimum(s, d), np.maximum(s, d)
    keys: dict[int, tuple[np.ndarray, np.ndarray]] = {
        0: (s, d),
        1: (d, s),
        2: (np.concatenate([s, d]), np.concatenate([d, s])) if undirected else (s, d),
    }
    indices = [build_csr(*keys[k], n) if k in used else (np.zeros(n + 1, np.int64), np.zeros(0, np.int64)) for k in range(3)]
    offsets = np.stack([o for o, _ in indices])
    values = np.zeros((3, max(1, max(len(v) for _, v in indices))), dtype=np.int64)
    for i, (_, v) in enumerate(indices):
        values[i, : len(v)] = v
    return RankedIndex(by_rank, degree, loops, offsets, values)


def _parquet_writer(path: str, spec) -> pq.ParquetWriter:
    os.makedirs(path, exist_ok=True)
    return pq.ParquetWriter(os.path.join(path, "part-00000.parquet"), match_files.schema(spec))


class LocalGenericJoin(Implementation):
    name = "local-gj"
    driver_edges = True
    runs_in_driver = True
    kernels = frozenset({"local-gj"})
    anti_edges = True
    vertex_labels = True  # a labelled level tests each candidate's label (its rank's, mapped in prepare)
    description = "native single-threaded Generic Join (numba) on the driver: the COST baseline"
    writes_matches = True  # from the driver's process, where it runs (pyarrow, slice by slice)

    def prepare(self) -> None:
        self.plan = ExtensionPlan.from_spec(self.ctx.spec)
        self.plan.require_connected_order(self.ctx.spec)  # every position after the first is proposed by a relation
        undirected = self.ctx.spec.semantics == "undirected"
        src, dst = self.ctx.graph.edge_arrays()
        index = ranked_index(src, dst, undirected, used_kinds(self.plan))
        self.ids, self.degree, self.loops, self.offsets, self.values = index
        self.n = len(index.ids)
        if self.ctx.spec.query.labels:  # each rank's label, for generic_join's per-candidate test
            self.plan.rank_labels(self.ids, *self.ctx.graph.label_arrays())

    def _slices(self, rate: float = FIRST_RATE) -> Iterator[tuple[int, int]]:
        """Slices [lo, hi) of first-position vertices, sized to take about CHUNK_S each (the caller runs
        the kernel on one before asking for the next), so a timed-out run stops within a slice
        (ctx.cancelled) instead of running on for hours. A slice is sized by estimated work, 1 + degree²
        per vertex, at the rate the last slice ran: work per vertex climbs steeply towards the
        high-degree end of the ranking, a vertex count would not. `rate`: the estimated work per second
        the first slice (a short probe) assumes."""
        estimate = work_estimate(self.degree)
        lo = 0
        while lo < self.n:
            if self.ctx.cancelled.is_set():
                raise RunCancelled(f"local-gj stopped at vertex {lo:,} of {self.n:,}")
            hi = slice_end(estimate, lo, max(1.0, rate * CHUNK_S))
            started = time.perf_counter()
            yield lo, hi
            took = max(time.perf_counter() - started, 1e-4)
            rate = min(rate * 4, (estimate[hi] - estimate[lo]) / took)  # grow at most 4x per slice
            lo = hi

    def _kernel(self, lo: int, hi: int, limit: int, out: np.ndarray, found_before: int, work: np.ndarray) -> int:
        """generic_join on first positions [lo, hi): their count; matches written to out[found_before:limit]."""
        p = self.plan
        anti, labels = AntiRelations.of(p.anti_count, p.anti_pos, p.anti_kind), Labels.of(p)
        index = SearchIndex(self.offsets, self.values, self.loops)
        listing = Listing(out, limit, found_before)
        return generic_join(index, SearchPlan.of(p), anti, labels, listing, lo, hi, work, self.buf)

    def _run(self, limit: int) -> tuple[int, np.ndarray, np.ndarray]:
        """The count, the first `limit` matches (in attribute order, ranks) and the work counters."""
        out = np.zeros((max(limit, 0), self.plan.m), dtype=np.int64)
        work = np.zeros(2, dtype=np.int64)
        self.buf = scratch(self.offsets, self.plan.m)
        count = 0
        for lo, hi in self._slices():
            count += self._kernel(lo, hi, limit, out, count, work)
        return int(count), out, work

    def write_matches(self, path: str | None, limit: int | None) -> Listed:
        """local-gj runs on the driver by design, so its matches are written from the driver's process:
        each slice's matches, listed into a buffer (grown when a slice finds more than it holds, the
        slice then run again), mapped to the graph's ids and appended to one Parquet file by pyarrow.
        With a limit it stops after the slice that reaches it, and its first slice is small (slices grow
        4x each), so an existence query stops soon after its first match; first_match_s is the end of
        the first slice that found one."""
        work = np.zeros(2, dtype=np.int64)
        self.buf = scratch(self.offsets, self.plan.m)
        writer = None if path is None else _parquet_writer(path, self.ctx.spec)

        def kernel(lo: int, hi: int, out: np.ndarray, work: np.ndarray) -> int:
            return self._kernel(lo, hi, len(out), out, 0, work)

        def write(ranks: np.ndarray) -> None:
            assert writer is not None
            writer.write_table(match_files.table(self.ctx.spec, self.ids, ranks))

        slices = self._slices(FIRST_RATE if limit is None else FIRST_RATE_LIMITED)
        try:
            count, first_match_s = list_by_slice(kernel, slices, self.plan.m, limit, None if writer is None else write, work)
        finally:
            if writer is not None:
                writer.close()
        return Listed(count, {"candidates": int(work[0]), "probes": int(work[1])}, first_match_s=first_match_s)

    def count(self) -> Outcome:
        count, _, work = self._run(0)
        return Outcome(count=count, counters={"candidates": int(work[0]), "probes": int(work[1])})

    def matches(self, limit: int) -> list[tuple]:
        count, out, _ = self._run(limit)
        spec = self.ctx.spec
        return in_query_order(spec.query, spec.attribute_order, self.ids[out[: min(count, limit)]])
