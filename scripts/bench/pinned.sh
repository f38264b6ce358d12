#!/bin/bash
# usage: [T=server threads] [SECS=2] [SARGS=server args] pinned.sh BIN PROTO [client args]: server on CPU 1, client on CPU 0; RPC/s and CPU us/RPC each side
B=$1; P=$2; shift 2
port=$((4700 + RANDOM % 50))
taskset -c 1 $B server --protocol $P --bind 127.0.0.1:$port --threads ${T:-1} $SARGS >/dev/null 2>&1 & S=$!
sleep 0.3
c0=$(awk '{print $14+$15}' /proc/$S/stat)
perf stat -x, -e context-switches,task-clock -o /tmp/pin.perf taskset -c 0 $B client --protocol $P --server 127.0.0.1:$port --seconds ${SECS:-2} --json "$@" > /tmp/pin.json 2>/dev/null
c1=$(awk '{print $14+$15}' /proc/$S/stat)
kill $S; wait $S 2>/dev/null
python3 - $P $(basename $B) $((c1-c0)) <<'PY'
import json,sys
j=json.load(open('/tmp/pin.json')); n=j['rpcs']
perf={}
for l in open('/tmp/pin.perf'):
    f=l.strip().split(',')
    if len(f)>3 and f[0] and f[0][0].isdigit(): perf[f[2]]=float(f[0])
print('%s %s: %.0f rpc/s %.2f gbps p50 %.0f p99 %.0f | cpu us/rpc server %.1f client %.1f | client cs/rpc %.2f'%(sys.argv[2],sys.argv[1],j['rpcs_per_s'],j.get('gbps',0) or 0,j['p50_us'],j['p99_us'],int(sys.argv[3])*10000/n,perf['task-clock']*1000/n,perf['context-switches']/n))
PY
