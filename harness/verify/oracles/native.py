"""The independent native counter: undirected triangles, k-cliques and houses in a plain
single-threaded numba kernel, sharing no code with the implementations.

Vertices are renamed to their rank by (degree, id) and every edge is oriented from the lower rank to
the higher, so each k-clique is found once, from its lowest-ranked vertex, and forward lists stay
short on skewed graphs. Forward lists are sorted CSR rows built by two counting sorts. Triangles:
for every oriented edge u->v, the sorted merge of u's and v's forward lists. k-cliques: the
candidates after choosing u and v are u's forward list merged with v's into a buffer, and each level
down merges that buffer with the next vertex's forward list into the next buffer; the last level is
only counted. Houses (a 4-clique plus a vertex joined to two of its vertices) are counted from the
4-cliques: an instance is a 4-clique Q, one of its six edges e and a common neighbour of e's ends
outside Q, so the count is the sum over 4-cliques and their edges of (triangles on e) − 2.
This is also the native reference that speed ratios are measured against (COST)."""

from __future__ import annotations

import time

import numpy as np
from numba import njit

from harness.verify.oracles import edges as edge_arrays


def oriented_lists(src, dst, n):
    """(offsets, forward): CSR of the oriented graph over ranks 0..n-1, rows sorted. Raises on a
    self-loop or a repeated edge (the input must be a simple undirected graph)."""
    degree = np.bincount(src, minlength=n) + np.bincount(dst, minlength=n)
    by_rank = np.argsort(degree, kind="stable")  # vertices by (degree, id)
    rank = np.empty(n, np.int64)
    rank[by_rank] = np.arange(n, dtype=np.int64)
    return _oriented(src, dst, rank)


@njit(cache=True)
def _oriented(src, dst, rank):
    """oriented_lists given each vertex's rank."""
    m, n = len(src), len(rank)
    low = np.empty(m, np.int64)
    high = np.empty(m, np.int64)
    offsets = np.zeros(n + 1, np.int64)
    by_high = np.zeros(n + 1, np.int64)
    for i in range(m):
        a, b = rank[src[i]], rank[dst[i]]
        if a == b:
            raise ValueError("self-loop in the input: the native counter needs a simple graph")
        if a > b:
            a, b = b, a
        low[i], high[i] = a, b
        offsets[a + 1] += 1
        by_high[b + 1] += 1
    for v in range(n):
        offsets[v + 1] += offsets[v]
        by_high[v + 1] += by_high[v]
    order = np.empty(m, np.int64)  # edges by their higher end, so each row fills in sorted order
    for i in range(m):
        order[by_high[high[i]]] = i
        by_high[high[i]] += 1
    fill = offsets[:-1].copy()
    forward = np.empty(m, np.int64)
    for t in range(m):
        i = order[t]
        forward[fill[low[i]]] = high[i]
        fill[low[i]] += 1
    for u in range(n):
        for i in range(offsets[u] + 1, offsets[u + 1]):
            if forward[i] == forward[i - 1]:
                raise ValueError("repeated edge in the input: the native counter needs a simple graph")
    return offsets, forward


@njit(cache=True)
def triangles(offsets, forward):
    """For every u and every v in u's forward list, |forward(u) after v ∩ forward(v)| by sorted merge."""
    total = 0
    for u in range(len(offsets) - 1):
        end = offsets[u + 1]
        for i in range(offsets[u], end):
            v = forward[i]
            p, q, q_end = i + 1, offsets[v], offsets[v + 1]
            while p < end and q < q_end:
                x, y = forward[p], forward[q]
                if x < y:
                    p += 1
                elif x > y:
                    q += 1
                else:
                    total += 1
                    p += 1
                    q += 1
    return total


@njit(cache=True)
def cliques(offsets, forward, k):
    """k-cliques, k >= 3: a depth-first walk over candidate buffers, one buffer per level."""
    n = len(offsets) - 1
    widest = 0
    for u in range(n):
        widest = max(widest, offsets[u + 1] - offsets[u])
    buffer = np.empty((k, widest + 1), np.int64)  # buffer[level]: candidates with level + 1 vertices chosen
    size = np.zeros(k, np.int64)
    at = np.zeros(k, np.int64)  # the candidate being tried at each level
    total = 0
    for u in range(n):
        size[1] = offsets[u + 1] - offsets[u]
        for t in range(size[1]):
            buffer[1, t] = forward[offsets[u] + t]
        level = 1
        at[1] = 0
        while level >= 1:
            if at[level] >= size[level]:
                level -= 1
                if level >= 1:
                    at[level] += 1
                continue
            v = buffer[level, at[level]]
            p, p_end = offsets[v], offsets[v + 1]
            q, q_end = at[level] + 1, size[level]  # candidates after v: ranked above it
            if level == k - 2:  # the last vertex: count, do not store
                found = 0
                while p < p_end and q < q_end:
                    x, y = forward[p], buffer[level, q]
                    if x < y:
                        p += 1
                    elif x > y:
                        q += 1
                    else:
                        found += 1
                        p += 1
                        q += 1
                total += found
                at[level] += 1
            else:
                w = 0
                while p < p_end and q < q_end:
                    x, y = forward[p], buffer[level, q]
                    if x < y:
                        p += 1
                    elif x > y:
                        q += 1
                    else:
                        buffer[level + 1, w] = x
                        w += 1
                        p += 1
                        q += 1
                level += 1
                size[level] = w
                at[level] = 0
    return total


