"""The memory budget of the BiGJoin dataflow (§3.1.2, Lemma 3.1): bytes of in-flight data per worker,
from which B', the proposals one worker makes per batch, follows per level.

What a batch at level j holds in flight at the worker that proposes it, at most:
  per prefix in its window   the queued row and its candidate row: (j + 3) + (j + 2) int32s;
  per proposal               the candidate (one int32) and, unless j is the last level, the (j+1)-prefix
                             it becomes if every relation agrees: (j + 1) + 3 int32s.
A window takes queued prefixes until those bytes reach the budget, so a batch never holds more; B'
of level j is the budget over the bytes of one proposal (what a window of a single long list takes).
A last level read from one list and nothing else (`ExtensionPlan.last_from_one_list`, where the job's
`counts_last` allows it: a 3-star's or a 4-path's last vertex) counts each list's length where it is proposed and holds no proposal: its window is
bounded by its prefixes alone.
`--batch` pins B' instead, the same at every level, and the window then counts proposals only."""

from __future__ import annotations

import re
from dataclasses import dataclass

from harness.core.params import human, parse_size

INT = 4  # bytes of an int32
MIN_BUDGET = 16 << 20
# Under a cap the budget may go far lower: a batch this small still proposes tens of thousands of
# extensions (B' >= 2^20 / 32 at every level of a query of up to 5 attributes), and a cap that can hold
# the index share plus such a batch is the paper's promise to keep (issue 39).
MIN_CAPPED_BUDGET = 1 << 20
MAX_BUDGET = 4 << 30
UNBOUNDED = 1 << 62  # B' of a level whose proposals take no memory
# The share of a worker's memory the default budget takes: in-flight data is also copied into the
# outgoing blobs and through the JVM's Arrow buffers, and the index and the interpreter need the rest.
WORKER_MEMORY_SHARE = 4
# Under a memory cap: the most a worker's resident memory grew above its idle, per byte the cost model
# counts (index share + prefixes in flight), measured over clique4 on rmat-12 at W 2/4/8 and caps
# 512m-1g (results/README.md, "The memory wall"): Arrow buffers in the JVM, numpy in Python, the
# proposals, candidates and outgoing blobs each hold a copy of what is in flight.
COPY_FACTOR = 21


@dataclass(frozen=True)
class Budget:
    """Either a byte budget per worker (`bytes`) or a pinned B' (`batch`)."""

    bytes: int | None
    batch: int | None
    m: int  # attributes of the query
    source: str  # how it was chosen, for the record
    counted_last: bool = False  # the last level's proposals are counted, never held

    def counting_last(self, counted: bool) -> Budget:
        return Budget(self.bytes, self.batch, self.m, self.source, counted)

    def row_bytes(self, level: int) -> int:
        """In-flight bytes of one prefix of a level-`level` window, whatever its proposals."""
        return INT * ((level + 3) + (level + 2))

    def proposal_bytes(self, level: int) -> int:
        if level + 1 == self.m:
            return 0 if self.counted_last else INT
        return INT * (1 + level + 4)

    def proposals(self, level: int) -> int:
        """B' of `level`: the most proposals one worker makes in one batch."""
        if self.batch is not None:
            return self.batch
        assert self.bytes is not None
        per = self.proposal_bytes(level)
        return max(1, self.bytes // per) if per else UNBOUNDED

    def share(self, parts: int) -> Budget:
        """One of `parts` equal shares (extensions that run side by side in one job)."""
        if parts == 1:
            return self
        bytes_ = None if self.bytes is None else max(1, self.bytes // parts)
        batch = None if self.batch is None else max(1, self.batch // parts)
        return Budget(bytes_, batch, self.m, f"{self.source}, one of {parts} shares", self.counted_last)

    def describe(self) -> dict:
        levels = range(1, self.m)
        return {
            "memory_budget_bytes": self.bytes,
            "memory_budget": human(self.bytes) if self.bytes is not None else None,
            "budget_source": self.source,
            # None: a last level counted where it is proposed, bounded by its prefixes, not by B'
            "batch_per_level": {f"L{j}": (None if self.proposal_bytes(j) == 0 else self.proposals(j)) for j in levels},
        }


def worker_memory(conf: dict, master: str, workers: int) -> tuple[int, str]:
    """(bytes, where from) of the memory Spark gives one worker: its executor's heap (the driver's, in
    local mode) over the tasks that executor runs at once, plus its share of the Python memory Spark
    grants (spark.executor.pyspark.memory), if any. (Under a memory cap, `capped_budget` instead.)"""
    local = master.startswith("local")
    heap_key = "spark.driver.memory" if local else "spark.executor.memory"
    heap = parse_size(conf.get(heap_key, "1g"), heap_key)
    if local:
        found = re.match(r"local\[(\d+|\*)", master)
        slots = int(found.group(1)) if found and found.group(1) != "*" else int(conf.get("cores", 1))
    else:
        slots = int(conf.get("spark.executor.cores", 1))
    slots = max(1, min(slots, workers)) if local else max(1, slots)
    python = parse_size(conf["spark.executor.pyspark.memory"]) if conf.get("spark.executor.pyspark.memory") else 0
    return (heap + python) // slots, f"{heap_key}={conf.get(heap_key, '1g')} over {slots} task slot(s)"


def default_budget(worker_bytes: int, index_bytes: int) -> int:
    """The default: a quarter of a worker's memory, less its index partition, within [16 MiB, 4 GiB]."""
    return _clamped(worker_bytes // WORKER_MEMORY_SHARE - index_bytes)


def capped_budget(cap: int, idle: int, index_bytes: int) -> int:
    """The default under a cap of `cap` bytes per worker: what the cap leaves above the worker's idle
    resident memory and its index partition, over the copies in-flight data makes, within [1 MiB, 4 GiB]."""
    return _clamped((cap - idle - index_bytes) // COPY_FACTOR, MIN_CAPPED_BUDGET)


def _clamped(budget: int, floor: int = MIN_BUDGET) -> int:
    return int(min(MAX_BUDGET, max(floor, budget)))
