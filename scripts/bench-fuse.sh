#!/usr/bin/env bash
# Benchmarks of the FUSE mount, side by side with the local disk and
# MooseFS on the same machine, interleaved (repetition, then test, then
# file system) so that the machine's changing load hits all alike.
#
# usage (root): scripts/bench-fuse.sh [REPS]
#   env: PEERS  (../shared/peers: setup_moosefs.sh, run_io.sh, run_bonnie.sh, fio_row.py)
#        OUT    (results/bench-fuse)   WORK (/tmp/nacre-bench-fuse)   NACRE (built to $WORK/nacre)
#        TESTS  ("md io bonnie")       FSLIST ("local mfs nacre"; add nacre-lib for
#               the client library without FUSE, as the core issue's benchmark)
#        MD_FILES (4000 files per md run, split over the workers)   MD_GAP (2s)
#        SIZE   (2g, fio)              BONNIE_N (16:0:0:16)
# Needs: fio, bonnie++, moosefs-master/-chunkserver/-client/-cli (Debian 12).
#
# Nacre: a fresh local cluster (MGS, MDT, 2 OSTs) mounted with default
# options (attr/entry timeout 1 s); directories s1 and s2 have stripe
# counts 1 and 2 (nacre.lov). MooseFS: setup_moosefs.sh (goal 1, trash 0).
# md: `nacre bench md --path DIR --phases file --gap $MD_GAP` with 1 worker
# and 8 workers in their own directories and 8 in one shared directory.
# io: run_io.sh (fio 1 MiB sequential write with end_fsync, then read,
# 1 job x SIZE). bonnie: run_bonnie.sh (bonnie++ -s 0 -n $BONNIE_N).
# summarize with scripts/bench-fuse-summary.py OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-3}
PEERS=${PEERS:-$(cd ../shared/peers 2>/dev/null && pwd || echo /work/shared/peers)}
OUT=$(mkdir -p "${OUT:-results/bench-fuse}" && cd "${OUT:-results/bench-fuse}" && pwd)
WORK=${WORK:-/tmp/nacre-bench-fuse}
NACRE=${NACRE:-$WORK/nacre}
TESTS=${TESTS:-"md io bonnie"}
FSLIST=${FSLIST:-"local mfs nacre"}
MD_FILES=${MD_FILES:-4000}
MD_GAP=${MD_GAP:-2s}
export SIZE=${SIZE:-2g} JOBS=1 OUT
MFS_MNT=${MFS_MNT:-/tmp/peers/mnt/mfs}

source scripts/bench-common.sh
bench_up
echo "NACRE_MGS=$MGS"
mkdir -p "$WORK/local"
for s in 1 2; do
  mkdir -p "$WORK/mnt/s$s"
  setfattr -n nacre.lov -v "stripe_count=$s" "$WORK/mnt/s$s"
done

dir_of() {
  case $1 in
    local) echo "$WORK/local" ;;
    mfs) echo "$MFS_MNT" ;;
    nacre|nacre-s1) echo "$WORK/mnt/s1" ;;
    nacre-s2) echo "$WORK/mnt/s2" ;;
    nacre-lib) echo "$WORK/mnt" ;; # the same cluster, through the client library
  esac
}

{
  echo "=== $(date -Is) bench-fuse.sh REPS=$REPS FSLIST=$FSLIST TESTS=$TESTS"
  echo "kernel: $(uname -r)  cpus: $(nproc)  mem: $(free -g | awk '/Mem:/{print $2}') GiB"
  echo "nacre: $("$NACRE" --version)  git: $(git rev-parse --short HEAD 2>/dev/null)"
  echo "fio: $(fio --version)  bonnie++: $(dpkg-query -W -f '${Version}' bonnie++)  moosefs: $(dpkg-query -W -f '${Version}' moosefs-master)"
  for fs in $FSLIST; do echo "$fs: $(dir_of "$fs")  $(findmnt -n -o FSTYPE,OPTIONS --target "$(dir_of "$fs")")"; done
} >> "$OUT/env.txt"

for rep in $(seq 1 "$REPS"); do
  for t in $TESTS; do
    list=$FSLIST
    [ "$t" = io ] && list=${FSLIST/nacre/nacre-s1 nacre-s2}
    for fs in $list; do
      dir=$(dir_of "$fs")
      echo "### rep=$rep test=$t fs=$fs load=$(cut -d' ' -f1-3 /proc/loadavg)"
      echo "$(date -Is) rep=$rep test=$t fs=$fs load=$(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/load.log"
      case $t in
        md)
          for cfg in "1 own" "8 own" "8 shared"; do
            set -- $cfg
            extra=(); [ "$2" = shared ] && extra=(--shared-dir)
            where=(--path "$dir")
            # nacre-lib: the client library itself, as `nacre bench md` without --path
            [ "$fs" = nacre-lib ] && where=(--mgs "$MGS")
            "$NACRE" bench md "${where[@]}" --workers "$1" --items $((MD_FILES / $1)) --phases file \
              --gap "$MD_GAP" --json "${extra[@]}" > "$OUT/md_${fs}_${rep}_$1_$2.json" || echo "FAILED md $fs $cfg"
          done ;;
        io) "$PEERS/run_io.sh" "$fs" "$dir" "$rep" || echo "FAILED io $fs" ;;
        bonnie) "$PEERS/run_bonnie.sh" "$fs" "$dir" "$rep" || echo "FAILED bonnie $fs" ;;
      esac
    done
  done
done
echo "=== $(date -Is) done" >> "$OUT/env.txt"
python3 scripts/bench-fuse-summary.py "$OUT"
