"""The generic-join primitives every implementation shares: the plan, sorted lists (CSR) and their
kernels, vertex keys and owners, the blob exchange between workers, the memory budget B' and the
match files. Imports harness.core alone."""
