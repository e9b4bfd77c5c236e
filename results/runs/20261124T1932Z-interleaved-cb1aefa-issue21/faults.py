"""Sample minor page faults and CPU of pyspark worker processes until the file STOP exists; print totals."""
import os, sys, time
seen = {}
stop = sys.argv[1]
while not os.path.exists(stop):
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read()
            if b"pyspark.daemon" not in cmd:
                continue
            f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
            seen[pid] = (int(f[7]), int(f[11]), int(f[12]))  # minflt, utime+stime (ticks)
        except OSError:
            pass
    time.sleep(0.5)
print("minflt", sum(v[0] for v in seen.values()), "utime_s", sum(v[1] for v in seen.values()) / os.sysconf("SC_CLK_TCK"), "stime_s", sum(v[2] for v in seen.values()) / os.sysconf("SC_CLK_TCK"))
