#!/bin/bash
# usage: callgrind-client.sh BIN OUT: client under callgrind, 100 B 4 s; server native
b=$1; o=$2
$b server --bind 127.0.0.1:4873 >/dev/null 2>&1 & S=$!
sleep 0.4
valgrind --tool=callgrind --callgrind-out-file=$o.cg $b client --server 127.0.0.1:4873 --size 100 --seconds 4 2>$o.vg | grep -A1 " rpcs  errors" | tail -1
kill $S; wait $S 2>/dev/null
