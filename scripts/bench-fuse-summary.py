#!/usr/bin/env python3
"""Summarize scripts/bench-fuse.sh results: medians over repetitions (min-max)
and ratios of Nacre to the local disk and to MooseFS. Prints Markdown."""
import csv
import glob
import json
import os
import sys

from benchsummary import fmt, med, ratio

out = sys.argv[1] if len(sys.argv) > 1 else "results/bench-fuse"


# md: md_<fs>_<rep>_<workers>_<mode>.json
md = {}
lat = {}
for p in glob.glob(os.path.join(out, "md_*.json")):
    name = os.path.basename(p)[3:-5]
    fs, rep, w, mode = name.rsplit("_", 3)
    try:
        r = json.load(open(p))
    except Exception:
        continue
    for ph in r.get("phases", []):
        md.setdefault((fs, w, mode, ph["name"]), []).append(ph["ops_per_sec"])
        lat.setdefault((fs, w, mode, ph["name"]), []).append((ph.get("mean_us"), ph.get("p99_us")))

if md:
    print("### Metadata: `nacre bench md --path`, ops/s, median (min-max)\n")
    print("| workers, dirs | phase | local ext4 | MooseFS | Nacre | Nacre / local | Nacre / MooseFS |")
    print("|---|---|---|---|---|---|---|")
    for w, mode in (("1", "own"), ("8", "own"), ("8", "shared")):
        for ph in ("file_create", "file_stat", "file_read", "file_remove"):
            l = med(md.get(("local", w, mode, ph), []))
            m = med(md.get(("mfs", w, mode, ph), []))
            n = med(md.get(("nacre", w, mode, ph), []))
            if l is None and m is None and n is None:
                continue
            print(f"| {w}, {mode} | {ph} | {fmt(l)} | {fmt(m)} | {fmt(n)} | {ratio(n, l)} | {ratio(n, m)} |")
    print()

if any(k[0] == "nacre-lib" for k in md):
    print("### Metadata: Nacre's client library (`nacre bench md`, no FUSE), ops/s and latency, median (min-max)\n")
    print("| workers, dirs | phase | Nacre library ops/s | mean us | p99 us | library / local | library / MooseFS | library / Nacre FUSE |")
    print("|---|---|---|---|---|---|---|---|")
    for w, mode in (("1", "own"), ("8", "own"), ("8", "shared")):
        for ph in ("file_create", "file_stat", "file_read", "file_remove"):
            n = med(md.get(("nacre-lib", w, mode, ph), []))
            if n is None:
                continue
            ls = lat.get(("nacre-lib", w, mode, ph), [])
            mean = med([a for a, _ in ls])
            p99 = med([b for _, b in ls])
            l = med(md.get(("local", w, mode, ph), []))
            m = med(md.get(("mfs", w, mode, ph), []))
            f = med(md.get(("nacre", w, mode, ph), []))
            print(f"| {w}, {mode} | {ph} | {fmt(n)} | {fmt(mean)} | {fmt(p99)} | {ratio(n, l)} | {ratio(n, m)} | {ratio(n, f)} |")
    print()

io = os.path.join(out, "io_fio.csv")
if os.path.exists(io):
    rows = list(csv.DictReader(open(io)))
    vals = {}
    for r in rows:
        try:
            vals.setdefault((r["label"], r["op"]), []).append(float(r["MiB_per_s"]))
        except (KeyError, ValueError):
            pass
    print("### Sequential I/O: fio, 1 MiB blocks, 2 GiB, 1 job, MiB/s, median (min-max)\n")
    print("| op | local ext4 | MooseFS | Nacre stripe 1 | Nacre stripe 2 | s1 / local | s2 / local | s1 / MooseFS |")
    print("|---|---|---|---|---|---|---|---|")
    for op in ("write", "read"):
        l, m = med(vals.get(("local", op), [])), med(vals.get(("mfs", op), []))
        s1, s2 = med(vals.get(("nacre-s1", op), [])), med(vals.get(("nacre-s2", op), []))
        print(f"| {op} | {fmt(l)} | {fmt(m)} | {fmt(s1)} | {fmt(s2)} | {ratio(s1, l)} | {ratio(s2, l)} | {ratio(s1, m)} |")
    print()

bon = os.path.join(out, "bonnie.csv")
if os.path.exists(bon):
    rows = list(csv.DictReader(open(bon)))
    cols = ["seq_create", "seq_stat", "seq_del", "ran_create", "ran_stat", "ran_del"]
    vals = {}
    for r in rows:
        for c in cols:
            try:
                vals.setdefault((r["label"], c), []).append(float(r[c]))
            except (KeyError, ValueError):
                vals.setdefault((r["label"], c), [])  # "+++++": too fast to time
    print("### bonnie++ file tests (`-s 0 -n 16:0:0:16`), ops/s, median (min-max); `+++++` = under 0.5 s\n")
    print("| test | local ext4 | MooseFS | Nacre | Nacre / local | Nacre / MooseFS |")
    print("|---|---|---|---|---|---|")
    for c in cols:
        l, m, n = (med(vals.get((fs, c), [])) for fs in ("local", "mfs", "nacre"))
        f = lambda x: "+++++" if x is None else fmt(x)
        print(f"| {c} | {f(l)} | {f(m)} | {f(n)} | {ratio(n, l)} | {ratio(n, m)} |")
    print()