@njit(cache=True)
def edge_triangles(offsets, forward):
    """Triangles on every edge, indexed by the edge's position in `forward`."""
    on_edge = np.zeros(len(forward), np.int64)
    for u in range(len(offsets) - 1):
        end = offsets[u + 1]
        for i in range(offsets[u], end):
            v = forward[i]
            p, q, q_end = i + 1, offsets[v], offsets[v + 1]
            while p < end and q < q_end:
                x, y = forward[p], forward[q]
                if x < y:
                    p += 1
                elif x > y:
                    q += 1
                else:
                    on_edge[i] += 1
                    on_edge[p] += 1
                    on_edge[q] += 1
                    p += 1
                    q += 1
    return on_edge


@njit(cache=True)
def houses(offsets, forward, on_edge):
    """Over every 4-clique u < v < w < x (ranks) and its six edges e, the sum of on_edge[e] − 2."""
    n = len(offsets) - 1
    widest = 0
    for u in range(n):
        widest = max(widest, offsets[u + 1] - offsets[u])
    third = np.empty(widest + 1, np.int64)  # common forward neighbours w of u and v,
    via_u = np.empty(widest + 1, np.int64)  # the position of edge (u, w)
    via_v = np.empty(widest + 1, np.int64)  # and of edge (v, w)
    total = 0
    for u in range(n):
        end = offsets[u + 1]
        for i in range(offsets[u], end):
            v = forward[i]
            found = 0
            p, q, q_end = i + 1, offsets[v], offsets[v + 1]
            while p < end and q < q_end:
                x, y = forward[p], forward[q]
                if x < y:
                    p += 1
                elif x > y:
                    q += 1
                else:
                    third[found], via_u[found], via_v[found] = x, p, q
                    found += 1
                    p += 1
                    q += 1
            for j in range(found):
                w = third[j]
                a, b, b_end = j + 1, offsets[w], offsets[w + 1]
                while a < found and b < b_end:
                    x, y = third[a], forward[b]
                    if x < y:
                        a += 1
                    elif x > y:
                        b += 1
                    else:  # the 4-clique u, v, w, x
                        total += (
                            on_edge[i]
                            + on_edge[via_u[j]]
                            + on_edge[via_v[j]]
                            + on_edge[via_u[a]]
                            + on_edge[via_v[a]]
                            + on_edge[b]
                            - 12
                        )
                        a += 1
                        b += 1
    return total


def count(src: np.ndarray, dst: np.ndarray, pattern) -> tuple[int, float]:
    """(count, seconds building the lists and counting) of a k-clique or house pattern."""
    if pattern.forbidden:
        raise ValueError("the native counter counts k-cliques and houses without anti-edges")
    if pattern.clique_size is not None:
        return count_cliques(src, dst, pattern.clique_size)
    if pattern.is_house:
        start = time.perf_counter()
        s, d, n = edge_arrays.dense(src, dst)
        offsets, forward = oriented_lists(s, d, n)
        total = houses(offsets, forward, edge_triangles(offsets, forward))
        return int(total), time.perf_counter() - start
    raise ValueError("the native counter counts undirected k-cliques and houses only")


def count_cliques(src: np.ndarray, dst: np.ndarray, k: int) -> tuple[int, float]:
    """(k-cliques of the simple undirected graph with these edges, seconds spent building the lists
    and counting). Ids may be any int64."""
    start = time.perf_counter()
    if k == 2:
        return len(src), time.perf_counter() - start
    s, d, n = edge_arrays.dense(src, dst)
    offsets, forward = oriented_lists(s, d, n)
    total = triangles(offsets, forward) if k == 3 else cliques(offsets, forward, k)
    return int(total), time.perf_counter() - start


def warm_up() -> None:
    """Compile (or load from numba's cache) every kernel, on K4: 4 triangles, one 4-clique."""
    src = np.array([0, 0, 0, 1, 1, 2], np.int64)
    dst = np.array([1, 2, 3, 2, 3, 3], np.int64)
    if (count_cliques(src, dst, 3)[0], count_cliques(src, dst, 4)[0], count_cliques(src, dst, 5)[0]) != (4, 1, 0):
        raise RuntimeError("native counter self-check failed on K4")
    offsets, forward = oriented_lists(src, dst, 4)
    if houses(offsets, forward, edge_triangles(offsets, forward)) != 0:
        raise RuntimeError("native counter self-check failed on K4 (houses)")
