#!/bin/bash
export NACRE_MGS=127.0.0.1:22734
B=/work/main/bin/nacre
for rep in 1 2 3; do
  for fs in local mfs new old lib; do
    case $fs in
      local) a="--path /tmp/lsc/local";; mfs) a="--path /tmp/peers/mnt/mfs";;
      new) a="--path /tmp/lsc/mnt";; old) a="--path /tmp/lsc/mold";; lib) a="";;
    esac
    $B bench md $a --phases file,ls --workers 1 --items 2000 --gap 2s --json > res/$fs.$rep.json 2>res/$fs.$rep.err || echo "fail $fs $rep"
  done
done
echo finished
