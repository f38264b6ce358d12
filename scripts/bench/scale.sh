#!/bin/bash
# usage: scale.sh BIN WORK_US [client args]: 64 clients of 100 B RPCs against a server that spends
# WORK_US of CPU per request: Homa with 1 then 2 server threads, then TCP (a thread per connection)
b=$1; w=$2; shift 2
for T in 1 2; do
  $b server --bind 127.0.0.1:4600 --threads $T --work-us $w >/dev/null 2>&1 & S=$!
  sleep 0.3
  echo -n "homa T=$T work=$w: "; $b client --server 127.0.0.1:4600 --size 100 --concurrency 64 --seconds 2 "$@" | grep -A1 ' rpcs ' | tail -1
  kill -INT $S; wait $S 2>/dev/null
done
$b server --protocol tcp --bind 127.0.0.1:4601 --work-us $w >/dev/null 2>&1 & S=$!
sleep 0.3
echo -n "tcp work=$w: "; $b client --protocol tcp --server 127.0.0.1:4601 --size 100 --concurrency 64 --seconds 2 "$@" | grep -A1 ' rpcs ' | tail -1
kill -INT $S; wait $S 2>/dev/null
