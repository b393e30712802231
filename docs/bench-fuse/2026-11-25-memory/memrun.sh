#!/bin/bash
# memrun.sh MOUNTBIN [SERVERBIN]: a cluster, a mount by BIN, then twice: 6 processes writing
# 32 MiB each with 4 KiB writes into one file, 4 appending 16 MiB each to
# another. Prints the time, the mount's peak RSS (VmHWM) and RSS at the end.
BIN=$1; SRV=${2:-$1}; D=/tmp/memc; M=/tmp/memm
rm -rf $D; mkdir -p $M
MGS=$($SRV up --dir $D --osts 2 --detach 2>/dev/null | sed -n 's/^NACRE_MGS=//p')
$BIN mount --mgs $MGS $M -f > /tmp/memmount.log 2>&1 &
MP=$!
for i in $(seq 50); do mount | grep -q " $M " && break; sleep 0.1; done
t0=$(date +%s.%N)
for r in 1 2; do
  pids=""
  for i in 0 1 2 3 4 5; do dd if=/dev/zero of=$M/shared bs=4K count=8192 seek=$((i*8192)) conv=notrunc status=none & pids="$pids $!"; done
  wait $pids
  pids=""
  for i in 0 1 2 3; do dd if=/dev/zero of=$M/app bs=4K count=4096 oflag=append conv=notrunc status=none & pids="$pids $!"; done
  wait $pids
  rm -f $M/shared $M/app
done
t1=$(date +%s.%N)
echo "$BIN: $(echo "$t1 - $t0" | bc) s, $(grep VmHWM /proc/$MP/status | tr -s ' '), $(grep VmRSS /proc/$MP/status | tr -s ' ')"
$SRV umount $M; wait $MP 2>/dev/null
$SRV down --dir $D >/dev/null; rm -rf $D
