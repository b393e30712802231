#!/usr/bin/env python3
"""appbench.py PATH N: appends N records of 64 bytes to PATH, each its own
write(2) with O_APPEND, and prints the rate (used by bench-append.sh)."""
import os, sys, time

p, n = sys.argv[1], int(sys.argv[2])
fd = os.open(p, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
rec = b"x" * 63 + b"\n"
t = time.time()
for _ in range(n):
    os.write(fd, rec)
os.close(fd)
print("%.0f appends/s" % (n / (time.time() - t)))
