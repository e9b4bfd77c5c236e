#!/usr/bin/env bash
# Round 3: BiGJoin triangle again, in reverse order (final tree first).
set -u
while pgrep -f paired2.sh >/dev/null; do sleep 5; done
export HARNESS_STORE=/work/main/.cache HARNESS_CACHE=/work/main/.cache HARNESS_SHARED=/work/shared
PY=/work/main/.venv/bin/python
run() {
  cd /work/wt-$1 && $PY -m harness bench /tmp/perf/$2.yaml --results /tmp/perf/out3/$1-$2 2>&1 | grep -E "^\[" | sed "s/^/$1 /"
}
run new tri-bj; run before tri-bj
