#!/bin/bash
# usage: callgrind-busy.sh BIN OUT SIDE: busy-poll 100 B, SIDE (client|server) under callgrind (the other side native); instructions per RPC with cgtree.py
b=$1; o=$2; side=$3
port=$((4700 + RANDOM % 90))
if [ $side = client ]; then
  $b server --busy-poll --bind 127.0.0.1:$port >/dev/null 2>&1 & S=$!
  sleep 0.4
  valgrind --tool=callgrind --callgrind-out-file=$o.cg $b client --busy-poll --server 127.0.0.1:$port --size 100 --seconds 4 2>$o.vg | grep -A1 " rpcs  errors" | tail -1
  kill $S; wait $S 2>/dev/null
else
  valgrind --tool=callgrind --callgrind-out-file=$o.cg $b server --busy-poll --bind 127.0.0.1:$port >/dev/null 2>$o.vg & S=$!
  sleep 3
  $b client --busy-poll --server 127.0.0.1:$port --size 100 --seconds 4 2>&1 | grep -A1 " rpcs  errors" | tail -1
  sleep 0.5; kill -INT $S; sleep 2; kill $S 2>/dev/null; wait $S 2>/dev/null
fi
