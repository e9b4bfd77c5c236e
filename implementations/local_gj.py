"""`local-gj`: the COST baseline (§5.2.1). A native single-threaded Generic Join on the driver:
degree-ordered ids, sorted CSR adjacency, candidates from the smallest list, binary-search probes
into the others (so a hub's list is never scanned), counting the last level without materialising it."""
from __future__ import annotations

import time

import numpy as np
from numba import njit

from .base import Implementation, Outcome, RunCancelled
from .csr import build_csr, vertex_ranks, contains as _contains, lower_bound as _lower_bound
from .plan import ExtensionPlan


@njit(cache=True, nogil=True)
def generic_join(n, offsets, values, rel_count, rel_pos, rel_kind, above, below, differ, loop, loop_kind, limit, out, work,
                 first_lo, first_hi, found_before):
    """Count matches whose first position lies in [first_lo, first_hi); write the first matches into out[found_before:limit] (in attribute-order positions).

    Level j binds position j. rel_*[j, :rel_count[j]] are the relations (bound position, index) that
    bind it; above/below/differ[j, p] say the value must be >, < or != the one at position p; loop[j]
    requires a self-loop, looked up in index loop_kind. offsets/values are (K, n + 1) and (K, *)
    arrays of K indices. Adds candidates examined and membership probes to work[0] and work[1].
    It holds no Python objects and releases the GIL, so the harness's threads run beside it."""
    m = rel_count.shape[0]
    vals = np.zeros(m, dtype=np.int64)
    pos = np.zeros(m, dtype=np.int64)
    end = np.zeros(m, dtype=np.int64)
    kind = np.zeros(m, dtype=np.int64)
    count = 0
    j = 0
    pos[0], end[0] = first_lo, first_hi
    while j >= 0:
        if pos[j] >= end[j]:
            j -= 1
            if j >= 0:
                pos[j] += 1
            continue
        c = pos[j] if j == 0 else values[kind[j], pos[j]]
        work[0] += 1
        ok = True
        for p in range(j):
            if (above[j, p] and c <= vals[p]) or (below[j, p] and c >= vals[p]) or (differ[j, p] and c == vals[p]):
                ok = False
                break
        if ok and loop[j]:
            work[1] += 1
            ok = _contains(values[loop_kind], offsets[loop_kind, c], offsets[loop_kind, c + 1], c)
        if ok and j > 0:
            for r in range(1, rel_count[j]):  # relation 0 proposed the candidate
                k, key = rel_kind[j, r], vals[rel_pos[j, r]]
                work[1] += 1
                if not _contains(values[k], offsets[k, key], offsets[k, key + 1], c):
                    ok = False
                    break
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


def warm_up() -> None:
    """Compile (or load from numba's cache) generic_join for the argument types every caller uses,
    and run it once over a triangle with every filter, so no measured run pays for either: a fresh
    process was measured taking seconds over its first real call even with the code cached."""
    offsets = np.array([[0, 2, 3, 3]], dtype=np.int64)  # forward lists of the triangle 0-1-2
    values = np.array([[1, 2, 2]], dtype=np.int64)
    rel_count = np.array([0, 1, 2], dtype=np.int64)
    rel_pos = np.array([[0, 0], [0, 0], [0, 1]], dtype=np.int64)
    rel_kind = np.zeros((3, 2), dtype=np.int64)
    above = np.tril(np.ones((3, 3), dtype=np.bool_), -1)
    none = np.zeros((3, 3), dtype=np.bool_)
    out = np.zeros((1, 3), dtype=np.int64)
    work = np.zeros(2, dtype=np.int64)
    found = generic_join(3, offsets, values, rel_count, rel_pos, rel_kind, above, none, ~above, np.ones(3, np.bool_),
                         0, 1, out, work, 0, 3, 0)
    found += generic_join(3, offsets, values, rel_count, rel_pos.copy(), rel_kind.copy(), above, none, none,
                          np.zeros(3, np.bool_), 0, 1, out, work, 0, 3, 0)
    if found != 1:
        raise RuntimeError(f"generic_join self-check found {found} triangles in a triangle")


CHUNK_S = 0.25  # seconds per kernel call: the longest a timed-out run keeps going


class LocalGenericJoin(Implementation):
    name = "local-gj"
    description = "native single-threaded Generic Join (numba) on the driver: the COST baseline"

    def prepare(self) -> None:
        table = self.ctx.edges.toArrow()
        src = table.column("src").to_numpy().astype(np.int64)
        dst = table.column("dst").to_numpy().astype(np.int64)
        ids, inverse = np.unique(np.concatenate([src, dst]), return_inverse=True)
        undirected = self.ctx.spec.semantics == "undirected"
        rank = vertex_ranks(ids, np.bincount(inverse, minlength=len(ids)) if undirected else None)
        self.ids = ids[np.argsort(rank)]
        s, d = rank[inverse[: len(src)]], rank[inverse[len(src):]]
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
        self.plan = ExtensionPlan.from_spec(self.ctx.spec)
        self.plan.require_connected_order(self.ctx.spec)  # every position after the first is proposed by a relation

    def _run(self, limit: int) -> tuple[int, np.ndarray, np.ndarray]:
        """The kernel over slices of first-position vertices, sized to take about CHUNK_S each, so a
        timed-out run stops within a slice (ctx.cancelled) instead of running on for hours."""
        m = len(self.ctx.spec.attribute_order)
        out = np.zeros((max(limit, 0), m), dtype=np.int64)
        work = np.zeros(2, dtype=np.int64)
        p = self.plan
        rel_pos, rel_kind = p.rel_pos.copy(), p.rel_kind.copy()
        count, lo, width = 0, 0, 64
        while lo < self.n:
            if self.ctx.cancelled.is_set():
                raise RunCancelled(f"local-gj stopped at vertex {lo:,} of {self.n:,}")
            hi = min(self.n, lo + width)
            started = time.perf_counter()
            count += generic_join(self.n, self.offsets, self.values, p.rel_count, rel_pos, rel_kind,
                                  p.above, p.below, p.differ, p.loop, 0, limit, out, work, lo, hi, count)
            took = time.perf_counter() - started
            width = width * 2 if took < CHUNK_S / 2 else max(1, width // 2) if took > CHUNK_S * 2 else width
            lo = hi
        return int(count), out, work

    def count(self) -> Outcome:
        count, _, work = self._run(0)
        return Outcome(count=count, counters={"candidates": int(work[0]), "probes": int(work[1])})

    def matches(self, limit: int) -> list[tuple]:
        count, out, _ = self._run(limit)
        spec = self.ctx.spec
        where = [spec.attribute_order.index(a) for a in spec.query.attributes]
        rows = self.ids[out[: min(count, limit)]]
        return [tuple(int(v) for v in row[where]) for row in rows]
