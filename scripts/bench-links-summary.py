#!/usr/bin/env python3
"""Prints the link benchmark's table (scripts/bench-links.sh): ops/s per file
system, phase and link count (median over repetitions), and the ratio of
4,000 links to 1,000."""
import glob, json, os, statistics, sys

d = sys.argv[1] if len(sys.argv) > 1 else "results/links"
runs = {}
for p in glob.glob(os.path.join(d, "*.json")):
    fs, n, _ = os.path.basename(p)[:-5].rsplit("-", 2)
    for ph in json.load(open(p))["phases"]:
        runs.setdefault((fs, int(n), ph["name"]), []).append(ph["ops_per_sec"])
names = {"local": "local", "mfs": "MooseFS", "nacre": "Nacre mount", "nacre-lib": "Nacre library"}
phases = ["link_create", "link_stat", "link_remove"]
print("| file system | phase | 1,000 links: ops/s | 4,000 links: ops/s | 4,000 / 1,000 |")
print("|---|---|---|---|---|")
for fs in sorted({k[0] for k in runs}, key=lambda f: list(names).index(f) if f in names else 99):
    for ph in phases:
        a, b = runs.get((fs, 1000, ph)), runs.get((fs, 4000, ph))
        if not a or not b:
            continue
        ma, mb = statistics.median(a), statistics.median(b)
        print(f"| {names.get(fs, fs)} | {ph} | {ma:,.0f} | {mb:,.0f} | {mb/ma:.2f}x |")
