#!/usr/bin/env bash
set -u
export HARNESS_STORE=/work/main/.cache HARNESS_CACHE=/work/main/.cache HARNESS_SHARED=/work/shared
PY=/work/main/.venv/bin/python
W=$1
for round in 1 2; do
for side in before gate; do
  cd /work/wt-$side && $PY -m harness bench $W --results /tmp/perf21/$side-$round 2>&1 | grep -E "^\[" | sed "s/^/$side $round /"
done
done
