"""Share allocation for Shares/HyperCube (Afrati & Ullman; Beame, Koutris & Suciu), and the query
parameters its theory is stated in.

Cells are the points of a grid with s_a coordinates per attribute a; a tuple of relation R goes to
every cell that agrees with it on R's attributes, so R is replicated prod_{a not in R} s_a times and
the total communication is C(s) = sum_R |R| prod_{a not in R} s_a, over P = prod_a s_a cells.

Method: exact search over every integer vector with P <= W. For a fixed number of cells P,
Afrati & Ullman minimise C; C / P is then the expected load of one cell, so across P we take the
vector with the least C / P (more cells only when they lower the load), then the least C, then
larger shares on attributes earlier in the Generic Join order (hashing the first attributes splits
the local joins' work as well as their input).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np


@dataclass(frozen=True)
class Relation:
    name: str
    attributes: tuple[str, ...]
    size: int


@dataclass(frozen=True)
class Allocation:
    shares: dict[str, int]  # attribute -> share, in Generic Join order
    cells: int
    communication: int  # predicted tuples shipped, C(s)
    candidates: int  # share vectors examined

    @property
    def load_per_cell(self) -> float:
        return self.communication / self.cells


def replication(shares: dict[str, int], relation: Relation) -> int:
    return math.prod(s for a, s in shares.items() if a not in relation.attributes)


def communication(shares: dict[str, int], relations: list[Relation]) -> int:
    return sum(r.size * replication(shares, r) for r in relations)


def share_vectors(m: int, workers: int):
    """Every vector of m positive integers whose product is at most `workers`."""

    def extend(prefix: tuple[int, ...], budget: int):
        if len(prefix) == m:
            yield prefix
            return
        for s in range(1, budget + 1):
            yield from extend(prefix + (s,), budget // s)

    yield from extend((), workers)


def allocate(attributes: tuple[str, ...], relations: list[Relation], workers: int) -> Allocation:
    best_key: tuple | None = None
    best: tuple[dict[str, int], int, int] | None = None
    examined = 0
    for vector in share_vectors(len(attributes), workers):
        examined += 1
        shares = dict(zip(attributes, vector))
        cost, cells = communication(shares, relations), math.prod(vector)
        key = (Fraction(cost, cells), cost, tuple(-s for s in vector))
        if best_key is None or key < best_key:
            best_key, best = key, (shares, cells, cost)
    assert best is not None  # share_vectors yields (1, ..., 1) at least
    shares, cells, cost = best
    return Allocation(shares, cells, cost, examined)


def edge_cover_and_packing(attributes: tuple[str, ...], relations: list[Relation]) -> tuple[float, float]:
    """(rho*, tau*): the fractional edge cover and edge packing numbers of the query's hypergraph.
    Appendix F states HyperCube's load as IN / W^(1/rho*) or IN / W^(1/tau*)."""
    from scipy.optimize import linprog

    incidence = np.array([[1.0 if a in r.attributes else 0.0 for r in relations] for a in attributes])
    ones = np.ones(len(relations))
    cover = linprog(ones, A_ub=-incidence, b_ub=-np.ones(len(attributes)), bounds=(0, None), method="highs")
    packing = linprog(-ones, A_ub=incidence, b_ub=np.ones(len(attributes)), bounds=(0, None), method="highs")
    assert cover.fun is not None and packing.fun is not None  # both programs are feasible and bounded
    return round(float(cover.fun), 6), round(float(-packing.fun), 6)
