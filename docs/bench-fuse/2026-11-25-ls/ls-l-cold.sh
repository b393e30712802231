for rep in 1 2 3 4 5; do
 for d in /tmp/lsc/local/lsl /tmp/peers/mnt/mfs/lsl /tmp/lsc/mnt/lsl /tmp/lsc/mold/lsl; do
  sync; echo 3 > /proc/sys/vm/drop_caches; sleep 2
  s=$(date +%s.%N); ls -l $d > /dev/null; e=$(date +%s.%N)
  echo "$d $(echo "$e - $s" | bc)"
 done
done
