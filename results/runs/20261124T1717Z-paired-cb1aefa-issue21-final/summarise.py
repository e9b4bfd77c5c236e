"""Median query_s per (implementation, query, dataset) and side, from the paired run's result files."""

import collections
import glob
import json
import statistics
import sys

root = sys.argv[1] if len(sys.argv) > 1 else "/tmp/perf/out"
times = collections.defaultdict(lambda: collections.defaultdict(list))
counts = collections.defaultdict(set)
logical = collections.defaultdict(dict)  # (implementation, query) -> side -> the first trial's logical counters
for path in sorted(glob.glob(f"{root}/*/*.json")):
    record = json.load(open(path))
    if "implementation" not in record:
        continue
    side = path.split("/")[-2].split("-")[0]
    query = record["query"]["name"] if isinstance(record["query"], dict) else record["query"]
    if "logical" in record:
        logical[(record["implementation"], query)].setdefault(side, json.dumps(record["logical"], sort_keys=True))
    if "metrics" not in record:
        continue
    key = (record["implementation"], query, record["dataset"] if isinstance(record["dataset"], str) else record["dataset"].get("name"))
    times[key][side].append(record["metrics"]["query_s"])
    counts[key].add(record["count"])
print("| implementation | query | dataset | trials | cb1aefa median query_s | final tree | new / old | trials before | trials after |")
print("|---|---|---|---|---|---|---|---|---|")
for key, sides in times.items():
    old, new = sides.get("before", []), sides.get("new", [])
    if not old or not new:
        continue
    mo, mn = statistics.median(old), statistics.median(new)
    print(
        f"| {key[0]} | {key[1]} | {key[2]} | {len(old)}+{len(new)} | {mo:.3f} | {mn:.3f} | {mn / mo:.3f}x | "
        f"{', '.join(f'{t:.2f}' for t in old)} | {', '.join(f'{t:.2f}' for t in new)} |"
    )
print("counts:", {f"{k[0]} {k[1]} {k[2]}": sorted(v) for k, v in counts.items()})
for key, sides in logical.items():
    if len(sides) == 2:
        print("logical counters", key, "identical" if sides["before"] == sides["new"] else "DIFFER")
