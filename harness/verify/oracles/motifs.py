"""Induced 3- and 4-vertex patterns (the motif census class) from non-induced counts, part of the
native oracle: plain numba over the native counter's degree-ordered lists, sharing nothing with the
implementations, and enumerating no 4-vertex match except the 4-cliques.

The non-induced counts (copies of the shape as a subgraph, not necessarily induced), from the
degrees d, the triangles t(e) on each edge and t(v) at each vertex:
- wedge Σ_v C(d_v, 2); triangle Σ_e t(e) / 3; star3 Σ_v C(d_v, 3);
- path4 Σ_{uv} (d_u − 1)(d_v − 1) − 3·triangles (the middle edge, minus its closed ends);
- tailed_triangle Σ_v t(v)(d_v − 2) (a triangle and one more edge at one of its vertices);
- diamond Σ_e C(t(e), 2) (two triangles on their shared edge);
- cycle4: for every vertex u, the paths u − v − w through lower-ranked v and w, grouped by w: the
  pairs of paths to the same w close a 4-cycle whose highest-ranked vertex is u, so each is counted
  once (Chiba and Nishizeki's order);
- clique4: the native k-clique counter.
A vertex set inducing shape H' holds c(H, H') copies of H (`CONTAINS`), so non-induced(H) =
Σ_{H'} c(H, H')·induced(H'), a triangular system; `INDUCED_FROM` is its inverse (the relations of
Pržulj's graphlets and ORCA), and tests/test_oracles.py checks both against networkx."""

from __future__ import annotations

import time
from functools import cached_property

import numpy as np
from numba import njit

from harness.verify.oracles import edges as edge_arrays
from harness.verify.oracles import native

# CONTAINS[H][H']: copies of H among the edges of H', for the shapes on the same number of vertices.
CONTAINS = {
    "wedge": {"wedge": 1, "triangle": 3},
    "triangle": {"triangle": 1},
    "star3": {"star3": 1, "tailed_triangle": 1, "diamond": 2, "clique4": 4},
    "path4": {"path4": 1, "tailed_triangle": 2, "cycle4": 4, "diamond": 6, "clique4": 12},
    "tailed_triangle": {"tailed_triangle": 1, "diamond": 4, "clique4": 12},
    "cycle4": {"cycle4": 1, "diamond": 1, "clique4": 3},
    "diamond": {"diamond": 1, "clique4": 6},
    "clique4": {"clique4": 1},
}
# INDUCED_FROM[H][H']: induced(H) = Σ INDUCED_FROM[H][H']·non_induced(H'), CONTAINS inverted.
INDUCED_FROM = {
    "wedge": {"wedge": 1, "triangle": -3},
    "triangle": {"triangle": 1},
    "star3": {"star3": 1, "tailed_triangle": -1, "diamond": 2, "clique4": -4},
    "path4": {"path4": 1, "tailed_triangle": -2, "cycle4": -4, "diamond": 6, "clique4": -12},
    "tailed_triangle": {"tailed_triangle": 1, "diamond": -4, "clique4": 12},
    "cycle4": {"cycle4": 1, "diamond": -1, "clique4": 3},
    "diamond": {"diamond": 1, "clique4": -6},
    "clique4": {"clique4": 1},
}


def applicable(pattern) -> str | None:
    """None if this counter answers the pattern: an undirected induced one (by `induced` or by
    anti-edges on every non-adjacent pair) whose shape is one of the eight."""
    if pattern.motif is None or not pattern.induced_in_effect:
        return "counts induced undirected patterns on 3 or 4 vertices (wedge, triangle and the six 4-vertex shapes) only"
    return None


@njit(cache=True)
def _full_lists(offsets, forward):
    """(starts, neighbours, lower_end): every vertex's neighbours sorted by rank, the lower-ranked
    ones in neighbours[starts[v]:lower_end[v]], from the oriented lists."""
    n = len(offsets) - 1
    lower = np.zeros(n, np.int64)
    for i in range(len(forward)):
        lower[forward[i]] += 1
    starts = np.zeros(n + 1, np.int64)
    for v in range(n):
        starts[v + 1] = starts[v] + lower[v] + offsets[v + 1] - offsets[v]
    lower_end = starts[:-1] + lower
    fill = starts[:-1].copy()
    neighbours = np.empty(2 * len(forward), np.int64)
    for u in range(n):  # u ascending: each row's lower part fills in sorted order
        for i in range(offsets[u], offsets[u + 1]):
            v = forward[i]
            neighbours[fill[v]] = u
            fill[v] += 1
        width = offsets[u + 1] - offsets[u]
        neighbours[lower_end[u] : lower_end[u] + width] = forward[offsets[u] : offsets[u + 1]]
    return starts, neighbours, lower_end


