"""`local-gj`: the COST baseline (§5.2.1). A native single-threaded Generic Join on the driver:
degree-ordered ids, sorted CSR adjacency, candidates from the smallest list, binary-search probes
into the others (so a hub's list is never scanned), counting the last level without materialising it."""
from __future__ import annotations

import numpy as np
from numba import njit

from .base import Implementation, Outcome

FORWARD, REVERSE, BOTH = 0, 1, 2  # undirected: higher-ranked / lower-ranked / all neighbours; directed: out / in


def build_csr(keys: np.ndarray, values: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """offsets (n + 1) and values sorted by (key, value)."""
    order = np.lexsort((values, keys))
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.add.at(offsets, keys + 1, 1)
    return np.cumsum(offsets), values[order].astype(np.int64)


@njit(cache=True)
def _lower_bound(values, start, end, x):
    """First position in the sorted values[start:end] holding a value >= x."""
    lo, hi = start, end
    while lo < hi:
        mid = (lo + hi) >> 1
        if values[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True)
def _contains(values, start, end, x):
    i = _lower_bound(values, start, end, x)
    return i < end and values[i] == x


@njit(cache=True)
def generic_join(n, offsets, values, rel_count, rel_pos, rel_kind, above, below, differ, loop, limit, out):
    """Count matches; write the first `limit` of them (in attribute-order positions) into `out`.

    Level j binds position j. rel_*[j, :rel_count[j]] are the relations (bound position, index kind)
    that bind it; above/below/differ[j, p] say the value must be >, < or != the one at position p;
    loop[j] requires a self-loop. offsets/values are (3, n + 1) and (3, *) arrays of the indices."""
    m = rel_count.shape[0]
    vals = np.zeros(m, dtype=np.int64)
    pos = np.zeros(m, dtype=np.int64)
    end = np.zeros(m, dtype=np.int64)
    kind = np.zeros(m, dtype=np.int64)
    count = 0
    j = 0
    pos[0], end[0] = 0, n
    while j >= 0:
        if pos[j] >= end[j]:
            j -= 1
            if j >= 0:
                pos[j] += 1
            continue
        c = pos[j] if j == 0 else values[kind[j], pos[j]]
        ok = True
        for p in range(j):
            if (above[j, p] and c <= vals[p]) or (below[j, p] and c >= vals[p]) or (differ[j, p] and c == vals[p]):
                ok = False
                break
        if ok and loop[j]:
            ok = _contains(values[0], offsets[0, c], offsets[0, c + 1], c)
        if ok and j > 0:
            for r in range(1, rel_count[j]):  # relation 0 proposed the candidate
                k, key = rel_kind[j, r], vals[rel_pos[j, r]]
                if not _contains(values[k], offsets[k, key], offsets[k, key + 1], c):
                    ok = False
                    break
        if not ok:
            pos[j] += 1
            continue
        vals[j] = c
        if j == m - 1:
            if count < limit:
                out[count, :] = vals
            count += 1
            pos[j] += 1
            continue
        # Enter level j + 1: propose from the relation with the fewest candidates.
        nj = j + 1
        best, best_size = 0, -1
        for r in range(rel_count[nj]):
            k, key = rel_kind[nj, r], vals[rel_pos[nj, r]]
            size = offsets[k, key + 1] - offsets[k, key]
            if best_size < 0 or size < best_size:
                best, best_size = r, size
        if best != 0:  # keep the proposer first so the probe loop can skip it
            rel_pos[nj, 0], rel_pos[nj, best] = rel_pos[nj, best], rel_pos[nj, 0]
            rel_kind[nj, 0], rel_kind[nj, best] = rel_kind[nj, best], rel_kind[nj, 0]
        k, key = rel_kind[nj, 0], vals[rel_pos[nj, 0]]
        start, stop = offsets[k, key], offsets[k, key + 1]
        for p in range(nj):  # sorted candidates: jump straight past the lower bounds
            if above[nj, p]:
                start = max(start, _lower_bound(values[k], start, stop, vals[p] + 1))
        kind[nj], pos[nj], end[nj] = k, start, stop
        j = nj
    return count


class LocalGenericJoin(Implementation):
    name = "local-gj"
    description = "native single-threaded Generic Join (numba) on the driver: the COST baseline"

    def prepare(self) -> None:
        table = self.ctx.edges.toArrow()
        src = table.column("src").to_numpy().astype(np.int64)
        dst = table.column("dst").to_numpy().astype(np.int64)
        ids = np.unique(np.concatenate([src, dst]))
        undirected = self.ctx.spec.semantics == "undirected"
        if undirected:  # rank vertices by degree so "forward" lists are short
            degree = np.bincount(np.searchsorted(ids, np.concatenate([src, dst])), minlength=len(ids))
            ids = ids[np.lexsort((ids, degree))]
        self.ids = ids
        order = np.argsort(ids)  # ids[order] is sorted; order[i] is the rank of the i-th smallest id
        s = order[np.searchsorted(ids[order], src)].astype(np.int64)
        d = order[np.searchsorted(ids[order], dst)].astype(np.int64)
        n = len(ids)
        if undirected:
            lo, hi = np.minimum(s, d), np.maximum(s, d)
            indices = [build_csr(lo, hi, n), build_csr(hi, lo, n), build_csr(np.concatenate([lo, hi]), np.concatenate([hi, lo]), n)]
        else:
            indices = [build_csr(s, d, n), build_csr(d, s, n)]
            indices.append(indices[0])
        width = max(len(v) for _, v in indices)
        self.offsets = np.stack([o for o, _ in indices])
        self.values = np.zeros((3, max(width, 1)), dtype=np.int64)
        for i, (_, v) in enumerate(indices):
            self.values[i, : len(v)] = v
        self.n = n
        self._plan()

    def _plan(self) -> None:
        spec = self.ctx.spec
        order = spec.attribute_order
        m = len(order)
        at = {a: i for i, a in enumerate(order)}
        self.rel_count = np.zeros(m, dtype=np.int64)
        self.rel_pos = np.zeros((m, 2 * len(spec.query.edges)), dtype=np.int64)
        self.rel_kind = np.zeros_like(self.rel_pos)
        self.above = np.zeros((m, m), dtype=np.bool_)
        self.below = np.zeros((m, m), dtype=np.bool_)
        self.differ = np.zeros((m, m), dtype=np.bool_)
        self.loop = np.zeros(m, dtype=np.bool_)
        for x, y in spec.query.edges:
            if x == y:
                self.loop[at[x]] = True
                continue
            late, early = (y, x) if at[y] > at[x] else (x, y)
            j = at[late]
            if spec.semantics == "directed":
                k = FORWARD if late == y else REVERSE  # e(early, late): late is an out-neighbour
            elif spec.implies_less(early, late):
                k = FORWARD
            elif spec.implies_less(late, early):
                k = REVERSE
            else:
                k = BOTH
            r = self.rel_count[j]
            self.rel_pos[j, r], self.rel_kind[j, r] = at[early], k
            self.rel_count[j] += 1
        for lo, hi in spec.less_than:
            if at[hi] > at[lo]:
                self.above[at[hi], at[lo]] = True
            else:
                self.below[at[lo], at[hi]] = True
        for x, y in spec.distinct:
            late, early = (x, y) if at[x] > at[y] else (y, x)
            self.differ[at[late], at[early]] = True

    def _run(self, limit: int) -> tuple[int, np.ndarray]:
        m = len(self.ctx.spec.attribute_order)
        out = np.zeros((max(limit, 0), m), dtype=np.int64)
        count = generic_join(self.n, self.offsets, self.values, self.rel_count.copy(), self.rel_pos.copy(),
                             self.rel_kind.copy(), self.above, self.below, self.differ, self.loop, limit, out)
        return int(count), out

    def count(self) -> Outcome:
        count, _ = self._run(0)
        return Outcome(count=count)

    def matches(self, limit: int) -> list[tuple]:
        count, out = self._run(limit)
        spec = self.ctx.spec
        where = [spec.attribute_order.index(a) for a in spec.query.attributes]
        rows = self.ids[out[: min(count, limit)]]
        return [tuple(int(v) for v in row[where]) for row in rows]
