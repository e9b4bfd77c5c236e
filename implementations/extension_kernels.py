"""Numba kernels of the prefix-extension primitive, run by the worker that owns the lookup keys.

An index partition is (keys, offsets, forward, reverse): the sorted keys this worker owns and, per
key, its sorted forward and reverse lists. A relation of kind BOTH reads reverse ++ forward, which is
sorted because reverse neighbours rank below the key and forward ones above it.

Every lookup is a binary search, so a probe into a hub's list costs log(degree), never a scan, and
a prefix's count is the size of the sub-range its order constraints leave (above/below earlier values)."""
from __future__ import annotations

import numpy as np
from numba import njit

from .csr import contains, lower_bound

FORWARD, REVERSE, BOTH = 0, 1, 2
INT32_MAX = 2**31 - 1


@njit(cache=True)
def part(k, workers):
    """Owner of key k; the same function as exchange.partition_of."""
    h = (np.uint64(k) * np.uint64(2654435761)) & np.uint64(0xFFFFFFFF)
    return np.int64((h * np.uint64(workers)) >> np.uint64(32))


@njit(cache=True)
def _slot(keys, k):
    i = lower_bound(keys, 0, len(keys), k)
    if i < len(keys) and keys[i] == k:
        return i
    return -1


@njit(cache=True)
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
def list_ranges(keys, offsets, forward, reverse, kind, k, lo, hi):
    """Positions (reverse start, end, forward start, end) of k's list restricted to [lo, hi]."""
    s = _slot(keys, k)
    rs = re = fs = fe = 0
    if s >= 0 and lo <= hi:
        if kind != REVERSE:
            a, b = offsets[0, s], offsets[0, s + 1]
            fs = lower_bound(forward, a, b, lo)
            fe = lower_bound(forward, fs, b, hi + 1)
        if kind != FORWARD:
            a, b = offsets[1, s], offsets[1, s + 1]
            rs = lower_bound(reverse, a, b, lo)
            re = lower_bound(reverse, rs, b, hi + 1)
    return rs, re, fs, fe


@njit(cache=True)
def count_items(p, workers, keys, offsets, forward, reverse, level, prefix, mask, min_rel, min_count,
                rel_count, rel_pos, rel_kind, above, below):
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
                if part(k, workers) != p:
                    continue
                rs, re, fs, fe = list_ranges(keys, offsets, forward, reverse, rel_kind[level, r], k, lo, hi)
                c = (re - rs) + (fe - fs)
                lookups += 1
                if c < min_count[i] or (c == min_count[i] and r < min_rel[i]):
                    min_count[i], min_rel[i] = c, r
                mk &= ~(1 << r)
        mask[i] = mk
    return lookups


@njit(cache=True)
def propose_items(p, workers, keys, offsets, forward, reverse, loops, level, prefix, min_rel, first, last,
                  rel_pos, rel_kind, above, below, differ, loop):
    """Propose: positions [first, last) of each prefix's smallest list, minus candidates that an
    inequality or a required self-loop rules out. Returns (lengths, candidates)."""
    n = prefix.shape[0]
    lengths = np.zeros(n, dtype=np.int32)
    out = np.empty(max(0, (last - first).sum()), dtype=np.int32)
    w = 0
    for i in range(n):
        r = min_rel[i]
        k = prefix[i, rel_pos[level, r]]
        if part(k, workers) != p:
            raise ValueError("a prefix is queued away from its proposing relation's worker")
        lo, hi = value_bounds(level, prefix, i, above, below)
        rs, re, fs, fe = list_ranges(keys, offsets, forward, reverse, rel_kind[level, r], k, lo, hi)
        nr = re - rs
        start = w
        for t in range(first[i], last[i]):
            c = reverse[rs + t] if t < nr else forward[fs + t - nr]
            ok = True
            for q in range(level):
                if differ[level, q] and c == prefix[i, q]:
                    ok = False
                    break
            if ok and loop[level]:
                ok = contains(loops, 0, len(loops), c)
            if ok:
                out[w] = c
                w += 1
        lengths[i] = w - start
    return lengths, out[:w]


@njit(cache=True)
def intersect_items(p, workers, keys, offsets, forward, reverse, level, prefix, mask, lengths, values,
                    rel_count, rel_pos, rel_kind):
    """Intersect: drop the candidates missing from any relation in `mask` whose key this worker owns
    (one binary search per candidate and relation). Compacts `values` in place; returns (kept, probes)."""
    read = 0
    write = 0
    probes = 0
    ranges = np.zeros((rel_count[level], 4), dtype=np.int64)
    for i in range(prefix.shape[0]):
        n = lengths[i]
        mk = mask[i]
        local = 0
        for r in range(rel_count[level]):
            if mk & (1 << r):
                k = prefix[i, rel_pos[level, r]]
                if part(k, workers) == p:
                    local |= 1 << r
                    s = _slot(keys, k)
                    if s < 0:
                        ranges[r, 0] = ranges[r, 1] = ranges[r, 2] = ranges[r, 3] = 0
                    else:
                        ranges[r, 0], ranges[r, 1] = offsets[0, s], offsets[0, s + 1]
                        ranges[r, 2], ranges[r, 3] = offsets[1, s], offsets[1, s + 1]
        start = write
        if local == 0:
            for t in range(n):
                values[write] = values[read + t]
                write += 1
        else:
            for t in range(n):
                c = values[read + t]
                keep = True
                for r in range(rel_count[level]):
                    if local & (1 << r):
                        probes += 1
                        kind = rel_kind[level, r]
                        k = prefix[i, rel_pos[level, r]]
                        if kind == FORWARD or (kind == BOTH and c > k):
                            hit = contains(forward, ranges[r, 0], ranges[r, 1], c)
                        else:
                            hit = contains(reverse, ranges[r, 2], ranges[r, 3], c)
                        if not hit:
                            keep = False
                            break
                if keep:
                    values[write] = c
                    write += 1
        read += n
        lengths[i] = write - start
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
        dest[i] = part(prefix[i, rel_pos[level, r]], workers) if r >= 0 else -1
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
