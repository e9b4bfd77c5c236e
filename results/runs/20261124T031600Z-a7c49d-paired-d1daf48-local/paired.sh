#!/usr/bin/env bash
# Paired local-mode runs: d1daf48 (old) vs the working tree (new), alternating, bigjoin index+query.
set -u
OLD=/tmp/work/old; NEW=/work/main; PY=/work/main/.venv/bin/python; OUT=/tmp/work/perf/out
mkdir -p $OUT
export HARNESS_STORE=/work/main/.cache HARNESS_CACHE=/work/main/.cache HARNESS_SHARED=/work/shared
for side in old new; do
  tree=$([ $side = old ] && echo $OLD || echo $NEW)
  (cd $tree && $PY -m harness run --query triangle --dataset rmat-small --impl bigjoin --oracle none --json $OUT/warm-$side.json >/dev/null 2>&1)
done
for trial in 1 2; do
  for case in "triangle rmat-18" "clique4 rmat-16"; do
    set -- $case
    for side in old new; do
      tree=$([ $side = old ] && echo $OLD || echo $NEW)
      (cd $tree && $PY -m harness run --query $1 --dataset $2 --impl bigjoin --oracle none --json $OUT/$1-$2-$side-$trial.json >/dev/null 2>&1)
      echo "$(date +%T) $1 $2 $side $trial rc=$?"
    done
  done
done
