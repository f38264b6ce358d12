#!/bin/bash
# usage: [BT=busy threads] one500.sh BIN [SIZE]: one outstanding RPC of SIZE (500,000) bytes, Homa then TCP; Gbit/s
b=$1; sz=${2:-500000}
for p in homa tcp; do
port=$((4700 + RANDOM % 90))
$b server --protocol $p --bind 127.0.0.1:$port >/dev/null 2>&1 & S=$!
sleep 0.3
echo -n "$p 1-out $sz: "; $b --busy-threads ${BT:-0} client --protocol $p --server 127.0.0.1:$port --size $sz --seconds 2 | grep -A1 ' rpcs ' | tail -1 | awk '{print $NF}'
kill -INT $S; wait $S 2>/dev/null
done
