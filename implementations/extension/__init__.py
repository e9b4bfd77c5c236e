"""Prefix extension (§3.1) as dataflows: its items, a worker's share of a stage and the one-level
job (items, stage, job), and the pipelined dataflow with its kernels. Imports implementations.gj,
implementations.indices and harness.core."""
