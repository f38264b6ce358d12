#!/bin/bash
# usage: busypoll.sh ROUNDS BIN... : quiet busy-poll 100 B p50 (server and client spin), homa per binary, then udp with the first
rounds=$1; shift
port=4760
for r in $(seq $rounds); do
  for b in "$@" udp; do
    port=$((port+1))
    if [ $b = udp ]; then bin=$1; proto=udp; else bin=$b; proto=homa; fi
    $bin server --protocol $proto --busy-poll --bind 127.0.0.1:$port >/dev/null 2>&1 & S=$!
    sleep 0.3
    h=$($bin client --protocol $proto --busy-poll --server 127.0.0.1:$port --size 100 --seconds 2 2>&1 | grep -A1 " rpcs  errors" | tail -1)
    kill $S; wait $S 2>/dev/null
    echo "r$r $(basename $bin) $proto p50 $(echo $h | awk '{print $4}') p99 $(echo $h | awk '{print $5}')"
  done
done
