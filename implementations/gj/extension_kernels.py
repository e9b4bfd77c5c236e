"""Numba kernels of the prefix-extension primitive, run by the worker that owns the lookup keys.

An index partition `ix` (IndexPartition) is the sorted keys this worker owns with, per key, its
sorted forward and reverse lists (`ix.lists`), then the changes to those lists (`ix.changes`,
Delta-BiGJoin): per key sorted values with a sign (+1 added, -1 removed). A relation's kind is
FORWARD, REVERSE or BOTH; BOTH reads reverse ++ forward, which is sorted because reverse neighbours
rank below the key and forward ones above it.

Delta-BiGJoin reads some relations as the index was before the current update batch: the plan's
rel_view[level, r] (CURRENT or OLD) is handed to `list_ranges`, which reads that view's pair of change
rows. Nothing else in the kernels depends on versions, and a static index's changes are empty in
both views. (Handing the kernels one partition object per view instead, picked per lookup, cost
BiGJoin 15% more kernel time on clique4, rmat-16: 80 s against 70 s, paired against cb1aefa.)

A lookup is a binary search, so a probe into a hub's list costs log(degree), never a scan, and a
prefix's count is the size of the sub-range its order constraints leave (above/below earlier values).
Intersections use csr's adaptive kernel, the one local-gj uses: merge, or gallop the smaller side."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from implementations.gj.constants import FORWARD, INT32_MAX, REVERSE
from implementations.gj.csr import contains, gallop, intersect, lower_bound
from implementations.gj.keys import owner
from implementations.gj.views import as_readonly


class Lists(NamedTuple):
    """Sorted keys with, per key, a sorted forward list (offsets row 0) and a sorted reverse list (row 1);
    `slots[k]` is key k's position among the keys (-1 if absent, as is every k past its end): a lookup
    is one read, not a binary search over the keys (which cost about 200 ns a lookup on R-MAT 18)."""

    keys: np.ndarray
    offsets: np.ndarray
    forward: np.ndarray
    reverse: np.ndarray
    slots: np.ndarray

    @classmethod
    def of(cls, keys: np.ndarray, offsets: np.ndarray, forward: np.ndarray, reverse: np.ndarray) -> Lists:
        """The lists with their slot table (read-only, as the kernels read everything)."""
        slots = np.full(int(keys[-1]) + 1 if len(keys) else 0, -1, dtype=np.int32)
        slots[np.asarray(keys, dtype=np.int64)] = np.arange(len(keys), dtype=np.int32)
        slots.setflags(write=False)
        return cls(keys, offsets, forward, reverse, slots)


class Changes(NamedTuple):
    """Sorted keys with, per key, sorted changed values of its forward and reverse lists and their signs,
    at offsets rows 2 * view (forward) and 2 * view + 1 (reverse): view CURRENT, the changes up to the
    current batch, and view OLD, those before it."""

    keys: np.ndarray
    offsets: np.ndarray
    forward: np.ndarray
    reverse: np.ndarray
    forward_sign: np.ndarray
    reverse_sign: np.ndarray
    slots: np.ndarray  # as Lists.slots: which keys have changes is one read, not a binary search

    @classmethod
    def of(cls, keys, offsets, forward, reverse, forward_sign, reverse_sign) -> Changes:
        slots = Lists.of(keys, offsets, forward, reverse).slots
        return cls(keys, offsets, forward, reverse, forward_sign, reverse_sign, slots)


class IndexPartition(NamedTuple):
    """What one worker holds of an index: its lists and the changes to them."""

    lists: Lists
    changes: Changes


class Span(NamedTuple):
    """One direction of a key's list within a value range: base values at [base_start, base_end),
    changes at [change_start, change_end), `size` values in all."""

    base_start: int
    base_end: int
    change_start: int
    change_end: int
    size: int


class ListSpan(NamedTuple):
    """A key's list within a value range: the reverse part (values below the key) then the forward part."""

    reverse: Span
    forward: Span


