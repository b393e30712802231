#!/bin/bash
# chownrun.sh OLDBIN NEWBIN: one cluster (servers of NEWBIN); for each mount binary,
# 2000 written files striped over 2 OSTs, then chown -R timed.
OLD=$1; NEW=$2; D=/tmp/chc; M=/tmp/chm
rm -rf $D; mkdir -p $M
MGS=$($NEW up --dir $D --osts 2 --detach 2>/dev/null | sed -n 's/^NACRE_MGS=//p')
for r in 1 2; do
for BIN in $OLD $NEW; do
  $BIN mount --mgs $MGS $M -f > /tmp/chmount.log 2>&1 &
  MP=$!
  for i in $(seq 50); do mount | grep -q " $M " && break; sleep 0.1; done
  mkdir -p $M/t && NACRE_MGS=$MGS $NEW setstripe -c 2 -S 64K /t >/dev/null
  for i in $(seq 2000); do echo x > $M/t/f$i; done
  t0=$(date +%s.%N); chown -R 1234:1234 $M/t; t1=$(date +%s.%N)
  echo "$BIN chown -R 2000 files: $(echo "$t1 - $t0" | bc) s"
  rm -rf $M/t
  $NEW umount $M; wait $MP 2>/dev/null
done
done
$NEW down --dir $D >/dev/null; rm -rf $D
