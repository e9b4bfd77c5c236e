"""Numba kernels of `bigjoin-carry`: families, their windows and their expansion.

A family at a carried level L is a parent prefix p (positions 0..L-2), the parent's complete
candidate set C for position L-1 (sorted), and the members: positions in C of the values c this
family extends, each into the L-prefix (p, c). Its row is (p, len(C), members, work, segment), its
values the segment C ++ members. A member's carried candidates for position L are C from its floor
(past c itself when position L must exceed it) to its ceiling; its work, the upper bound of that,
is len(C) - t - 1 for the member at position t (or len(C))."""

from __future__ import annotations

import numpy as np
from numba import njit

from implementations.extension.dataflow_kernels import (
    _apply_local,
    _local_relations,
    copy_then_narrow,
    level_filtered,
    level_lookups,
)
from implementations.gj.constants import INT32_MAX
from implementations.gj.csr import lower_bound
from implementations.gj.extension_kernels import value_bounds
from implementations.gj.keys import owner


@njit(cache=True, inline="always")
def _member_work(clen, t, after):
    return clen - t - 1 if after else clen


@njit(cache=True)
def _first_extra(extra_mask):
    r = 0
    while extra_mask and not (extra_mask & (1 << r)):
        r += 1
    return r


@njit(cache=True)
def make_families(p, workers, level, rows, values, take, extra_mask, rel_pos, after):
    """Families for level+1 from finished candidate rows of `level` (prefix, mask, length; their
    values each a complete candidate set), one per (row, destination): a member goes to the owner of
    its first extra lookup's key (this worker when the level has none; `extra_mask` and `rel_pos` as
    a `Lookups` table's). `after`: position level+1 must exceed position level. Returns (family rows,
    segments, destination of each)."""
    n = rows.shape[0]
    nxt = level + 1
    r0 = _first_extra(extra_mask)
    by_member = extra_mask != 0 and rel_pos[nxt, r0] == level  # the key is the member itself
    counts = np.zeros(workers, dtype=np.int64)
    families = 0
    seg_total = 0
    t = 0
    for i in range(n):  # sizes first
        length = rows[i, level + 1]
        if take[i] and length > 0:
            counts[:] = 0
            for s in range(t, t + length):
                q = p if extra_mask == 0 else owner(values[s] if by_member else rows[i, rel_pos[nxt, r0]], workers)
                counts[q] += 1
            for q in range(workers):
                if counts[q]:
                    families += 1
                    seg_total += length + counts[q]
        t += length
    out = np.empty((families, level + 4), dtype=np.int32)
    seg = np.empty(seg_total, dtype=np.int32)
    dest = np.empty(families, dtype=np.int64)
    f = w = t = 0
    for i in range(n):
        length = rows[i, level + 1]
        if take[i] and length > 0:
            for q in range(workers):
                members = 0
                work = 0
                for s in range(t, t + length):
                    here = p if extra_mask == 0 else owner(values[s] if by_member else rows[i, rel_pos[nxt, r0]], workers)
                    if here == q:
                        seg[w + length + members] = s - t
                        members += 1
                        work += _member_work(length, s - t, after)
                if members == 0:
                    continue
                for s in range(length):
                    seg[w + s] = values[t + s]
                for c in range(level):
                    out[f, c] = rows[i, c]
                out[f, level], out[f, level + 1], out[f, level + 2], out[f, level + 3] = length, members, work, length + members
                dest[f] = q
                f += 1
                w += length + members
        t += length
    return out, seg, dest


@njit(cache=True)
def family_window(rows, seg, level, skip, room, per_row, per_value, counts_bytes, after, started):
    """Whole members of queued families (rows of `level`, width level+3) from work position `skip`,
    within `room` (bytes; proposals when not counts_bytes); the window's first member (none taken yet
    and not `started`) is taken even past it.
    Returns (first member, last member, segment start) per family, the work taken and the room left."""
    n = rows.shape[0]
    first = np.zeros(n, dtype=np.int64)
    last = np.zeros(n, dtype=np.int64)
    start = np.zeros(n, dtype=np.int64)
    at = 0
    taken = 0
    seg_at = 0
    full = False
    for f in range(n):
        clen, members, seglen = rows[f, level - 1], rows[f, level], rows[f, level + 2]
        start[f] = seg_at
        seg_at += seglen
        first[f] = last[f] = members
        if full:
            continue
        opened = False
        for m in range(members):
            work = _member_work(clen, seg[start[f] + clen + m], after)
            if at + work <= skip:
                at += work
                continue
            cost = per_value * work + (0 if opened else (per_row + 4 * seglen if counts_bytes else 0))
            if cost > room and (taken > 0 or started):
                full = True
                break
            if not opened:
                first[f] = m
                opened = True
            last[f] = m + 1
            room -= cost
            taken += work
            at += work
        if not opened:
            first[f] = last[f] = members
    return first, last, start, taken, room