@njit(cache=True, inline="always")
def unchanged(ix, k):
    """Whether key k's lists have no changes (in any view): then its base lists are its lists."""
    slots = ix.changes.slots
    return k >= len(slots) or slots[k] < 0


@njit(cache=True, inline="always")
def value_bounds(level, prefix, i, above, below):
    """Inclusive [lo, hi] that the order constraints allow at position `level` for prefix i."""
    lo, hi = 0, INT32_MAX
    for q in range(level):
        if above[level, q]:
            lo = max(lo, prefix[i, q] + 1)
        if below[level, q]:
            hi = min(hi, prefix[i, q] - 1)
    return lo, hi


@njit(cache=True)
def _slot_bounds(slots, offsets, values, row, k, lo, hi):
    """Positions [start, end) of the values in [lo, hi] of row `row` of key k (empty if k is absent),
    of the base lists or of the changes, by their slot table."""
    if k >= len(slots) or slots[k] < 0:
        return 0, 0
    s = slots[k]
    a, b = offsets[row, s], offsets[row, s + 1]
    start = a if lo <= 0 else lower_bound(values, a, b, lo)
    return start, b if hi >= INT32_MAX else lower_bound(values, start, b, hi + 1)


@njit(cache=True)
def _signed(sign, start, end):
    total = 0
    for i in range(start, end):
        total += sign[i]
    return total


@njit(cache=True)
def list_ranges(ix, view, kind, k, lo, hi):
    """k's list of relation `kind` in index view `view`, restricted to [lo, hi], as a ListSpan."""
    lists, changes = ix.lists, ix.changes
    static = unchanged(ix, k)  # no change lookups for a key without changes
    rbs = rbe = rcs = rce = fbs = fbe = fcs = fce = nr = nf = 0
    if lo <= hi:
        if kind != FORWARD:
            rbs, rbe = _slot_bounds(lists.slots, lists.offsets, lists.reverse, 1, k, lo, hi)
            nr = rbe - rbs
            if not static:
                rcs, rce = _slot_bounds(changes.slots, changes.offsets, changes.reverse, 2 * view + 1, k, lo, hi)
                nr += _signed(changes.reverse_sign, rcs, rce)
        if kind != REVERSE:
            fbs, fbe = _slot_bounds(lists.slots, lists.offsets, lists.forward, 0, k, lo, hi)
            nf = fbe - fbs
            if not static:
                fcs, fce = _slot_bounds(changes.slots, changes.offsets, changes.forward, 2 * view, k, lo, hi)
                nf += _signed(changes.forward_sign, fcs, fce)
    return ListSpan(Span(rbs, rbe, rcs, rce, nr), Span(fbs, fbe, fcs, fce, nf))


@njit(cache=True)
def _emit(values, changes, sign, span, first, last, t, out, w, prefix, i, level, differ, need_loop, loops, filtered):
    """Walk one part of a list (base values merged with changes, at `span`) from position t, writing the
    entries at positions [first, last) that pass the inequality and self-loop filters (`filtered`: the
    level has any). Returns (w, t)."""
    bs, be, cs, ce = span.base_start, span.base_end, span.change_start, span.change_end
    a = bs
    for b in range(cs, ce):  # the base values below each change as one run, then the change
        c = changes[b]
        stop = lower_bound(values, a, be, c)
        w, t = _run(values, a, stop, t, first, last, out, w, prefix, i, level, differ, need_loop, loops, filtered)
        a = stop
        if t >= last:
            return w, t
        if sign[b] < 0:  # a removed base value
            if a < be and values[a] == c:
                a += 1
        else:
            if t >= first:
                w = _keep(c, out, w, prefix, i, level, differ, need_loop, loops) if filtered else _put(c, out, w)
            t += 1
    return _run(values, a, be, t, first, last, out, w, prefix, i, level, differ, need_loop, loops, filtered)


@njit(cache=True, inline="always")
def _put(c, out, w):
    out[w] = c
    return w + 1


