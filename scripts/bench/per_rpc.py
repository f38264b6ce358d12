#!/usr/bin/env python3
"""usage: per_rpc.py CLIENT.json SERVER_STAT CLIENT_STAT: perf stat -x, counts of both ends divided
by the client's RPC count (the shared tail of sys100.sh and sysbig.sh)."""
import json
import sys

j = json.load(open(sys.argv[1]))
n = j['rpcs']
for name, path in (('server', sys.argv[2]), ('client', sys.argv[3])):
    out = []
    for line in open(path):
        f = line.strip().split(',')
        if len(f) > 3 and f[0] and f[0][0].isdigit():
            out.append('%s %.2f' % (f[2].replace('syscalls:sys_enter_', ''), float(f[0]) / n))
    print(name, 'per RPC:', ', '.join(out))
print('rpcs', n, 'gbps', j['gbps'], 'p50', j['p50_us'], 'p99', j['p99_us'])
