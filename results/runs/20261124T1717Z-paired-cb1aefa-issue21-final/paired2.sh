#!/usr/bin/env bash
# Paired timing, issue 21, round 2: BiGJoin after the view fix, then BiGJoin-S; alternating sides.
set -u
export HARNESS_STORE=/work/main/.cache HARNESS_CACHE=/work/main/.cache HARNESS_SHARED=/work/shared
PY=/work/main/.venv/bin/python
run() {  # side workload
  cd /work/wt-$1 && $PY -m harness bench /tmp/perf/$2.yaml --results /tmp/perf/out2/$1-$2 2>&1 | grep -E "^\[" | sed "s/^/$1 /"
}
run new c4-bj; run before c4-bj
run before tri-bj; run new tri-bj
run before c4-bjs; run new c4-bjs