@njit(cache=True, inline="always")
def _run(values, a, stop, t, first, last, out, w, prefix, i, level, differ, need_loop, loops, filtered):
    """Base values [a, stop), at list positions t.., those at [first, last) written (filtered) to out[w:]."""
    n = stop - a
    if not filtered:  # a plain copy: with a _keep call per candidate, propose took 8 of 14 kernel-s (rmat-18)
        for pos in range(max(first - t, 0), min(last - t, n)):
            out[w] = values[a + pos]
            w += 1
        return w, t + n
    for pos in range(max(first - t, 0), min(last - t, n)):
        w = _keep(values[a + pos], out, w, prefix, i, level, differ, need_loop, loops)
    return w, t + n


@njit(cache=True)
def admissible(c, prefix, i, level, differ, need_loop, loops):
    """Whether candidate c may follow prefix i: it differs from the values it must differ from and,
    if the level needs one, has a self-loop. (The order constraints are value_bounds'.)"""
    for q in range(level):
        if differ[level, q] and c == prefix[i, q]:
            return False
    return not need_loop or contains(loops, 0, len(loops), c)


@njit(cache=True)
def count_differing(values, a, b, level, prefix, i, differ):
    """How many of values[a:b] prefix i may take at `level`: all of them less each distinct value of
    the prefix that they must differ from and that is among them (a bound search each)."""
    n = b - a
    for q in range(level):
        if not differ[level, q]:
            continue
        seen = False
        for p in range(q):
            seen = seen or (differ[level, p] and prefix[i, p] == prefix[i, q])
        if not seen and contains(values, a, b, prefix[i, q]):
            n -= 1
    return max(0, n)


@njit(cache=True)
def _keep(c, out, w, prefix, i, level, differ, need_loop, loops):
    if admissible(c, prefix, i, level, differ, need_loop, loops):
        out[w] = c
        w += 1
    return w


@njit(cache=True)
def filter_candidates(level, prefix, item, values, above, below, differ, need_loop, loops):
    """The one filter of candidates outside propose (BiGJoin-S's resolved values, Delta-BiGJoin's seeds):
    values[t] extends prefix item[t] if value_bounds allow it and it is admissible."""
    keep = np.zeros(len(values), dtype=np.bool_)
    bounds_of, lo, hi = -1, 0, INT32_MAX
    for t in range(len(values)):
        i, c = item[t], values[t]
        if i != bounds_of:  # a prefix's candidates come together: its bounds once per run of them
            bounds_of, (lo, hi) = i, value_bounds(level, prefix, i, above, below)
        keep[t] = lo <= c <= hi and admissible(c, prefix, i, level, differ, need_loop, loops)
    return keep


@njit(cache=True)
def count_items(p, workers, ix, level, prefix, mask, min_rel, min_count, rel_count, rel_pos, rel_kind, rel_view, above, below):
    """Count: for every relation still in `mask` whose key this worker owns, look up the number of
    extensions and keep the smallest (ties to the lower relation). Returns the number of lookups."""
    lookups = 0
    for i in range(prefix.shape[0]):
        mk = mask[i]
        if mk == 0:
            continue
        lo, hi = value_bounds(level, prefix, i, above, below)
        for r in range(rel_count[level]):
            if mk & (1 << r):
                k = prefix[i, rel_pos[level, r]]
                if owner(k, workers) != p:
                    continue
                span = list_ranges(ix, rel_view[level, r], rel_kind[level, r], k, lo, hi)
                c = span.reverse.size + span.forward.size
                lookups += 1
                if c < min_count[i] or (c == min_count[i] and r < min_rel[i]):
                    min_count[i], min_rel[i] = c, r
                mk &= ~(1 << r)
        mask[i] = mk
    return lookups


