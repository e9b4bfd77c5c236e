"""Numba kernels of the pipelined BiGJoin dataflow (`dataflow`) beyond the shared lookups of
`extension_kernels`: turning agreed candidates into the next level's prefix rows, and writing items
straight into the blobs of their destinations (one write per value on its way out).

Items travel as int32 rows: a candidate row is (prefix, mask, length) with its `length` values in a
separate column; a prefix row is (prefix, mask, min_rel, min_count). A candidate row's mask names its
pending lookups in the level's `Lookups`: its relations, then its anti-relations (JoinSpec.anti),
which subtract their list (`csr.difference`) where a relation intersects; a prefix row's mask names
relations only (an anti-relation never counts or proposes)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from implementations.gj.blocks import (
    RELATION_MASK,
    block_entries,
    block_of,
    block_values,
    everywhere,
    holder,
    holds,
    piece_block,
    piece_code,
    split_count,
    split_row,
)
from implementations.gj.constants import BOTH, FORWARD, INT32_MAX, REVERSE
from implementations.gj.csr import difference, intersect, lower_bound
from implementations.gj.extension_kernels import (
    Span,
    _emit,
    _narrow_part,
    _signed,
    _slot_bounds,
    admissible,
    count_differing,
    list_ranges,
    narrow,
    unchanged,
    value_bounds,
)
from implementations.gj.keys import owner
from implementations.gj.views import as_readonly

FAN_OUT = -2  # count_rows' destination for a prefix proposing from a split list: `fan_out`


class Lookups(NamedTuple):
    """Per level, what a candidate is checked against: its relations (columns 0 .. rel_count - 1,
    as the plan's) then its anti-relations, with the key position, index kind and view of each. Bit r
    of a candidate row's mask is column r; bits from rel_count on are anti-relations."""

    total: np.ndarray  # (m,) relations and anti-relations of each level
    pos: np.ndarray
    kind: np.ndarray
    view: np.ndarray


@njit(cache=True)
def lookups(plan):
    """The plan's relations and anti-relations as one `Lookups` table (built per kernel call: a few
    hundred bytes, so its kernels' signatures stay those of the plan alone)."""
    m = plan.rel_count.shape[0]
    width = plan.rel_pos.shape[1] + plan.anti_pos.shape[1]
    total = plan.rel_count + plan.anti_count
    pos = np.zeros((m, width), dtype=np.int64)
    kind = np.zeros((m, width), dtype=np.int64)
    view = np.zeros((m, width), dtype=np.int64)
    for j in range(m):
        n, a = plan.rel_count[j], plan.anti_count[j]
        pos[j, :n], pos[j, n : n + a] = plan.rel_pos[j, :n], plan.anti_pos[j, :a]
        kind[j, :n], kind[j, n : n + a] = plan.rel_kind[j, :n], plan.anti_kind[j, :a]
        view[j, :n], view[j, n : n + a] = plan.rel_view[j, :n], plan.anti_view[j, :a]
    return Lookups(total, pos, kind, view)


def level_lookups(plan, level: int) -> Lookups | None:
    """`lookups(plan)` at a level with anti-relations, None at one without. Chosen here, outside the
    kernels, so that a kernel's anti-intersect compiles only for a pattern that has an anti-edge:
    a session whose patterns have none never compiles it (`warm`'s `/anti` families do)."""
    return lookups(plan) if plan.anti_count[level] else None


@njit(cache=True)
def extend_rows(rows, values, level, take, mask):
    """The (level+1)-prefix rows (prefix, value, mask, -1, INT32_MAX) of every value of the candidate
    rows `take` selects, in order: each a fresh prefix to be counted against `mask`'s relations."""
    n = rows.shape[0]
    total = 0
    for i in range(n):
        if take[i]:
            total += rows[i, level + 1]
    out = np.empty((total, level + 4), dtype=np.int32)
    w = 0
    t = 0
    for i in range(n):
        length = rows[i, level + 1]
        if take[i]:
            for v in range(t, t + length):
                for q in range(level):
                    out[w, q] = rows[i, q]
                out[w, level] = values[v]
                out[w, level + 1] = mask
                out[w, level + 2] = -1
                out[w, level + 3] = INT32_MAX
                w += 1
        t += length
    return out


@njit(cache=True)
def destination_sizes(dest, rows, length_col, workers):
    """Per destination: rows and values bound for it (dest < 0: not sent). length_col < 0: no values."""
    items = np.zeros(workers, dtype=np.int64)
    vals = np.zeros(workers, dtype=np.int64)
    for i in range(rows.shape[0]):
        q = dest[i]
        if q >= 0:
            items[q] += 1
            if length_col >= 0:
                vals[q] += rows[i, length_col]
    return items, vals


@njit(cache=True)
def scatter_rows(dest, rows, values, length_col, out, row_at, value_at):
    """Copy every row with dest[i] >= 0 (and its values) into `out`, an int32 view of the outgoing
    blobs: destination q's rows start at out[row_at[q]], its values at out[value_at[q]]."""
    width = rows.shape[1]
    r = row_at.copy()
    v = value_at.copy()
    t = 0
    for i in range(rows.shape[0]):
        length = rows[i, length_col] if length_col >= 0 else 0
        q = dest[i]
        if q >= 0:
            at = r[q]
            for c in range(width):
                out[at + c] = rows[i, c]
            r[q] = at + width
            at = v[q]
            for s in range(length):
                out[at + s] = values[t + s]
            v[q] = at + length
        t += length


@njit(cache=True)
def split_ranges(first, last, most):
    """Cut each [first, last) into pieces of at most `most`: (row of each piece, its first, its last)."""
    pieces = 0
    for i in range(len(first)):
        pieces += max(1, (last[i] - first[i] + most - 1) // most)
    row = np.empty(pieces, dtype=np.int64)
    lo = np.empty(pieces, dtype=np.int64)
    hi = np.empty(pieces, dtype=np.int64)
    w = 0
    for i in range(len(first)):
        a = first[i]
        while True:
            b = min(last[i], a + most)
            row[w], lo[w], hi[w] = i, a, b
            w += 1
            a = b
            if a >= last[i]:
                break
    return row, lo, hi


@njit(cache=True, inline="always")
def _local_relations(p, workers, level, prefix, i, pending, rel_count, rel_pos):
    """The pending relations (a bit mask) whose key worker p owns. (The per-prefix helpers take the
    plan's arrays, not the plan tuple: reading a tuple's arrays in those loops cost a third more.)"""
    local = 0
    for r in range(rel_count[level]):
        if pending & (1 << r) and owner(prefix[i, rel_pos[level, r]], workers) == p:
            local |= 1 << r
    return local


@njit(cache=True)
def _held_relations(blocks, p, workers, level, prefix, i, pending, rel_count, rel_pos, rel_kind, lo, hi):
    """`_local_relations` on lists in blocks: the pending relations whose list worker p holds for
    candidates in [lo, hi] (the whole list, or the block of a split one)."""
    local = 0
    for r in range(rel_count[level]):
        if pending & (1 << r) and holds(blocks, p, workers, prefix[i, rel_pos[level, r]], rel_kind[level, r], lo, hi):
            local |= 1 << r
    return local


# ---------------------------------------------------------------- an index without changes
# The generic lookups (`list_ranges`, `narrow`) also walk Delta-BiGJoin's changes; on a static index
# these plain-integer versions do the same work for about half the time per prefix (R-MAT 18, triangle).


@njit(cache=True, inline="always")
def _part(lists, row, values, k, lo, hi):
    """[start, end) of key k's list in `row` (0 forward, 1 reverse) within values [lo, hi]."""
    if k >= len(lists.slots) or lists.slots[k] < 0 or lo > hi:
        return 0, 0
    s = lists.slots[k]
    a, b = lists.offsets[row, s], lists.offsets[row, s + 1]
    if lo > 0:
        a = lower_bound(values, a, b, lo)
    if hi < INT32_MAX:
        b = lower_bound(values, a, b, hi + 1)
    return a, b


@njit(cache=True, inline="always")
def _static_ranges(lists, kind, k, lo, hi):
    """Key k's list of relation `kind` within [lo, hi] as (reverse start, end, forward start, end)."""
    ra = rb = fa = fb = 0
    if kind != FORWARD:
        ra, rb = _part(lists, 1, lists.reverse, k, lo, hi)
    if kind != REVERSE:
        fa, fb = _part(lists, 0, lists.forward, k, lo, hi)
    return ra, rb, fa, fb


@njit(cache=True)
def _static_narrow_both(lists, k, cands, src, n, out, dst, store, work):
    """`_static_narrow` of a BOTH relation: the candidates below k meet the reverse list, those above
    it the forward one."""
    ra, rb, fa, fb = _static_ranges(lists, BOTH, k, 0, INT32_MAX)
    split = lower_bound(cands, src, src + n, k)
    w = intersect(cands, src, split, lists.reverse, ra, rb, out, dst, store, work)
    return w + intersect(cands, split, src + n, lists.forward, fa, fb, out, dst + w, store, work)


@njit(cache=True, inline="always")
def _static_narrow(lists, kind, k, cands, src, n, out, dst, store, work):
    """cands[src:src+n] ∩ key k's whole list of relation `kind`, into out[dst:] (or only counted).
    One call site of the intersection for FORWARD and REVERSE: every extra copy inlined into a
    per-prefix loop cost it time (clique5, R-MAT 14)."""
    if kind == BOTH:
        return _static_narrow_both(lists, k, as_readonly(cands), np.int64(src), np.int64(n), out, np.int64(dst), store, work)
    row = 0 if kind == FORWARD else 1
    values = lists.forward if kind == FORWARD else lists.reverse
    a, b = _part(lists, row, values, k, 0, INT32_MAX)
    src, dst = np.int64(src), np.int64(dst)
    return intersect(as_readonly(cands), src, src + n, values, a, b, out, dst, store, work)


@njit(cache=True, inline="always")
def _lowest(bits):
    r = 0
    while not (bits & (1 << r)):
        r += 1
    return r


@njit(cache=True, inline="always")
def _narrow_by(ix, kind, view, k, cands, src, n, out, dst, store, work):
    """cands[src:src+n] ∩ key k's list of relation `kind`, into out[dst:], on any index."""
    if unchanged(ix, k):
        return _static_narrow(ix.lists, kind, k, cands, src, n, out, dst, store, work)
    if kind == BOTH:
        span = list_ranges(ix, view, kind, k, 0, INT32_MAX)
        return narrow(ix, span, kind, k, as_readonly(cands), np.int64(src), np.int64(n), out, np.int64(dst), work, store)
    return _narrow_changed(ix, kind, view, k, cands, src, n, out, dst, store, work)


@njit(cache=True, inline="always")
def _changed_part(ix, kind, view, k, lo, hi):
    """A changed key's FORWARD or REVERSE list in view `view` within [lo, hi], as (base values, changed
    values, their signs, Span without its size): the changed-key paths hand that direction's arrays
    alone to their out-of-line calls. Handed the whole partition, every call copied its twelve arrays:
    a proposal on an overlay cost 2.55x one on its compacted index (triangle, R-MAT 18), now 1.7x."""
    lists, changes = ix.lists, ix.changes
    if kind == FORWARD:
        row, at, values, changed, sign = 0, 2 * view, lists.forward, changes.forward, changes.forward_sign
    else:
        row, at, values, changed, sign = 1, 2 * view + 1, lists.reverse, changes.reverse, changes.reverse_sign
    a, b = _slot_bounds(lists.slots, lists.offsets, values, row, k, lo, hi)
    cs, ce = _slot_bounds(changes.slots, changes.offsets, changed, at, k, lo, hi)
    return values, changed, sign, Span(a, b, cs, ce, 0)


@njit(cache=True, inline="always")
def _narrow_changed(ix, kind, view, k, cands, src, n, out, dst, store, work):
    """`_narrow_by` of a changed key's FORWARD or REVERSE list."""
    values, changed, sign, span = _changed_part(ix, kind, view, k, 0, INT32_MAX)
    src, n, dst = np.int64(src), np.int64(n), np.int64(dst)
    return _narrow_part(values, changed, sign, span, as_readonly(cands), src, n, out, dst, store, work)


@njit(cache=True)
def _narrow_each(ix, level, prefix, i, local, rel_kind, rel_view, rel_pos, cands, src, n, out, dst, store_last, work):
    """`_narrow_local` for several local relations or an index with changes (kept out of line)."""
    r = _lowest(local)
    local &= ~(1 << r)
    k = prefix[i, rel_pos[level, r]]
    kept = _narrow_by(ix, rel_kind[level, r], rel_view[level, r], k, cands, src, n, out, dst, store_last or local != 0, work)
    probes = n
    while local:  # the rest in place in out
        r = _lowest(local)
        local &= ~(1 << r)
        probes += kept
        k = prefix[i, rel_pos[level, r]]
        kept = _narrow_by(ix, rel_kind[level, r], rel_view[level, r], k, out, dst, kept, out, dst, store_last or local != 0, work)
    return kept, probes


@njit(cache=True, inline="always")
def _narrow_local(ix, level, prefix, i, local, rel_kind, rel_view, rel_pos, cands, src, n, out, dst, store_last, work):
    """cands[src:src+n] narrowed by each relation in `local` in turn, into out[dst:]; the last one only
    counts unless `store_last`. Returns (kept, probes). The common case, one local relation whose
    key has no changes, inline; the rest out of line (`_narrow_each`): a loop of inlined intersections in
    the per-prefix loop cost twice the time (clique5, R-MAT 14)."""
    if local == 0:
        return n, 0
    if local & (local - 1) == 0:
        r = _lowest(local)
        k = prefix[i, rel_pos[level, r]]
        if unchanged(ix, k):
            return _static_narrow(ix.lists, rel_kind[level, r], k, cands, src, n, out, dst, store_last, work), n
        if rel_kind[level, r] != BOTH:
            kept = _narrow_changed(
                ix,
                rel_kind[level, r],
                rel_view[level, r],
                k,
                cands,
                np.int64(src),
                np.int64(n),
                out,
                np.int64(dst),
                store_last,
                work,
            )
            return kept, n
    # np.int64: a literal 0 passed out of line would compile the callee once more (and all it calls)
    i, src, n, dst = np.int64(i), np.int64(src), np.int64(n), np.int64(dst)
    local, cands = np.int64(local), as_readonly(cands)
    return _narrow_each(ix, level, prefix, i, local, rel_kind, rel_view, rel_pos, cands, src, n, out, dst, store_last, work)


@njit(cache=True, inline="always")
def _apply_local(
    ix, plan, look, level, prefix, i, local, rel_count, rel_kind, rel_view, rel_pos, cands, src, n, out, dst, store_last, work
):
    """`_narrow_local` of a `Lookups` mask: with no local anti-relation exactly that, inline; else
    out of line (`_narrow_and_subtract`). `look` None: a level without anti-relations, whose
    kernels numba compiles without the anti-intersect (as a plain pattern's were before it)."""
    if look is None or local >> rel_count[level] == 0:
        return _narrow_local(ix, level, prefix, i, local, rel_kind, rel_view, rel_pos, cands, src, n, out, dst, store_last, work)
    i, src, n, dst = np.int64(i), np.int64(src), np.int64(n), np.int64(dst)
    return _narrow_and_subtract(ix, plan, level, prefix, i, np.int64(local), as_readonly(cands), src, n, out, dst, work)


@njit(cache=True)
def _narrow_and_subtract(ix, plan, level, prefix, i, local, cands, src, n, out, dst, work):
    """cands[src:src+n] narrowed by the local relations in `local` (a `Lookups` mask), then stripped
    of every value in each local anti-relation's list, into out[dst:]: relations first, since they
    only shrink what the anti-intersect must write. Always written (a survivor is; `csr.difference`).
    Returns (kept, probes): a candidate tested against an anti-relation is a probe, as against a relation."""
    relations = plan.rel_count[level]
    positive = local & ((1 << relations) - 1)
    anti = local >> relations
    a = _lowest(anti)
    anti &= ~(1 << a)
    k = prefix[i, plan.anti_pos[level, a]]
    written = as_readonly(out)  # narrowed in place: one compilation of `_subtract_by` for out and cands
    if positive:
        stored = np.bool_(True)  # not the literal True: a literal compiles every callee once more
        kept, probes = _narrow_local(
            ix, level, prefix, i, positive, plan.rel_kind, plan.rel_view, plan.rel_pos, cands, src, n, out, dst, stored, work
        )
        probes += kept
        kept = _subtract_by(ix, plan.anti_kind[level, a], plan.anti_view[level, a], k, written, dst, kept, out, dst, work)
    else:
        probes = n
        kept = _subtract_by(ix, plan.anti_kind[level, a], plan.anti_view[level, a], k, cands, src, n, out, dst, work)
    while anti:  # the rest in place in out
        a = _lowest(anti)
        anti &= ~(1 << a)
        probes += kept
        k = prefix[i, plan.anti_pos[level, a]]
        kept = _subtract_by(ix, plan.anti_kind[level, a], plan.anti_view[level, a], k, written, dst, kept, out, dst, work)
    return kept, probes


@njit(cache=True)
def _subtract_by(ix, kind, view, k, cands, src, n, out, dst, work):
    """cands[src:src+n] minus key k's list of relation `kind` (the anti-intersect), into out[dst:]
    (out may be cands when dst <= src). A BOTH list is split at k as `_static_narrow_both` splits it."""
    if not unchanged(ix, k):
        return _subtract_changed(ix, kind, view, k, cands, src, n, out, dst)
    lists = ix.lists
    if kind == BOTH:
        ra, rb, fa, fb = _static_ranges(lists, BOTH, k, 0, INT32_MAX)
        split = lower_bound(cands, src, src + n, k)
        w = difference(cands, src, split, lists.reverse, ra, rb, out, dst, work)
        return w + difference(cands, split, src + n, lists.forward, fa, fb, out, dst + w, work)
    values = lists.forward if kind == FORWARD else lists.reverse
    a, b = _part(lists, 0 if kind == FORWARD else 1, values, k, 0, INT32_MAX)
    return difference(cands, src, src + n, values, a, b, out, dst, work)


@njit(cache=True)
def _subtract_changed(ix, kind, view, k, cands, src, n, out, dst):
    """`_subtract_by` of a key with changes (a view of Delta-BiGJoin's versioned index): each
    candidate kept if the list in view `view` holds it nowhere, by `list_ranges` on its one value."""
    w = dst
    for t in range(src, src + n):
        c = cands[t]
        span = list_ranges(ix, view, kind, k, c, c)
        if span.reverse.size + span.forward.size == 0:
            out[w] = c
            w += 1
    return w - dst


@njit(cache=True)
def copy_then_narrow(ix, plan, look, loops, level, prefix, i, local, values, a, b, out, w, filtered, store, work):
    """values[a:b], filtered (an inequality, self-loop or label test per value), written to out[w:], then
    narrowed there by the `local` lookups: the paths kept out of the per-prefix loops' inline one."""
    end = w
    for t in range(a, b):
        c = values[t]
        if not filtered or admissible(c, prefix, i, level, plan.differ, plan.loop[level], loops):
            out[end] = c
            end += 1
    end = _keep_labelled(plan, level, out, w, end)
    return _narrow_written(ix, plan, look, level, prefix, i, local, out, w, end, store, work)


@njit(cache=True, inline="always")
def _narrow_written(ix, plan, look, level, prefix, i, local, out, start, end, store, work):
    """out[start:end], just written, narrowed in place by the `local` lookups (`Lookups` bits; `look`
    as in `_apply_local`). Returns (kept, probes)."""
    if local == 0:
        return end - start, 0
    # Plain int64s and a read-only view, whatever the caller's were: one compilation out of line.
    i, local, written, start, n = np.int64(i), np.int64(local), as_readonly(out), np.int64(start), np.int64(end - start)
    if look is not None and local >> plan.rel_count[level]:
        return _narrow_and_subtract(ix, plan, level, prefix, i, local, written, start, n, out, start, work)
    return _narrow_each(
        ix, level, prefix, i, local, plan.rel_kind, plan.rel_view, plan.rel_pos, written, start, n, out, start, store, work
    )


@njit(cache=True, inline="always")
def _propose_general(ix, plan, look, loops, level, prefix, i, r, first, last, local, lo, hi, filtered, out, w, store, work):
    """Prefix i's proposals [first, last) from relation r, written (filtered) to out[w:] and narrowed
    there by its `local` relations: a BOTH list (two parts), a filtered level, or an index with changes."""
    kind = plan.rel_kind[level, r]
    k = prefix[i, plan.rel_pos[level, r]]
    changes = ix.changes
    if kind != BOTH:
        values, changed, sign, span = _changed_part(ix, kind, plan.rel_view[level, r], k, lo, hi)
        end, _t = _emit(values, changed, sign, span, first, last, 0, out, w,
                        prefix, i, level, plan.differ, plan.loop[level], loops, filtered)  # fmt: skip
        end = _keep_labelled(plan, level, out, w, end)
        return _narrow_written(ix, plan, look, level, prefix, i, local, out, w, end, store, work)
    span = list_ranges(ix, plan.rel_view[level, r], kind, k, lo, hi)
    end, _t = _emit(ix.lists.reverse, changes.reverse, changes.reverse_sign, span.reverse, first, last, 0, out, w,
                    prefix, i, level, plan.differ, plan.loop[level], loops, filtered)  # fmt: skip
    end, _t = _emit(ix.lists.forward, changes.forward, changes.forward_sign, span.forward, first, last, span.reverse.size, out, end,
                    prefix, i, level, plan.differ, plan.loop[level], loops, filtered)  # fmt: skip
    end = _keep_labelled(plan, level, out, w, end)
    return _narrow_written(ix, plan, look, level, prefix, i, local, out, w, end, store, work)


@njit(cache=True, inline="always")
def _keep_labelled(plan, level, out, start, end):
    """out[start:end], just proposed, compacted to the values whose vertex carries the label the level
    requires (a rank without a label has -1), before any relation is looked up. Returns the new end."""
    wanted = plan.label[level]
    if wanted < 0:
        return end
    w = start
    for t in range(start, end):
        c = out[t]
        if plan.vertex_label[c] == wanted:
            out[w] = c
            w += 1
    return w


@njit(cache=True)
def _piece(blocks, p, workers, k, code, lo, hi):
    """Where a queued prefix proposing from key k's list is proposed, and its value bounds there: a
    piece (`code` names its block) at the block's holder, within the block's values; a whole list
    of a split key that every worker holds, here (p); else at k's owner."""
    h = split_row(blocks, k)
    if h < 0:
        return owner(k, workers), lo, hi
    block = piece_block(code)
    if block < 0:
        return p, lo, hi
    low, high = block_values(blocks, h, block)
    return holder(k, block, workers), max(lo, low), min(hi, high)


@njit(cache=True, inline="always")
def level_filtered(plan, level):
    """Whether a level's candidates need a per-value test: an inequality, a required self-loop or a
    vertex label."""
    filtered = plan.loop[level] or plan.label[level] >= 0
    for q in range(level):
        filtered = filtered or plan.differ[level, q]
    return filtered


@njit(cache=True)
def level_bounded(plan, level):
    """Whether a level's only per-value test is `differ` (no self-loop, no label): a prefix done there
    is counted from its list's length, less the values it must differ from that the list holds."""
    return not plan.loop[level] and plan.label[level] < 0


@njit(cache=True)
def _count_static(lists, kind, k, lo, hi, first, last, level, prefix, i, differ):
    """How many of positions [first, last) of key k's static list within [lo, hi] (a BOTH list: its
    reverse part, then its forward part) prefix i may take at `level` (`count_differing`)."""
    ra, rb, fa, fb = _static_ranges(lists, kind, k, lo, hi)
    below = rb - ra
    kept = count_differing(lists.reverse, ra + min(first, below), ra + min(last, below), level, prefix, i, differ)
    a, b = min(max(0, first - below), fb - fa), min(max(0, last - below), fb - fa)
    return kept + count_differing(lists.forward, fa + a, fa + b, level, prefix, i, differ)


@njit(cache=True)
def _proposal_room(ix, plan, level, first, last, keep_done, bounded):
    """Room for the values a propose call writes: every proposal, except at a last level read from one
    static list, where a prefix's values are written only while the sample (`keep_done`) is not full
    and the rest are counted where they are proposed (`_count_static`)."""
    total = max(0, (last - first).sum())
    one_list = level + 1 == plan.rel_count.shape[0] and plan.rel_count[level] == 1 and plan.anti_count[level] == 0
    if not (one_list and bounded and len(ix.changes.slots) == 0) or len(last) == 0:
        return total
    return min(total, keep_done + max(0, (last - first).max()))


def propose_local(p, workers, ix, loops, level, prefix, first, last, plan, keep_done, blocks):
    """Propose, then Intersect with every pending relation this worker owns, in one pass per queued
    prefix (its row: the prefix, at column level+1 its smallest relation): positions [first, last) of that list, narrowed by the local relations straight
    from the index (a candidate that one of them rejects is never written), then stripped of the
    local anti-relations' lists; the returned masks name the lookups left (`Lookups` bits). A prefix
    left with no pending relation is done: its values are written for the first `keep_done` of them (new prefixes,
    or sampled matches) and only counted after that. Returns (mask, lengths, values, proposals,
    probes, counted). The common case (a one-part list of a static index, no filter) runs inline;
    the rest out of line (`_propose_general`). `blocks`: the split lists' table (bigjoin-s), or None:
    numba then compiles the block paths away, so BiGJoin's loop is as it was (inlined into it,
    they cost BiGJoin a quarter more kernel time on triangles, R-MAT 18). So is the anti-intersect
    of a level without anti-relations (`_apply_local`)."""
    return _propose_local(p, workers, ix, loops, level, prefix, first, last, plan, keep_done, blocks, level_lookups(plan, level))


@njit(cache=True)
def _propose_local(p, workers, ix, loops, level, prefix, first, last, plan, keep_done, blocks, look):
    n = prefix.shape[0]
    mask = np.empty(n, dtype=np.int32)
    lengths = np.zeros(n, dtype=np.int32)
    filtered = level_filtered(plan, level)
    bounded = level_bounded(plan, level)
    out = np.empty(_proposal_room(ix, plan, level, first, last, keep_done, bounded), dtype=np.int32)
    work = np.zeros(2, dtype=np.int64)
    rel_count, rel_pos, rel_kind, rel_view = plan.rel_count, plan.rel_pos, plan.rel_kind, plan.rel_view
    if look is None:
        look_total, look_pos, look_kind = rel_count, rel_pos, rel_kind
    else:
        look_total, look_pos, look_kind = look.total, look.pos, look.kind
    above, below = plan.above, plan.below
    full = (1 << look_total[level]) - 1  # every relation and anti-relation
    w = proposals = probes = counted = stored_done = 0
    for i in range(n):
        r = prefix[i, level + 1] if blocks is None else prefix[i, level + 1] & RELATION_MASK
        kind = rel_kind[level, r]
        k = prefix[i, rel_pos[level, r]]
        lo, hi = value_bounds(level, prefix, i, above, below)
        pending = full & ~(1 << r)
        if blocks is None:
            if owner(k, workers) != p:
                raise ValueError("a prefix is queued away from its proposing relation's worker")
            local = _local_relations(p, workers, level, prefix, i, pending, look_total, look_pos)
        else:  # a piece of a split list (the values of one block), or a list every worker holds
            at, lo, hi = _piece(blocks, p, workers, k, prefix[i, level + 1], lo, hi)
            if at != p:
                raise ValueError("a prefix is queued away from its proposing relation's worker")
            local = _held_relations(blocks, p, workers, level, prefix, i, pending, look_total, look_pos, look_kind, lo, hi)
        mask[i] = pending & ~local
        proposals += last[i] - first[i]
        store = mask[i] != 0 or stored_done < keep_done
        if not store and local == 0 and (bounded or not filtered) and unchanged(ix, k):
            # A done prefix that is only counted needs no value written: its list's length is its count.
            counted += _count_static(ix.lists, kind, k, lo, hi, first[i], last[i], level, prefix, i, plan.differ)
            continue
        if not filtered and kind != BOTH and unchanged(ix, k):  # straight from the index
            values = ix.lists.forward if kind == FORWARD else ix.lists.reverse
            a, b = _part(ix.lists, 0 if kind == FORWARD else 1, values, k, lo, hi)
            a, b = a + first[i], min(a + last[i], b)
            if local:  # a candidate a local relation rejects is never written
                kept, tested = _apply_local(
                    ix, plan, look, level, prefix, i, local, rel_count, rel_kind, rel_view, rel_pos, values, a, max(0, b - a),
                    out, w, store, work,
                )  # fmt: skip
            else:
                kept, tested = max(0, b - a), 0
                if store:
                    out[w : w + kept] = values[a : a + kept]
        else:
            kept, tested = _propose_general(
                ix, plan, look, loops, level, prefix, i, r, first[i], last[i], local, lo, hi, filtered, out, w, store, work
            )
        probes += tested
        if store:
            lengths[i] = kept
            w += kept
            stored_done += kept if mask[i] == 0 else 0
        else:
            counted += kept
    return mask, lengths, out[:w], proposals, probes, counted


def intersect_rows(p, workers, ix, level, rows, values, out, plan, keep_done, blocks):
    """Intersect received candidate rows (prefix, mask, length; writable) with every pending relation
    this worker owns and subtract every pending anti-relation it owns (`Lookups` bits), survivors into
    `out` (may be values itself); a row left with nothing pending is done and, past the first
    `keep_done` values, only counted (its length set to 0).
    Returns (kept, probes, counted). `blocks` as in `propose_local`, and a level without anti-relations
    compiled without the anti-intersect as there."""
    return _intersect_rows(p, workers, ix, level, rows, values, out, plan, keep_done, blocks, level_lookups(plan, level))


@njit(cache=True)
def _intersect_rows(p, workers, ix, level, rows, values, out, plan, keep_done, blocks, look):
    work = np.zeros(2, dtype=np.int64)
    rel_count, rel_pos, rel_kind, rel_view = plan.rel_count, plan.rel_pos, plan.rel_kind, plan.rel_view
    if look is None:
        look_total, look_pos, look_kind = rel_count, rel_pos, rel_kind
    else:
        look_total, look_pos, look_kind = look.total, look.pos, look.kind
    read = write = probes = counted = stored_done = 0
    for i in range(rows.shape[0]):
        n = rows[i, level + 1]
        pending = rows[i, level]
        if blocks is None:
            local = _local_relations(p, workers, level, rows, i, pending, look_total, look_pos)
        elif n > 0:  # the candidates' range decides which blocks hold them
            local = _held_relations(
                blocks, p, workers, level, rows, i, pending, look_total, look_pos, look_kind, values[read], values[read + n - 1]
            )
        else:
            local = 0
        left = pending & ~local
        store = left != 0 or stored_done < keep_done
        if local == 0:
            for t in range(n):
                out[write + t] = values[read + t]
            kept = n
        else:
            kept, tested = _apply_local(
                ix, plan, look, level, rows, i, local, rel_count, rel_kind, rel_view, rel_pos, values, read, n, out, write, store,
                work,
            )  # fmt: skip
            probes += tested
        read += n
        rows[i, level] = left
        if store:
            rows[i, level + 1] = kept
            write += kept
            stored_done += kept if left == 0 else 0
        else:
            rows[i, level + 1] = 0
            counted += kept
    return write, probes, counted


@njit(cache=True)
def count_rows(p, workers, ix, level, rows, plan, blocks):
    """Count prefix rows (prefix, mask, min_rel, min_count; writable) against every pending relation
    this worker owns (a split list's anywhere: `blocks`, as in `propose_local`), keeping the smallest
    (ties to the lower relation); then where each goes next: the owner of its lowest pending
    relation's key or, with none pending, of its proposing relation's key (for a split list: here,
    FAN_OUT, or a piece's block holder: `_proposer`); -1 for a prefix with no extension (dropped).
    Returns (destination, lookups)."""
    rel_count, rel_pos, rel_kind, rel_view = plan.rel_count, plan.rel_pos, plan.rel_kind, plan.rel_view
    above, below = plan.above, plan.below
    n = rows.shape[0]
    dest = np.empty(n, dtype=np.int64)
    lookups = 0
    for i in range(n):
        mk = rows[i, level]
        if mk != 0:
            lo, hi = value_bounds(level, rows, i, above, below)
            for r in range(rel_count[level]):
                if mk & (1 << r):
                    k = rows[i, rel_pos[level, r]]
                    h = -1 if blocks is None else split_row(blocks, k)
                    if h >= 0 and not everywhere(blocks, h, rel_kind[level, r]):
                        c = split_count(blocks, h, rel_kind[level, r], lo, hi)  # from the blocks' sizes, anywhere
                    elif h < 0 and owner(k, workers) != p:
                        continue
                    elif unchanged(ix, k):
                        ra, rb, fa, fb = _static_ranges(ix.lists, rel_kind[level, r], k, lo, hi)
                        c = rb - ra + fb - fa
                    elif rel_kind[level, r] != BOTH:
                        _v, _c, sign, part = _changed_part(ix, rel_kind[level, r], rel_view[level, r], k, lo, hi)
                        c = part.base_end - part.base_start + _signed(sign, part.change_start, part.change_end)
                    else:
                        span = list_ranges(ix, rel_view[level, r], rel_kind[level, r], k, lo, hi)
                        c = span.reverse.size + span.forward.size
                    lookups += 1
                    if c < rows[i, level + 2] or (c == rows[i, level + 2] and r < rows[i, level + 1]):
                        rows[i, level + 2], rows[i, level + 1] = c, r
                    mk &= ~(1 << r)
            rows[i, level] = mk
        if rows[i, level + 2] == 0:
            dest[i] = -1
            continue
        r = rows[i, level + 1] & RELATION_MASK
        if mk != 0:
            r = _lowest(mk)
        dest[i] = owner(rows[i, rel_pos[level, r]], workers)
        if blocks is not None and mk == 0:
            dest[i] = _proposer(blocks, p, workers, rows[i, rel_pos[level, r]], rel_kind[level, r], rows[i, level + 1], dest[i])
    return dest, lookups


@njit(cache=True)
def _proposer(blocks, p, workers, k, kind, code, at_owner):
    """Where a counted prefix proposing from key k's list goes: a split list every worker holds is
    proposed here (p); a prefix not yet cut into pieces is cut (FAN_OUT); a piece goes to its block."""
    h = split_row(blocks, k)
    if h < 0:
        return at_owner
    block = piece_block(code)
    if block >= 0:
        return holder(k, block, workers)
    return p if everywhere(blocks, h, kind) else FAN_OUT


# ---------------------------------------------------------------- lists in blocks (bigjoin-s)


@njit(cache=True)
def fan_out(blocks, workers, level, rows, fan, plan):
    """The counted prefix rows `fan` selects, whose smallest list is split, cut into one piece per
    block their value bounds touch: a copy of the row that proposes from that block only (its block
    in the proposing-relation column, its work the block's entries), bound for the block's holder.
    Returns (pieces, destinations)."""
    pieces = 0
    for i in range(rows.shape[0]):
        if fan[i]:
            r = rows[i, level + 1]
            h = split_row(blocks, rows[i, plan.rel_pos[level, r]])
            lo, hi = value_bounds(level, rows, i, plan.above, plan.below)
            pieces += block_of(blocks, h, hi) - block_of(blocks, h, lo) + 1
    out = np.empty((pieces, rows.shape[1]), dtype=np.int32)
    dest = np.empty(pieces, dtype=np.int64)
    w = 0
    for i in range(rows.shape[0]):
        if not fan[i]:
            continue
        r = rows[i, level + 1]
        k = rows[i, plan.rel_pos[level, r]]
        h = split_row(blocks, k)
        lo, hi = value_bounds(level, rows, i, plan.above, plan.below)
        for j in range(block_of(blocks, h, lo), block_of(blocks, h, hi) + 1):
            work = block_entries(blocks, h, plan.rel_kind[level, r], j, j)
            if work == 0:
                continue
            out[w] = rows[i]
            out[w, level + 1] = piece_code(r, j)
            out[w, level + 2] = work
            dest[w] = holder(k, j, workers)
            w += 1
    return out[:w], dest[:w]


@njit(cache=True)
def split_candidates(blocks, workers, level, rows, values, rel_pos):
    """Candidate rows (prefix, mask, length) with their values, and where each goes next: the owner
    of its lowest pending relation's key; a row whose next list is split is cut into one row per
    block its values fall in, bound for that block's holder (the values stay in order, so only the
    rows change). A row with nothing pending or no values goes nowhere (-1). Returns (rows, dest)."""
    n = rows.shape[0]
    total = 0
    t = 0
    for i in range(n):
        length = rows[i, level + 1]
        total += 1
        mk = rows[i, level]
        if mk != 0 and length > 0:
            h = split_row(blocks, rows[i, rel_pos[level, _lowest(mk)]])
            if h >= 0:
                total += block_of(blocks, h, values[t + length - 1]) - block_of(blocks, h, values[t])
        t += length
    out = np.empty((total, rows.shape[1]), dtype=np.int32)
    dest = np.full(total, -1, dtype=np.int64)
    w = t = 0
    for i in range(n):
        length = rows[i, level + 1]
        mk = rows[i, level]
        out[w] = rows[i]
        if mk == 0 or length == 0:
            w += 1
            t += length
            continue
        k = rows[i, rel_pos[level, _lowest(mk)]]
        h = split_row(blocks, k)
        if h < 0:
            dest[w] = owner(k, workers)
            w += 1
            t += length
            continue
        end = t + length
        while t < end:
            j = block_of(blocks, h, values[t])
            _low, high = block_values(blocks, h, j)
            run = lower_bound(values, t, end, np.int64(high) + 1) - t
            out[w] = rows[i]
            out[w, level + 1] = run
            dest[w] = holder(k, j, workers)
            w += 1
            t += run
    return out[:w], dest[:w]
