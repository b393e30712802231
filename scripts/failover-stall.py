#!/usr/bin/env python3
"""failover-stall.py LEADER_PID: runs 30 `nacre mkdir`, each a new client
process, pausing the MDT leader (SIGSTOP: a GC pause, a frozen VM) before
the 9th and resuming it at the end; prints each mkdir's time. Run from the
repository with bin/nacre built and NACRE_MGS naming a cluster started with
`nacre up --replicas 3`."""
import os, signal, subprocess, sys, time

pid = int(sys.argv[1])
times = []
try:
    for i in range(30):
        if i == 8:
            os.kill(pid, signal.SIGSTOP)
        t = time.time()
        r = subprocess.run(["bin/nacre", "mkdir", f"/stall{i}"], capture_output=True, text=True)
        times.append(time.time() - t)
        if r.returncode != 0:
            print("fail", i, r.stderr.strip())
finally:
    os.kill(pid, signal.SIGCONT)
print("per mkdir (s):", " ".join(f"{x:.2f}" for x in times))
print("max %.2f s, median %.2f s" % (max(times), sorted(times)[len(times) // 2]))
