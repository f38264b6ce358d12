#!/bin/bash
# usage: sys100.sh BIN [client args]: syscalls per RPC on the server and client, 100 B, 2 spinners in the client
b=$1; shift
ev='syscalls:sys_enter_ppoll,syscalls:sys_enter_recvmmsg,syscalls:sys_enter_recvfrom,syscalls:sys_enter_sendmsg,syscalls:sys_enter_sendto,syscalls:sys_enter_futex,syscalls:sys_enter_setsockopt,context-switches'
perf stat -x, -e $ev -o /tmp/sys100-s.txt $b server --bind 127.0.0.1:4811 >/dev/null 2>&1 & S=$!
sleep 0.4
perf stat -x, -e $ev -o /tmp/sys100-c.txt $b --busy-threads 2 client --server 127.0.0.1:4811 --size 100 --seconds 2 --json "$@" > /tmp/sys100.json 2>/dev/null
kill -INT $(pgrep -P $S); wait $S 2>/dev/null; sleep 0.2
python3 - <<'PY'
import json
j=json.load(open('/tmp/sys100.json')); n=j['rpcs']
for side in 's','c':
    out=[]
    for l in open('/tmp/sys100-%s.txt'%side):
        f=l.strip().split(',')
        if len(f)>3 and f[0] and f[0][0].isdigit():
            out.append('%s %.2f'%(f[2].replace('syscalls:sys_enter_',''),float(f[0])/n))
    print({'s':'server','c':'client'}[side], 'per RPC:', ', '.join(out))
print('rpcs',n,'p50',j['p50_us'],'p99',j['p99_us'])
PY
