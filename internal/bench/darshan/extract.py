"""Print one JSON line per file of Darshan logs: its record id, the size
it had (the largest offset read or written, or the bytes written), and the
bytes written. Used by `nacre bench age --darshan`; needs the PyPI package
`darshan` (pip install darshan)."""
import json
import sys

try:
    import darshan
except ImportError:
    sys.stderr.write("reading Darshan logs needs the Python package darshan: python3 -m pip install darshan\n")
    sys.exit(3)

for path in sys.argv[1:]:
    try:
        report = darshan.DarshanReport(path, read_all=True)
    except Exception as e:  # a corrupt or foreign file
        sys.stderr.write("cannot read Darshan log %s: %s\n" % (path, e))
        sys.exit(4)
    files = {}
    for mod in ("POSIX", "STDIO"):
        if mod not in report.records:
            continue
        df = report.records[mod].to_df()["counters"]
        for _, row in df.iterrows():
            fid = int(row["id"]) & 0xFFFFFFFFFFFFFFFF
            p = mod + "_"
            written = max(int(row.get(p + "BYTES_WRITTEN", 0)), 0)
            maxw = int(row.get(p + "MAX_BYTE_WRITTEN", -1))
            maxr = int(row.get(p + "MAX_BYTE_READ", -1))
            size = max(maxw + 1, maxr + 1, written, 0)
            f = files.setdefault(fid, {"size": 0, "written": 0})
            f["size"] = max(f["size"], size)
            f["written"] += written
    for fid in sorted(files):
        f = files[fid]
        print(json.dumps({"log": path, "id": fid, "size": f["size"], "written": f["written"]}))
