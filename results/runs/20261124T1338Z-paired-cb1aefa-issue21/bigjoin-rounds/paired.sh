#!/usr/bin/env bash
set -u
export HARNESS_STORE=/work/main/.cache HARNESS_CACHE=/work/main/.cache HARNESS_SHARED=/work/shared
PY=/work/main/.venv/bin/python
for side in gate before gate before; do
  n=$(ls -d /tmp/perf21/$side-bj* 2>/dev/null | wc -l)
  cd /work/wt-$side && $PY -m harness bench /tmp/perf21-bj.yaml --results /tmp/perf21/$side-bj$((n+1)) > /dev/null 2>&1
done
