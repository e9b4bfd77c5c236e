import json, sys, glob, os, statistics as st
d = sys.argv[1]
rows = {}
for f in sorted(glob.glob(os.path.join(d, "*.json"))):
    r = json.load(open(f))
    m = r["metrics"]; tb = m.get("time_breakdown", {})
    name = os.path.basename(f)[:-5]
    q = tb.get("query", {}); ix = tb.get("index", {})
    print(f"{name:36s} count={r['count']} status={r['status']} index={m['index_s']:.2f} query={m['query_s']:.2f} sum={m['index_s']+m['query_s']:.2f} "
          f"py={q.get('python_task_s')} sched={q.get('scheduling_s')} fetchwait={q.get('shuffle_fetch_wait_s')} ixsched={ix.get('scheduling_s')} ixrun={ix.get('executor_run_s')} shuffle_bytes={m.get('shuffle_bytes')}")
