#!/usr/bin/env bash
# Hard links to one file as their number grows: `nacre bench md --phases
# link` (N links to one file, a stat through each, N unlinks) with N = 1000
# and 4000, side by side in one run on the local disk (ext4), MooseFS, a
# Nacre FUSE mount and the Nacre client library, interleaved per repetition.
#
# usage (root): scripts/bench-links.sh [REPS]
#   env: PEERS (../shared/peers)  OUT (results/links)  WORK (/tmp/nacre-bench-links)
#        FSLIST ("local mfs nacre nacre-lib")
# Results: OUT/FS-N-REP.json; summary: scripts/bench-links-summary.py OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-2}
PEERS=${PEERS:-$(cd ../shared/peers 2>/dev/null && pwd || echo /work/shared/peers)}
OUT=$(mkdir -p "${OUT:-results/links}" && cd "${OUT:-results/links}" && pwd)
WORK=${WORK:-/tmp/nacre-bench-links}
NACRE=${NACRE:-$WORK/nacre}
FSLIST=${FSLIST:-"local mfs nacre nacre-lib"}
MFS_MNT=${MFS_MNT:-/tmp/peers/mnt/mfs}

source scripts/bench-common.sh
bench_up
rm -rf "$WORK/local"
mkdir -p "$WORK/local"
{
  echo "=== $(date -Is) bench-links.sh REPS=$REPS FSLIST=$FSLIST"
  echo "kernel: $(uname -r)  cpus: $(nproc)  nacre: $("$NACRE" --version)  git: $(git rev-parse --short HEAD 2>/dev/null)"
} >> "$OUT/env.txt"
for rep in $(seq 1 "$REPS"); do
  for n in 1000 4000; do
    for fs in $FSLIST; do
      case $fs in
        local) where=(--path "$WORK/local") ;;
        mfs) where=(--path "$MFS_MNT") ;;
        nacre) where=(--path "$WORK/mnt") ;;
        nacre-lib) where=(--mgs "$MGS") ;;
      esac
      echo "$(date -Is) rep=$rep n=$n fs=$fs load=$(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/load.log"
      "$NACRE" bench md "${where[@]}" --phases link --items "$n" --json > "$OUT/$fs-$n-$rep.json"
    done
  done
done
python3 scripts/bench-links-summary.py "$OUT"
