"""Benchmark and verification harness for distributed worst-case-optimal subgraph joins on Spark."""
