#!/bin/bash
# A/B of two mount binaries on one local cluster: small buffered writes.
# Usage: merge.sh OLD_NACRE NEW_NACRE ROUNDS   (run from an empty directory)
# Each round: one dd of 128 MiB in 4 KiB writes, then four at once of
# 64 MiB each, through each mount in turn; prints wall time and the CPU
# (ticks of 10 ms) of the mount daemon and of the OSTs.
set -euo pipefail
OLD=$1 NEW=$2 ROUNDS=${3:-3}
D=$PWD
"$NEW" up --dir "$D/cl" --detach | tail -1 > "$D/env"
. "$D/env"; export NACRE_MGS
mkdir -p "$D/old" "$D/new"
cleanup() { fusermount3 -u "$D/old" 2>/dev/null || true; fusermount3 -u "$D/new" 2>/dev/null || true; "$NEW" down --dir "$D/cl" >/dev/null; }
trap cleanup EXIT
"$OLD" mount "$D/old"; "$NEW" mount "$D/new"
pidof_mount() { for p in /proc/[0-9]*; do if tr '\0' ' ' < $p/cmdline 2>/dev/null | grep -q "mount --mgs $NACRE_MGS $1 "; then basename $p; fi; done; }
declare -A MP=([old]=$(pidof_mount "$D/old") [new]=$(pidof_mount "$D/new"))
OSTS=$("$NEW" status --json | python3 -c 'import json,sys; print(" ".join(str(t["pid"]) for t in json.load(sys.stdin)["targets"] if "OST" in t["name"]))')
cpu() { local s=0; for p in "$@"; do s=$((s + $(awk '{print $14+$15}' /proc/$p/stat))); done; echo $s; }
for r in $(seq "$ROUNDS"); do
  for m in old new; do
    a=$(cpu ${MP[$m]}); o=$(cpu $OSTS); s=$(date +%s.%N)
    dd if=/dev/zero of="$D/$m/one" bs=4K count=32768 conv=fsync status=none
    e=$(date +%s.%N)
    echo "round $r $m 1x128MiB wall $(echo "$e - $s" | bc) mount_ticks $(( $(cpu ${MP[$m]}) - a )) ost_ticks $(( $(cpu $OSTS) - o ))"
    a=$(cpu ${MP[$m]}); o=$(cpu $OSTS); s=$(date +%s.%N); pids=""
    for k in 1 2 3 4; do dd if=/dev/zero of="$D/$m/p$k" bs=4K count=16384 conv=fsync status=none & pids="$pids $!"; done
    wait $pids
    e=$(date +%s.%N)
    echo "round $r $m 4x64MiB wall $(echo "$e - $s" | bc) mount_ticks $(( $(cpu ${MP[$m]}) - a )) ost_ticks $(( $(cpu $OSTS) - o ))"
    rm -f "$D/$m"/one "$D/$m"/p?
  done
done
