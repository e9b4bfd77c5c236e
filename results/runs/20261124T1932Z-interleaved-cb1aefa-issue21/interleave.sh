#!/usr/bin/env bash
# Interleaved paired timing: alternate old/new processes, pairs START (default 1) to N; each process runs WORKLOAD.
set -u
W=$1; N=$2; OUT=$3
export HARNESS_STORE=/work/main/.cache HARNESS_CACHE=/work/main/.cache HARNESS_SHARED=/work/shared
PY=/work/main/.venv/bin/python
for i in $(seq ${START:-1} $N); do
  if [ $((i % 2)) = 1 ]; then order="before new"; else order="new before"; fi
  for side in $order; do
    cd /work/wt-$side && $PY -m harness bench /tmp/perf/$W.yaml --results $OUT/$side-$i 2>&1 | grep -E "^\[" | sed "s/^/$side $i /"
  done
done
