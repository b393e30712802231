#!/usr/bin/env bash
# Hard links to one file as their number grows: `nacre bench md --phases
# link` (N links to one file, a stat through each, N unlinks) with N = 1000
# and 4000, side by side in one run on the local disk (ext4), MooseFS, a
# Nacre FUSE mount and the Nacre client library, and the client library
# against a cluster of the binary before the linkEA bound ($OLD).
#
# usage (root, from the repository): OLD=/path/to/old/nacre \
#   docs/bench-core/2026-11-25-links/run.sh [REPS]
set -euo pipefail
cd "$(dirname "$0")/../../.."
REPS=${1:-2}
OUT=$(cd "$(dirname "$0")" && pwd)
WORK=${WORK:-/tmp/nacre-bench-links}
NACRE=$WORK/nacre
PEERS=${PEERS:-/work/shared/peers}
MFS_MNT=${MFS_MNT:-/tmp/peers/mnt/mfs}
rm -rf "$WORK" && mkdir -p "$WORK/local"
go build -o "$NACRE" ./cmd/nacre
down() {
  "$NACRE" down --dir "$WORK/new" >/dev/null 2>&1 || true
  "$OLD" down --dir "$WORK/old" >/dev/null 2>&1 || true
  "$PEERS/setup_moosefs.sh" stop >/dev/null 2>&1 || true
}
trap down EXIT
MGS_NEW=$("$NACRE" up --dir "$WORK/new" --mount "$WORK/mnt" --detach | tail -1); MGS_NEW=${MGS_NEW#NACRE_MGS=}
MGS_OLD=$("$OLD" up --dir "$WORK/old" --detach | tail -1); MGS_OLD=${MGS_OLD#NACRE_MGS=}
"$PEERS/setup_moosefs.sh" start >/dev/null
{
  echo "=== $(date -Is) links run.sh REPS=$REPS"
  echo "kernel: $(uname -r)  cpus: $(nproc)  git: $(git rev-parse --short HEAD)  old: $("$OLD" --version)"
} > "$OUT/env.txt"
for rep in $(seq 1 "$REPS"); do
  for n in 1000 4000; do
    for fs in local mfs nacre nacre-lib nacre-lib-old; do
      case $fs in
        local) where=(--path "$WORK/local") ;;
        mfs) where=(--path "$MFS_MNT") ;;
        nacre) where=(--path "$WORK/mnt") ;;
        nacre-lib) where=(--mgs "$MGS_NEW") ;;
        nacre-lib-old) where=(--mgs "$MGS_OLD") ;;
      esac
      echo "$(date -Is) rep=$rep n=$n fs=$fs load=$(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/load.log"
      "$NACRE" bench md "${where[@]}" --phases link --items "$n" --json > "$OUT/$fs-$n-$rep.json"
    done
  done
done
