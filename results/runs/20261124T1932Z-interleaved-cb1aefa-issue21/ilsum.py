"""Summarise an interleaved paired run: DIR/{before,new}-{i}/*.json -> per-trial query_s and clocks."""
import glob, json, statistics, sys
from collections import defaultdict
root = sys.argv[1]
rows = defaultdict(list)  # (side, trial index) -> [(pair, query_s, kernel, pack, io)]
counts = set()
logical = defaultdict(set)  # (side, trial index) -> the logical counters of those runs (trial 1 builds the index)
for side in ("before", "new"):
    for d in sorted(glob.glob(f"{root}/{side}-*")):
        pair = int(d.rsplit("-", 1)[1])
        for t, f in enumerate(sorted(glob.glob(f"{d}/*.json"))):
            r = json.load(open(f))
            m = r["metrics"]
            clocks = m.get("time_breakdown", {}).get("query", {}).get("python_task_s", {})
            rows[(side, t)].append((pair, m["query_s"], clocks.get("kernel"), clocks.get("pack"), clocks.get("io")))
            counts.add(r["count"])
            logical[(side, t)].add(json.dumps(r["logical"], sort_keys=True))
print("counts", counts)
positions = sorted({t for _, t in logical})
same = all(len(logical[("before", t)]) == 1 and logical[("before", t)] == logical[("new", t)] for t in positions)
print("logical counters", "identical on both sides at every trial position" if same else "DIFFER")
trials = sorted({t for _, t in rows})
for t in trials:
    b, n = rows[("before", t)], rows[("new", t)]
    mb, mn = statistics.median(x[1] for x in b), statistics.median(x[1] for x in n)
    print(f"trial {t + 1}: before median {mb:.3f} {[round(x[1], 2) for x in b]}  new median {mn:.3f} {[round(x[1], 2) for x in n]}  new/old {mn / mb:.3f}")
    for name, k in (("kernel", 2), ("pack", 3), ("io", 4)):
        vb = [x[k] for x in b if x[k] is not None]; vn = [x[k] for x in n if x[k] is not None]
        if vb and vn:
            print(f"   {name}: before median {statistics.median(vb):.2f} new median {statistics.median(vn):.2f}")
    ratios = [nn[1] / bb[1] for bb, nn in zip(sorted(b), sorted(n))]
    print(f"   per-pair new/old: {[round(x, 3) for x in ratios]} median {statistics.median(ratios):.3f}")
allb = [x[1] for t in trials if t > 0 for x in rows[("before", t)]] or [x[1] for x in rows[("before", 0)]]
alln = [x[1] for t in trials if t > 0 for x in rows[("new", t)]] or [x[1] for x in rows[("new", 0)]]
print(f"steady trials (2+ if any): before median {statistics.median(allb):.3f} (n={len(allb)}), new median {statistics.median(alln):.3f} (n={len(alln)}), new/old {statistics.median(alln) / statistics.median(allb):.3f}")
