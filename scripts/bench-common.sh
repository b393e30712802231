# Sourced by bench-fuse.sh and bench-tools.sh: bench_up builds nacre to
# $NACRE, starts a fresh local cluster in $WORK/cluster mounted at
# $WORK/mnt and, when $FSLIST names mfs, MooseFS ($PEERS/setup_moosefs.sh);
# both are stopped when the script exits. Sets MGS to the MGS's HOST:PORT.

# bench_has FS: FSLIST names FS.
bench_has() { [[ " $FSLIST " == *" $1 "* ]]; }

bench_down() {
  "$NACRE" down --dir "$WORK/cluster" >/dev/null 2>&1 || true
  if bench_has mfs; then "$PEERS/setup_moosefs.sh" stop >/dev/null 2>&1 || true; fi
}

bench_up() {
  mkdir -p "$WORK"
  go build -o "$NACRE" ./cmd/nacre
  trap bench_down EXIT
  rm -rf "$WORK/cluster"
  MGS=$("$NACRE" up --dir "$WORK/cluster" --mount "$WORK/mnt" --detach | tail -1)
  MGS=${MGS#NACRE_MGS=}
  if bench_has mfs; then "$PEERS/setup_moosefs.sh" start >/dev/null; fi
}
