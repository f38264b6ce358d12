#!/bin/bash
# usage: [T=server threads] [SECS=2] [SARGS=server args] busybig.sh BIN PROTO [client args]: 500 KB x4 thread per RPC, client process with 2 spinning threads; Gbit/s
B=$1; P=$2; shift 2
port=$((4760 + RANDOM % 50))
$B server --protocol $P --bind 127.0.0.1:$port --threads ${T:-2} $SARGS >/dev/null 2>&1 & S=$!
sleep 0.3
$B --busy-threads 2 client --protocol $P --server 127.0.0.1:$port --size 500000 --concurrency 4 --seconds ${SECS:-2} --json "$@" > /tmp/bb.json 2>/dev/null
kill $S; wait $S 2>/dev/null
python3 -c "
import json; j=json.load(open('/tmp/bb.json')); print('$(basename $B) $P $*: %.2f gbps p50 %.0f p99 %.0f'%(j['gbps'],j['p50_us'],j['p99_us']))"