@njit(cache=True)
def propose_items(
    p, workers, ix, loops, level, prefix, min_rel, first, last, rel_pos, rel_kind, rel_view, above, below, differ, loop
):
    """Propose: positions [first, last) of each prefix's smallest list, minus candidates that an
    inequality or a required self-loop rules out. Returns (lengths, candidates)."""
    n = prefix.shape[0]
    lengths = np.zeros(n, dtype=np.int32)
    out = np.empty(max(0, (last - first).sum()), dtype=np.int32)
    w = 0
    filtered = loop[level]
    for q in range(level):
        filtered = filtered or differ[level, q]
    for i in range(n):
        r = min_rel[i]
        k = prefix[i, rel_pos[level, r]]
        if owner(k, workers) != p:
            raise ValueError("a prefix is queued away from its proposing relation's worker")
        lo, hi = value_bounds(level, prefix, i, above, below)
        span = list_ranges(ix, rel_view[level, r], rel_kind[level, r], k, lo, hi)
        lists, changes = ix.lists, ix.changes
        start = w
        w, _t = _emit(
            lists.reverse,
            changes.reverse,
            changes.reverse_sign,
            span.reverse,
            first[i],
            last[i],
            0,
            out,
            w,
            prefix,
            i,
            level,
            differ,
            loop[level],
            loops,
            filtered,
        )
        w, _t = _emit(
            lists.forward,
            changes.forward,
            changes.forward_sign,
            span.forward,
            first[i],
            last[i],
            span.reverse.size,
            out,
            w,
            prefix,
            i,
            level,
            differ,
            loop[level],
            loops,
            filtered,
        )
        lengths[i] = w - start
    return lengths, out[:w]


@njit(cache=True)
def _narrow_part(values, changes, sign, span, cands, src, n, out, dst, store, work):
    """cands[src:src+n] ∩ one part of a list (at `span`), written to out[dst:] if `store` (out may be
    cands when dst <= src), else only counted: the adaptive intersection when the key has no changes;
    with a few, that intersection corrected by each change (`_patched`); with more, one pass over the
    sorted candidates with a galloping cursor in the changes and one in the base."""
    bs, be, cs, ce = span.base_start, span.base_end, span.change_start, span.change_end
    if cs == ce:
        return intersect(cands, src, src + n, values, bs, be, out, dst, store, work)
    if ce - cs <= FEW_CHANGES:
        return _patched(values, changes, sign, span, cands, src, n, out, dst, store, work)
    w = 0
    a, b = bs, cs
    for t in range(src, src + n):
        c = cands[t]
        b = gallop(changes, b, ce, c)
        if b < ce and changes[b] == c:
            member = sign[b] > 0
        else:
            a = gallop(values, a, be, c)
            member = a < be and values[a] == c
        if member:
            if store:
                out[dst + w] = c
            w += 1
    work[1] += n
    return w


FEW_CHANGES = 4  # a key's changes in one value range, at most, that `_patched` applies one by one


@njit(cache=True)
def _patched(values, changes, sign, span, cands, src, n, out, dst, store, work):
    """`_narrow_part` for a list with a few changes: the base's intersection, then each change applied
    to it. Changes are net against the base: a removed value is in the base, an added one is not."""
    bs, be, cs, ce = span.base_start, span.base_end, span.change_start, span.change_end
    hit = 0  # bit b - cs: change b is a candidate; read before the intersection may overwrite cands
    for b in range(cs, ce):
        if contains(cands, src, src + n, changes[b]):
            hit |= 1 << (b - cs)
    w = intersect(cands, src, src + n, values, bs, be, out, dst, store, work)
    for b in range(cs, ce):
        if not hit & (1 << (b - cs)):
            continue
        c = changes[b]
        if not store:
            w += 1 if sign[b] > 0 else -1
        elif sign[b] > 0:  # insert c in order
            at = lower_bound(out, dst, dst + w, c)
            for t in range(dst + w, at, -1):
                out[t] = out[t - 1]
            out[at] = c
            w += 1
        else:  # c is among the base's matches: take it out
            at = lower_bound(out, dst, dst + w, c)
            for t in range(at, dst + w - 1):
                out[t] = out[t + 1]
            w -= 1
    return w


