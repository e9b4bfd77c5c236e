"""Names the plan, the kernels and the indices share, each defined once."""

# Index kinds. Undirected: neighbours ranked above the key / below it / all of them (the
# concatenation of the two, which is sorted). Directed: out-neighbours / in-neighbours.
# As a relation of (early, late) pairs over edge rows (src, dst) (undirected rows have src < dst):
# FORWARD is (src, dst), REVERSE is (dst, src), BOTH is their union.
FORWARD, REVERSE, BOTH = 0, 1, 2
# Index views, which a relation reads (Delta-BiGJoin): the index with the current update batch
# applied, or as it was before it. Static indices have no changes, so both views are the same.
CURRENT, OLD = 0, 1

INT32_MAX = 2**31 - 1  # vertex ranks are int32; the open upper bound of a value range
