#!/bin/bash
# usage: demo-compare.sh OUTDIR BIN_A BIN_B : interleaved demo runs, quiet and busy, 2 rounds each
out=$1; a=$2; b=$3; mkdir -p $out
for r in 1 2; do
  for bin in $a $b; do
    n=$(basename $bin)
    $(dirname "$0")/quiet.sh $bin demo --seconds 1 --rounds 2 > $out/quiet-$n-$r.txt 2>&1
    $(dirname "$0")/quiet.sh $bin --busy-threads 2 demo --seconds 1 --rounds 2 > $out/busy-$n-$r.txt 2>&1
  done
done
for f in $out/*.txt; do echo "== $f"; sed -n '/^ratios/,$p' $f | tail -n +2; done
