"""Lists cut into blocks (`bigjoin-s`, §3.4): who holds which part of a long list, and what a list's
blocks say about its size, for the shared kernels.

A key whose list (forward and reverse together) is longer than the block size is *split*: its
values are cut into blocks of consecutive values, each holding about one block size of entries, and
block j is held by worker (owner(k) + j) mod W, so a hub's list is spread evenly over the workers
and no worker holds it whole. A key that is not split is held whole by owner(k), as in BiGJoin's
index (its only block is block 0). Every worker knows the split keys' block bounds and sizes (a
small table: about one row per block size of entries), so any worker can count a split key's list
and send each candidate to the block that can check it. A split key's direction (forward or
reverse) of at most S/W entries is held whole by every worker as well (`everywhere`)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from implementations.gj.constants import BOTH, FORWARD, INT32_MAX, REVERSE
from implementations.gj.csr import lower_bound
from implementations.gj.keys import owner

# A piece of a prefix (one block of its split proposing list) names its relation and its block in
# one int32 column: relation | (block + 1) << BLOCK_SHIFT (a plan has fewer than 256 relations per
# level); 0 in the block field is a prefix not yet cut into pieces.
BLOCK_SHIFT = 8
RELATION_MASK = (1 << BLOCK_SHIFT) - 1


@njit(cache=True, inline="always")
def piece_code(relation, block):
    return relation | ((block + 1) << BLOCK_SHIFT)


@njit(cache=True, inline="always")
def piece_block(code):
    """The block a piece proposes from; -1 for a prefix not cut into pieces."""
    return (code >> BLOCK_SHIFT) - 1


class Blocks(NamedTuple):
    """The split keys: slots[k] = h, key k's row among them (-1, as for every k past the table's end,
    if k is held whole). Key h's blocks are first[h] .. first[h+1] - 1; lower[t] is block t's lowest
    value (0 for a key's first block); sizes_before[row, first[h] + h + j] counts key h's forward (row
    0) or reverse (row 1) entries in its blocks before block j (j = 0 .. its block count).
    everywhere[row, h] = 1 if that direction of key h's list is short enough to be held whole by
    every worker (a hub's few forward neighbours: hot, so checked wherever a prefix is, as the
    paper's lookups of one key are answered once per worker)."""

    slots: np.ndarray
    first: np.ndarray
    lower: np.ndarray
    sizes_before: np.ndarray
    everywhere: np.ndarray


@njit(cache=True, inline="always")
def split_row(blocks, k):
    """Key k's row among the split keys, or -1 if it is held whole."""
    slots = blocks.slots
    if k >= len(slots):
        return -1
    return slots[k]


@njit(cache=True)
def block_of(blocks, h, v):
    """The block of split key h whose values include v."""
    a, b = blocks.first[h] + 1, blocks.first[h + 1]
    return lower_bound(blocks.lower, a, b, v + 1) - a


@njit(cache=True, inline="always")
def holder(k, block, workers):
    """The worker holding block `block` of key k's list (block 0 of every key is at its owner)."""
    return (owner(k, workers) + block) % workers


@njit(cache=True, inline="always")
def everywhere(blocks, h, kind):
    """Whether every worker holds split key h's whole list of `kind`."""
    if kind == FORWARD:
        return blocks.everywhere[0, h] != 0
    if kind == REVERSE:
        return blocks.everywhere[1, h] != 0
    return blocks.everywhere[0, h] != 0 and blocks.everywhere[1, h] != 0


@njit(cache=True)
def _holds_split(blocks, p, workers, h, k, kind, lo, hi):
    if everywhere(blocks, h, kind):
        return True
    if kind == BOTH:  # undirected: reverse values lie below k, forward ones above it
        if blocks.everywhere[0, h]:
            hi = min(hi, k - 1)
        if blocks.everywhere[1, h]:
            lo = max(lo, k + 1)
        if lo > hi:
            return True
    j = block_of(blocks, h, lo)
    return j == block_of(blocks, h, hi) and holder(k, j, workers) == p


@njit(cache=True, inline="always")
def holds(blocks, p, workers, k, kind, lo, hi):
    """Whether worker p holds every entry of key k's list of `kind` with a value in [lo, hi]."""
    h = split_row(blocks, k)
    if h < 0 or workers == 1:
        return owner(k, workers) == p
    return _holds_split(blocks, p, workers, h, k, kind, lo, hi)


@njit(cache=True)
def block_values(blocks, h, j):
    """[lowest, highest] value of block j of split key h."""
    t = blocks.first[h] + j
    top = blocks.lower[t + 1] - 1 if t + 1 < blocks.first[h + 1] else INT32_MAX
    return blocks.lower[t], top


@njit(cache=True)
def block_entries(blocks, h, kind, j_lo, j_hi):
    """Entries of relation `kind` in blocks j_lo .. j_hi of split key h (the size of any part of the
    list within those blocks' values is at most this)."""
    base = blocks.first[h] + h
    total = 0
    if kind != REVERSE:
        total += blocks.sizes_before[0, base + j_hi + 1] - blocks.sizes_before[0, base + j_lo]
    if kind != FORWARD:
        total += blocks.sizes_before[1, base + j_hi + 1] - blocks.sizes_before[1, base + j_lo]
    return total


@njit(cache=True)
def split_count(blocks, h, kind, lo, hi):
    """An upper bound of the size of split key h's list of `kind` within [lo, hi]: the entries of
    the blocks those values touch (exact but for the two end blocks)."""
    if lo > hi:
        return 0
    return block_entries(blocks, h, kind, block_of(blocks, h, lo), block_of(blocks, h, hi))
