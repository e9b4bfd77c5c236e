#!/usr/bin/env bash
# The cost of the isolated 2-host cluster against local mode, same code, same store, same W=2, alternating.
set -u
cd /work/main
PY=/work/main/.venv/bin/python; OUT=${OUT:-/tmp/work/perf2/mh}; CL=/tmp/work/cl/c
mkdir -p $OUT
export HARNESS_STORE=$CL-store HARNESS_SHARED=/work/shared
MASTER=spark://127.0.0.1:7177
$PY -c "from harness import cluster; from pathlib import Path; cluster.up(Path('$CL'), workers=2, cores=1, memory='4g', port=7177, webui_port=8180, isolated=True)"
run() {  # query dataset mode tag
  m=$([ $3 = local ] && echo 'local[2]' || echo $MASTER)
  $PY -m harness run --master "$m" --workers 2 --query $1 --dataset $2 --impl bigjoin --oracle none --json $OUT/$1-$2-$3-$4.json >$OUT/$1-$2-$3-$4.log 2>&1
  echo "$(date +%T) $1 $2 $3 $4 rc=$?"
}
for mode in local cluster; do run triangle rmat-small $mode warm; done
for mode in local cluster; do run triangle rmat-18 $mode warm; done
for trial in 1 2; do
  run triangle rmat-18 local $trial
  run triangle rmat-18 cluster $trial
done
run clique4 rmat-16 local 1
run clique4 rmat-16 cluster 1
$PY -m harness cluster down --dir $CL