@njit(cache=True)
def _four_cycles(starts, neighbours, lower_end):
    """Non-induced 4-cycles, each at its highest-ranked vertex u: for the lower neighbours v of u and
    their neighbours w below u, paths[w] paths u − v − w; C(paths[w], 2) cycles close through w."""
    n = len(starts) - 1
    paths = np.zeros(n, np.int64)
    touched = np.empty(n, np.int64)
    total = 0
    for u in range(n):
        reached = 0
        for i in range(starts[u], lower_end[u]):
            v = neighbours[i]
            for j in range(starts[v], starts[v + 1]):
                w = neighbours[j]
                if w >= u:
                    break
                if paths[w] == 0:
                    touched[reached] = w
                    reached += 1
                paths[w] += 1
        for t in range(reached):
            w = touched[t]
            total += paths[w] * (paths[w] - 1) // 2
            paths[w] = 0
    return total


@njit(cache=True)
def _edge_sums(offsets, forward, degree, on_edge):
    """(Σ_uv (d_u − 1)(d_v − 1), Σ_e C(t(e), 2), Σ_v t(v)(d_v − 2)) over the oriented edges u -> v."""
    n = len(offsets) - 1
    at_vertex = np.zeros(n, np.int64)  # 2·t(v): each triangle at v lies on two of v's edges
    middles = 0
    diamonds = 0
    for u in range(n):
        for i in range(offsets[u], offsets[u + 1]):
            v, t = forward[i], on_edge[i]
            middles += (degree[u] - 1) * (degree[v] - 1)
            diamonds += t * (t - 1) // 2
            at_vertex[u] += t
            at_vertex[v] += t
    tails = 0
    for v in range(n):
        tails += at_vertex[v] // 2 * (degree[v] - 2)
    return middles, diamonds, tails


class NonInduced:
    """The non-induced counts of one simple graph, each computed when first asked for."""

    def __init__(self, src: np.ndarray, dst: np.ndarray):
        s, d, n = edge_arrays.dense(src, dst)
        self.offsets, self.forward = native.oriented_lists(s, d, n)
        self.degree = (np.diff(self.offsets) + np.bincount(self.forward, minlength=n)).astype(np.int64)

    @cached_property
    def on_edge(self) -> np.ndarray:
        return native.edge_triangles(self.offsets, self.forward)

    @cached_property
    def sums(self) -> tuple[int, int, int]:
        middles, diamonds, tails = _edge_sums(self.offsets, self.forward, self.degree, self.on_edge)
        return int(middles), int(diamonds), int(tails)

    def count(self, shape: str) -> int:
        d = [int(x) for x in self.degree]  # Python ints: the binomials of a hub's degree stay exact
        if shape == "wedge":
            return sum(x * (x - 1) // 2 for x in d)
        if shape == "star3":
            return sum(x * (x - 1) * (x - 2) // 6 for x in d)
        if shape == "triangle":
            return int(self.on_edge.sum()) // 3
        if shape == "path4":
            return self.sums[0] - 3 * self.count("triangle")
        if shape == "diamond":
            return self.sums[1]
        if shape == "tailed_triangle":
            return self.sums[2]
        if shape == "cycle4":
            return int(_four_cycles(*_full_lists(self.offsets, self.forward)))
        if shape == "clique4":
            return int(native.cliques(self.offsets, self.forward, 4))
        raise ValueError(f"no non-induced count for {shape}")


def count(src: np.ndarray, dst: np.ndarray, pattern) -> tuple[int, float]:
    """(the induced count of the pattern's shape, seconds building the lists and counting)."""
    reason = applicable(pattern)
    if reason is not None:
        raise ValueError(reason)
    start = time.perf_counter()
    graph = NonInduced(src, dst)
    total = sum(weight * graph.count(shape) for shape, weight in INDUCED_FROM[pattern.motif].items())
    return total, time.perf_counter() - start


def warm_up() -> None:
    """Compile (or load from numba's cache) the kernels, on K4 minus an edge: one induced diamond."""
    graph = NonInduced(np.array([0, 0, 0, 1, 1], np.int64), np.array([1, 2, 3, 2, 3], np.int64))
    if (graph.count("cycle4"), graph.count("diamond"), graph.count("tailed_triangle"), graph.count("path4")) != (1, 1, 4, 6):
        raise RuntimeError("motif counter self-check failed on K4 minus an edge")
