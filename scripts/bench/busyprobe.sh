#!/bin/bash
# usage: [T=server threads] [SARGS=server args] [SECS=2] busyprobe.sh BIN PROTO [client args]: 500 KB x4, a thread per RPC,
# 2 spinning threads in the client process; futex, sched_yield, context switches and CPU per RPC of each side
# (the client's CPU includes its spinners)
B=$1; P=$2; shift 2
port=$((4760 + RANDOM % 50))
$B server --protocol $P --bind 127.0.0.1:$port --threads ${T:-2} $SARGS >/dev/null 2>&1 & S=$!
sleep 0.3
perf stat -x, -e syscalls:sys_enter_futex,syscalls:sys_enter_sched_yield,context-switches,task-clock -p $S -o /tmp/probe.srv &
PS=$!
perf stat -x, -e syscalls:sys_enter_futex,syscalls:sys_enter_sched_yield,context-switches,task-clock -o /tmp/probe.cli $B --busy-threads 2 client --protocol $P --server 127.0.0.1:$port --size 500000 --concurrency 4 --seconds ${SECS:-2} --json "$@" > /tmp/probe.json 2>/dev/null
kill -INT $PS; wait $PS 2>/dev/null
kill $S; wait $S 2>/dev/null
python3 - "$P $*" <<'PY'
import json,sys
j=json.load(open('/tmp/probe.json')); n=j['rpcs']
def rd(f):
    d={}
    for l in open(f):
        x=l.strip().split(',')
        if len(x)>3 and x[0] and x[0][0].isdigit(): d[x[2]]=float(x[0])
    return d
c=rd('/tmp/probe.cli'); s=rd('/tmp/probe.srv')
k=lambda d,e: d.get(e,0)/n
print('%-30s %.1f gbps | client futex %.2f yield %.2f cs %.2f cpu %.0fus | server futex %.2f yield %.2f cs %.2f cpu %.0fus'%(sys.argv[1],j['gbps'],k(c,'syscalls:sys_enter_futex'),k(c,'syscalls:sys_enter_sched_yield'),k(c,'context-switches'),k(c,'task-clock')*1000,k(s,'syscalls:sys_enter_futex'),k(s,'syscalls:sys_enter_sched_yield'),k(s,'context-switches'),k(s,'task-clock')*1000))
PY
