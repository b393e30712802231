#!/usr/bin/env bash
# The benchmark tools of issue 5 on one machine, in one run: `nacre bench
# survey` (the MDT alone), `nacre bench io` and `nacre bench age` through
# the client library, and the same io and age runs through --path against
# the local disk, MooseFS and Nacre's FUSE mount, interleaved per
# repetition so that the machine's load hits all alike.
#
# usage (root): scripts/bench-tools.sh [REPS]
#   env: PEERS (../shared/peers)  OUT (results/bench-tools)  WORK (/tmp/nacre-bench-tools)
#        IO_SIZE (256M per worker)  AGE_FILES (3000)  FSLIST ("local mfs nacre")
# Results: OUT/*.json and OUT/*.png; summary: scripts/bench-tools-summary.py OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-2}
PEERS=${PEERS:-$(cd ../shared/peers 2>/dev/null && pwd || echo /work/shared/peers)}
OUT=$(mkdir -p "${OUT:-results/bench-tools}" && cd "${OUT:-results/bench-tools}" && pwd)
WORK=${WORK:-/tmp/nacre-bench-tools}
NACRE=${NACRE:-$WORK/nacre}
IO_SIZE=${IO_SIZE:-256M}
AGE_FILES=${AGE_FILES:-3000}
FSLIST=${FSLIST:-"local mfs nacre"}
MFS_MNT=${MFS_MNT:-/tmp/peers/mnt/mfs}

source scripts/bench-common.sh
bench_up
export NACRE_MGS=$MGS
rm -rf "$WORK/local"
mkdir -p "$WORK/local"

dir_of() {
  case $1 in
    local) echo "$WORK/local" ;;
    mfs) echo "$MFS_MNT" ;;
    nacre) echo "$WORK/mnt" ;;
  esac
}
{
  echo "=== $(date -Is) bench-tools.sh REPS=$REPS FSLIST=$FSLIST IO_SIZE=$IO_SIZE AGE_FILES=$AGE_FILES"
  echo "kernel: $(uname -r)  cpus: $(nproc)  mem: $(free -g | awk '/Mem:/{print $2}') GiB"
  echo "nacre: $("$NACRE" --version)  git: $(git rev-parse --short HEAD 2>/dev/null)  moosefs: $(dpkg-query -W -f '${Version}' moosefs-master 2>/dev/null || true)"
} >> "$OUT/env.txt"

say() { echo "### $*  load=$(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/load.log"; }

say survey
"$NACRE" bench survey --threads 1,2,4,8,16,32 --files 8000 --json --plot "$OUT/survey.png" > "$OUT/survey.json"

for rep in $(seq 1 "$REPS"); do
  say "rep=$rep io library"
  "$NACRE" bench io --workers 2 --size "$IO_SIZE" --mode fpp,shared --pattern seq,random \
    --stripe-count 1,2 --stripe-size 1M --json --plot "$OUT/io_lib_$rep.png" > "$OUT/io_lib_$rep.json"
  for fs in $FSLIST; do
    d=$(dir_of "$fs")/io-$rep
    mkdir -p "$d"
    say "rep=$rep io $fs"
    "$NACRE" bench io --path "$d" --workers 2 --size "$IO_SIZE" --mode fpp --pattern seq,random \
      --drop-caches --json > "$OUT/io_${fs}_$rep.json"
    rm -rf "$d"
  done
  say "rep=$rep age library"
  "$NACRE" bench age --random --files "$AGE_FILES" --dest "/age-$rep" --seed "$rep" --json \
    --plot "$OUT/age_lib_$rep.png" > "$OUT/age_lib_$rep.json"
  for fs in $FSLIST; do
    # not age-$rep: through the mount that is the library run's tree
    d=$(dir_of "$fs")/age-$fs-$rep
    mkdir -p "$d"
    say "rep=$rep age $fs"
    "$NACRE" bench age --random --local --files "$AGE_FILES" --dest "$d" --seed "$rep" --json > "$OUT/age_${fs}_$rep.json"
    rm -rf "$d"
  done
done
echo "=== $(date -Is) done" >> "$OUT/env.txt"
