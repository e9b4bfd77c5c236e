#!/usr/bin/env bash
# Paired local-mode runs: d1daf48 (old, the design when issue 20 started) vs this checkout (new),
# alternating, bigjoin index+query, one shared graph cache.
set -u
OLD=/tmp/work/old; NEW=/work/main; PY=/work/main/.venv/bin/python; OUT=${OUT:-/tmp/work/perf2/out}
mkdir -p $OUT
export HARNESS_STORE=/work/main/.cache HARNESS_CACHE=/work/main/.cache HARNESS_SHARED=/work/shared
run() {  # query dataset side tag
  tree=$([ $3 = old ] && echo $OLD || echo $NEW)
  (cd $tree && $PY -m harness run --query $1 --dataset $2 --impl bigjoin --oracle none --json $OUT/$1-$2-$3-$4.json >/dev/null 2>&1)
  echo "$(date +%T) $1 $2 $3 $4 rc=$?"
}
for side in old new; do run triangle rmat-small $side warm; done
run triangle lj-twin old 1
run triangle lj-twin new 1
for trial in 1 2; do
  for case in "triangle rmat-18" "clique4 rmat-16"; do
    set -- $case
    run $1 $2 old $trial
    run $1 $2 new $trial
  done
done