def expand_families(p, workers, ix, loops, level, rows, seg, start, first, last, extra_mask, plan, keep_done):
    """The carried level's Propose: members [first, last) of each family, each with its carried
    candidates (the family's set from its floor to its ceiling, filtered like a proposal) narrowed at
    once by every extra relation this worker owns. Returns (candidate rows (prefix, mask, length),
    values, proposals, probes, counted) as `propose_local` does. `extra_mask` is a `Lookups` mask:
    extra anti-relations are subtracted where extra relations intersect (a level without them
    compiled without the anti-intersect, as in `propose_local`)."""
    look = level_lookups(plan, level)
    return _expand_families(p, workers, ix, loops, level, rows, seg, start, first, last, extra_mask, plan, keep_done, look)


@njit(cache=True)
def _expand_families(p, workers, ix, loops, level, rows, seg, start, first, last, extra_mask, plan, keep_done, look):
    n = 0
    bound = 0
    after = plan.above[level, level - 1]
    for f in range(rows.shape[0]):
        clen = rows[f, level - 1]
        n += last[f] - first[f]
        for m in range(first[f], last[f]):
            bound += _member_work(clen, seg[start[f] + clen + m], after)
    cand = np.empty((n, level + 2), dtype=np.int32)
    out = np.empty(bound, dtype=np.int32)
    work = np.zeros(2, dtype=np.int64)
    filtered = level_filtered(plan, level)
    rel_count, rel_pos, rel_kind, rel_view = plan.rel_count, plan.rel_pos, plan.rel_kind, plan.rel_view
    if look is None:
        look_total, look_pos = rel_count, rel_pos
    else:
        look_total, look_pos = look.total, look.pos
    above, below = plan.above, plan.below
    i = w = proposals = probes = counted = stored_done = 0
    for f in range(rows.shape[0]):
        clen, s0 = rows[f, level - 1], start[f]
        for m in range(first[f], last[f]):
            t = seg[s0 + clen + m]
            for c in range(level - 1):
                cand[i, c] = rows[f, c]
            cand[i, level - 1] = seg[s0 + t]
            lo, hi = value_bounds(level, cand, i, above, below)
            a = lower_bound(seg, s0 + t + 1 if after else s0, s0 + clen, lo)
            b = s0 + clen if hi >= INT32_MAX else lower_bound(seg, a, s0 + clen, hi + 1)
            proposals += b - a
            local = _local_relations(p, workers, level, cand, i, extra_mask, look_total, look_pos)
            cand[i, level] = extra_mask & ~local
            store = cand[i, level] != 0 or stored_done < keep_done
            if local and not filtered:  # straight from the family's set
                kept, tested = _apply_local(
                    ix,
                    plan,
                    look,
                    level,
                    cand,
                    i,
                    local,
                    rel_count,
                    rel_kind,
                    rel_view,
                    rel_pos,
                    seg,
                    a,
                    b - a,
                    out,
                    w,
                    store,
                    work,
                )
            else:
                kept, tested = copy_then_narrow(  # int64s: a literal 0 while numba types the loop compiles it twice
                    ix,
                    plan,
                    look,
                    loops,
                    level,
                    cand,
                    np.int64(i),
                    np.int64(local),
                    seg,
                    a,
                    b,
                    out,
                    np.int64(w),
                    filtered,
                    store,
                    work,
                )
            probes += tested
            if store:
                cand[i, level + 1] = kept
                w += kept
                stored_done += kept if cand[i, level] == 0 else 0
            else:
                cand[i, level + 1] = 0
                counted += kept
            i += 1
    return cand, out[:w], proposals, probes, counted
