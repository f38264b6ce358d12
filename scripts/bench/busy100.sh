#!/bin/bash
# usage: busy100.sh ROUNDS BIN... : 100 B, one client, 2 spinning threads in the client process; homa then tcp per binary, alternating
rounds=$1; shift
port=4700
for r in $(seq $rounds); do
  for b in "$@"; do
    port=$((port+2))
    $b server --bind 127.0.0.1:$port >/dev/null 2>&1 & S=$!
    $b server --protocol tcp --bind 127.0.0.1:$((port+1)) >/dev/null 2>&1 & T=$!
    sleep 0.3
    h=$($b --busy-threads 2 client --server 127.0.0.1:$port --size 100 --seconds 2 2>&1 | grep -A1 " rpcs  errors" | tail -1)
    t=$($b --busy-threads 2 client --protocol tcp --server 127.0.0.1:$((port+1)) --size 100 --seconds 2 2>&1 | grep -A1 " rpcs  errors" | tail -1)
    kill $S $T; wait $S $T 2>/dev/null
    hp50=$(echo $h | awk '{print $4}'); tp50=$(echo $t | awk '{print $4}')
    hp99=$(echo $h | awk '{print $5}'); tp99=$(echo $t | awk '{print $5}')
    echo "$(basename $b) r$r homa p50 $hp50 p99 $hp99 | tcp p50 $tp50 p99 $tp99 | ratio p50 $(echo "scale=2;$hp50/$tp50" | bc) p99 $(echo "scale=2;$hp99/$tp99" | bc)"
  done
done
