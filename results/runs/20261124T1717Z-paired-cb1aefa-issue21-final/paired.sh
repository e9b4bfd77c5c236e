#!/usr/bin/env bash
# Paired timing, issue 21: cb1aefa (before the redesign) beside the final tree, alternating sides.
set -u
export HARNESS_STORE=/work/main/.cache HARNESS_CACHE=/work/main/.cache HARNESS_SHARED=/work/shared
PY=/work/main/.venv/bin/python
run() {  # side workload
  cd /work/wt-$1 && $PY -m harness bench /tmp/perf/$2.yaml --results /tmp/perf/out/$1-$2 2>&1 | grep -E "^\[" | sed "s/^/$1 /"
}
run before c4-three; run new c4-three
run new tri-three; run before tri-three
run before c4-bjs; run new c4-bjs