@njit(cache=True)
def narrow(ix, span, kind, k, cands, src, n, out, dst, work, store=True):
    """cands[src:src+n] ∩ k's list (its ListSpan from list_ranges), written to out[dst:] (out may be
    cands itself when dst <= src), or only counted without `store`. BOTH is reverse ++ forward split
    at k, so the candidates below k meet the reverse part, those above it the forward part. Returns
    how many were kept."""
    lists, changes = ix.lists, ix.changes
    if kind == FORWARD:
        return _narrow_part(
            lists.forward, changes.forward, changes.forward_sign, span.forward, cands, src, n, out, dst, store, work
        )
    if kind == REVERSE:
        return _narrow_part(
            lists.reverse, changes.reverse, changes.reverse_sign, span.reverse, cands, src, n, out, dst, store, work
        )
    split = lower_bound(cands, src, src + n, k)
    w = _narrow_part(
        lists.reverse, changes.reverse, changes.reverse_sign, span.reverse, cands, src, split - src, out, dst, store, work
    )
    return w + _narrow_part(
        lists.forward,
        changes.forward,
        changes.forward_sign,
        span.forward,
        cands,
        split,
        src + n - split,
        out,
        dst + w,
        store,
        work,
    )


@njit(cache=True)
def intersect_items(p, workers, ix, level, prefix, mask, lengths, values, out, rel_count, rel_pos, rel_kind, rel_view):
    """Intersect: narrow each item's candidates (its `lengths[i]` values, in order in `values`) by every
    relation in `mask` whose key this worker owns, with the adaptive intersection of csr (merge, or
    gallop when one side is much smaller). The survivors go to `out`, compacted (out may be values
    itself); lengths and mask are updated in place. Returns (kept, probes): a probe is a candidate
    tested against one relation, so a candidate one relation rejects is not probed by the next (as GJ
    counts them)."""
    read = 0
    write = 0
    probes = 0
    work = np.zeros(2, dtype=np.int64)
    for i in range(prefix.shape[0]):
        n = lengths[i]
        mk = mask[i]
        kept = n
        local = 0
        for r in range(rel_count[level]):
            k = prefix[i, rel_pos[level, r]]
            if mk & (1 << r) and owner(k, workers) == p:
                span = list_ranges(ix, rel_view[level, r], rel_kind[level, r], k, 0, INT32_MAX)
                probes += kept
                if local == 0:
                    kept = narrow(ix, span, rel_kind[level, r], k, as_readonly(values), read, kept, out, write, work)
                else:
                    kept = narrow(ix, span, rel_kind[level, r], k, as_readonly(out), write, kept, out, write, work)
                local |= 1 << r
        if local == 0:  # no local relation: the candidates move unchanged
            for t in range(n):
                out[write + t] = values[read + t]
        read += n
        write += kept
        lengths[i] = kept
        mask[i] = mk & ~local
    return write, probes


@njit(cache=True)
def next_owner(workers, level, prefix, mask, min_rel, rel_pos):
    """Where each item goes next: the owner of its lowest pending relation's key or, with nothing
    pending, of its proposing relation's key (min_rel < 0: no proposer yet)."""
    dest = np.empty(prefix.shape[0], dtype=np.int64)
    for i in range(prefix.shape[0]):
        mk = mask[i]
        if mk != 0:
            r = 0
            while not (mk & (1 << r)):
                r += 1
        else:
            r = min_rel[i]
        dest[i] = owner(prefix[i, rel_pos[level, r]], workers) if r >= 0 else -1
    return dest


@njit(cache=True)
def gather_lists(lengths, values, order):
    """The candidate lists of items `order`, concatenated in that order."""
    starts = np.zeros(len(lengths) + 1, dtype=np.int64)
    for i in range(len(lengths)):
        starts[i + 1] = starts[i] + lengths[i]
    total = 0
    for i in order:
        total += lengths[i]
    out = np.empty(total, dtype=np.int32)
    w = 0
    for i in order:
        for t in range(starts[i], starts[i + 1]):
            out[w] = values[t]
            w += 1
    return out
