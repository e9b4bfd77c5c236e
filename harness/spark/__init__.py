"""Spark as the harness runs it: the session, a standalone cluster on this machine (capped or not),
its history, the executors' kernel cache and warm daemon, and what Spark measures (counters, floor,
processes' memory). Imports the layers below and implementations/ (to warm their kernels)."""
