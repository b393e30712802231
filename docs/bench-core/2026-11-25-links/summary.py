#!/usr/bin/env python3
"""Prints the link benchmark's ops/s per file system and link count
(median over repetitions), and how much slower 4000 links are than 1000."""
import glob, json, os, statistics, sys
d = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
runs = {}
for p in glob.glob(os.path.join(d, "*.json")):
    fs, n, _ = os.path.basename(p)[:-5].rsplit("-", 2)
    for ph in json.load(open(p))["phases"]:
        runs.setdefault((fs, int(n), ph["name"]), []).append(ph["ops_per_sec"])
fss = ["local", "mfs", "nacre", "nacre-lib", "nacre-lib-old"]
phases = ["link_create", "link_stat", "link_remove"]
print("| file system | phase | 1,000 links: ops/s | 4,000 links: ops/s | 4,000 / 1,000 |")
print("|---|---|---|---|---|")
for fs in fss:
    for ph in phases:
        a, b = runs.get((fs, 1000, ph)), runs.get((fs, 4000, ph))
        if not a or not b:
            continue
        ma, mb = statistics.median(a), statistics.median(b)
        print(f"| {fs} | {ph} | {ma:,.0f} | {mb:,.0f} | {mb/ma:.2f}x |")
