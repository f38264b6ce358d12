#!/bin/bash
# usage: callgrind-server.sh BIN OUT: server under callgrind, 100 B client 3 s (no spinners)
b=$1; o=$2
valgrind --tool=callgrind --callgrind-out-file=$o.cg $b server --bind 127.0.0.1:4871 >/dev/null 2>$o.vg & S=$!
sleep 3
$b client --server 127.0.0.1:4871 --size 100 --seconds 4 2>&1 | grep -A1 " rpcs  errors" | tail -1
sleep 0.5
kill -INT $S; sleep 2; kill $S 2>/dev/null; wait $S 2>/dev/null
