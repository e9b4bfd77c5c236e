"""Graphs in: datasets (registry, generators, edge-list files), their canonical Parquet under a
semantics, vertex labels and update streams. Imports harness.core alone."""
