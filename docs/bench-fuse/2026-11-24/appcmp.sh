#!/bin/bash
# Appends of 64-byte records with O_APPEND, one writer, and two writers at once
# (Nacre: on two mounts; local disk and MooseFS: two processes of one mount).
set -u
N=${N:-4000}
D=$(mktemp -d /var/tmp/appcmp.XXXX)
mkdir -p $D/local
bin/nacre up --dir $D/c --osts 2 --detach --mount $D/m >/dev/null 2>&1 || { echo up failed; exit 1; }
mkdir -p $D/m2
MGS=$(bin/nacre status --dir $D/c --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["mgs"])')
bin/nacre mount --mgs $MGS $D/m2 >/dev/null 2>&1
sleep 1
one() { python3 docs/bench-fuse/2026-11-24/appbench.py $1 $N | awk '{print $1}'; }
two() { (python3 docs/bench-fuse/2026-11-24/appbench.py $1 $N > $D/o1 & python3 docs/bench-fuse/2026-11-24/appbench.py $2 $N > $D/o2; wait); echo $(( $(awk '{print $1}' $D/o1) + $(awk '{print $1}' $D/o2) )); }
for r in 1 2 3; do
  rm -f $D/local/* /tmp/peers/mnt/mfs/app* $D/m/app* 2>/dev/null
  echo "round $r one: local $(one $D/local/a) moosefs $(one /tmp/peers/mnt/mfs/app1) nacre $(one $D/m/a1)"
  echo "round $r two: local $(two $D/local/b $D/local/b) moosefs $(two /tmp/peers/mnt/mfs/app2 /tmp/peers/mnt/mfs/app2) nacre $(two $D/m/b $D/m2/b)"
  echo "  nacre shared log lines: $(wc -l < $D/m/b) (want $((2*N))), distinct sizes ok: $(stat -c %s $D/m/b) (want $((2*N*64)))"
done
fusermount3 -u $D/m2
bin/nacre down --dir $D/c >/dev/null
rm -rf $D
