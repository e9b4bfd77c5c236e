import sys, collections
def load(path):
    incl = collections.Counter(); leaf = collections.Counter(); total = 0
    for line in open(path):
        stack, _, n = line.rstrip().rpartition(" ")
        n = int(n); total += n
        frames = stack.split(";")
        seen = set()
        for f in frames:
            key = f.split(" (")[0] + " (" + f.split(" (")[1].split(":")[0].rsplit("/",1)[-1] if " (" in f else f
            if key not in seen:
                incl[key] += n; seen.add(key)
        leaf[frames[-1]] += n
    return incl, leaf, total
a = load(sys.argv[1]); b = load(sys.argv[2])
print("total", a[2], b[2])
keys = set(k for k, v in a[0].items() if v > 100) | set(k for k, v in b[0].items() if v > 100)
rows = sorted(keys, key=lambda k: -(b[0][k] - a[0][k]))
for k in rows[:40]:
    print(f"{a[0][k]:7d} {b[0][k]:7d} {b[0][k]-a[0][k]:+7d}  {k}")
print("--- leaves")
keys = set(k for k, v in a[1].items() if v > 80) | set(k for k, v in b[1].items() if v > 80)
for k in sorted(keys, key=lambda k: -(b[1][k] - a[1][k]))[:30]:
    print(f"{a[1][k]:7d} {b[1][k]:7d} {b[1][k]-a[1][k]:+7d}  {k}")
