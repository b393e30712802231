#!/usr/bin/env python3
"""Summarize scripts/bench-tools.sh results as Markdown: the survey's rates
per thread count, io (MiB/s) and age (files/s), medians over repetitions
(min-max), with Nacre's ratios to the local disk and to MooseFS."""
import glob
import json
import os
import sys

from benchsummary import fmt, med, ratio

out = sys.argv[1] if len(sys.argv) > 1 else "results/bench-tools"


def load(pattern):
    res = []
    for p in sorted(glob.glob(os.path.join(out, pattern))):
        try:
            res.append(json.load(open(p)))
        except Exception:
            pass
    return res


sv = load("survey.json")
if sv:
    s = sv[0]
    ops = s["ops"]
    print(f"### `nacre bench survey` ({s['files']} files per thread count), ops/s\n")
    print("| threads | " + " | ".join(ops) + " |")
    print("|---" * (len(ops) + 1) + "|")
    for r in s["rows"]:
        print(f"| {r['threads']} | " + " | ".join(f"{r['ops_per_sec'].get(o, 0):,.0f}" for o in ops) + " |")
    print()

lib = load("io_lib_*.json")
if lib:
    rows = {}
    for r in lib:
        for row in r["rows"]:
            key = (row["mode"], row["pattern"], row["stripe_count"], row["op"])
            rows.setdefault(key, []).append(row["mib_per_sec"])
    print("### `nacre bench io` through the client library (2 workers), MiB/s\n")
    print("| mode | pattern | stripe count | op | MiB/s |")
    print("|---|---|---|---|---|")
    for k in sorted(rows):
        print(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {fmt(med(rows[k]))} |")
    print()

fsl = ("local", "mfs", "nacre")
io = {}
for fs in fsl:
    for r in load(f"io_{fs}_*.json"):
        for row in r["rows"]:
            io.setdefault((row["pattern"], row["op"]), {}).setdefault(fs, []).append(row["mib_per_sec"])
if io:
    print("### `nacre bench io --path` (2 workers, file per worker, caches dropped before reads), MiB/s\n")
    print("| pattern | op | local ext4 | MooseFS | Nacre FUSE | Nacre / local | Nacre / MooseFS |")
    print("|---|---|---|---|---|---|---|")
    for k in sorted(io):
        l, m, n = (med(io[k].get(fs, [])) for fs in fsl)
        print(f"| {k[0]} | {k[1]} | {fmt(l)} | {fmt(m)} | {fmt(n)} | {ratio(n, l)} | {ratio(n, m)} |")
    print()

age = {}
for fs in fsl + ("lib",):
    for r in load(f"age_{fs}_*.json"):
        age.setdefault(fs, []).append((r["files_per_sec"], r["files"], r["bytes"]))
if age:
    print("### `nacre bench age --random` (files/s; each repetition its own seed)\n")
    print("| local ext4 | MooseFS | Nacre FUSE | Nacre library | FUSE / local | FUSE / MooseFS |")
    print("|---|---|---|---|---|---|")
    l, m, n, b = (med([x[0] for x in age.get(fs, [])]) for fs in fsl + ("lib",))
    print(f"| {fmt(l)} | {fmt(m)} | {fmt(n)} | {fmt(b)} | {ratio(n, l)} | {ratio(n, m)} |")
    sizes = sorted({(x[1], x[2]) for x in age.get("lib", [])})
    if sizes:
        print("\nFiles and bytes per tree: " + ", ".join(f"{f:,} files, {b / 2**20:,.0f} MiB" for f, b in sizes))
    print()
