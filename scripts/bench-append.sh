#!/usr/bin/env bash
# Appends of 64-byte records with O_APPEND: one writer, then two writers at
# once (Nacre: on two mounts of one file system, which the append token
# serialises; the local disk and MooseFS: two processes of one mount). Each
# round checks that the shared log holds every record once.
#
# usage (root, MooseFS mounted at $MFS_MNT by the peers' setup_moosefs.sh):
#   go build -o bin/nacre ./cmd/nacre && scripts/bench-append.sh [ROUNDS]
#   env: N (4000 records per writer)  MFS_MNT (/tmp/peers/mnt/mfs)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
N=${N:-4000}
MFS_MNT=${MFS_MNT:-/tmp/peers/mnt/mfs}
D=$(mktemp -d /var/tmp/nacre-append.XXXX)
cleanup() { fusermount3 -u "$D/m2" 2>/dev/null || true; bin/nacre down --dir "$D/c" >/dev/null 2>&1 || true; rm -rf "$D"; }
trap cleanup EXIT
mkdir -p "$D/local" "$D/m2"
MGS=$(bin/nacre up --dir "$D/c" --osts 2 --detach --mount "$D/m" | tail -1)
bin/nacre mount --mgs "${MGS#NACRE_MGS=}" "$D/m2" >/dev/null
one() { python3 scripts/appbench.py "$1" "$N" | awk '{print $1}'; }
two() {
  python3 scripts/appbench.py "$1" "$N" > "$D/o1" & python3 scripts/appbench.py "$2" "$N" > "$D/o2"; wait
  echo $(( $(awk '{print $1}' "$D/o1") + $(awk '{print $1}' "$D/o2") ))
}
for r in $(seq "$ROUNDS"); do
  rm -f "$D"/local/* "$MFS_MNT"/app* "$D"/m/a1 "$D"/m/b
  echo "round $r one writer: local $(one "$D/local/a") moosefs $(one "$MFS_MNT/app1") nacre $(one "$D/m/a1")"
  echo "round $r two writers: local $(two "$D/local/b" "$D/local/b") moosefs $(two "$MFS_MNT/app2" "$MFS_MNT/app2") nacre $(two "$D/m/b" "$D/m2/b")"
  echo "  nacre shared log: $(wc -l < "$D/m/b") lines (want $((2 * N))), $(stat -c %s "$D/m/b") bytes (want $((2 * N * 64)))"
done
