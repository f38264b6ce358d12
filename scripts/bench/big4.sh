#!/bin/bash
# usage: [BT=busy threads] [ST=server threads] [SECS=2] big4.sh BIN: 500 KB, 4 outstanding, Homa and TCP,
# each with one client thread (--pipelined) and with a thread per RPC; prints Gbit/s, p50, p99
b=$1
BT=${BT:-0}
run() { # proto pipelined
  p=$1; shift
  port=$((4700 + RANDOM % 90))
  $b server --protocol $p --bind 127.0.0.1:$port --threads ${ST:-1} >/dev/null 2>&1 & S=$!
  sleep 0.3
  r=$($b --busy-threads $BT client --protocol $p --server 127.0.0.1:$port --size 500000 --concurrency 4 --seconds ${SECS:-2} "$@" --json)
  kill -INT $S; wait $S 2>/dev/null
  python3 -c "import json,sys; j=json.loads(sys.argv[1]); print('%-5s %-10s %6.1f Gbit/s p50 %6.0f p99 %6.0f'%(sys.argv[2], sys.argv[3], j['gbps'], j['p50_us'], j['p99_us']))" "$r" $p "${1:-threads}"
}
run homa --pipelined; run tcp --pipelined; run homa; run tcp
