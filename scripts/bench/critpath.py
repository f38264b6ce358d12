#!/usr/bin/env python3
"""usage: critpath.py client|server OUT.cg ...: critical-path estimate per RPC
of a 100 B round trip from callgrind-{client,server}.sh output: inclusive
cost per call of what runs from a packet's arrival to the next send
(handle_packet_meta, the reader's own round, end_round, homa-perf's work,
send_request or reply); RPCs = calls of Endpoint::call (client) /
Endpoint::reply (server); total = program Ir / RPCs."""
import re, subprocess, sys
num = lambda s: int(s.replace(',', ''))
line_re = re.compile(r'^\s*([\d,]+) \([ \d.]+%\)\s+([>*])\s+(?:\?\?\?:)?(.*?)(?: \(([\d,]+)x\))?(?: \[.*\])?$')
def load(cg):
    txt = subprocess.run(['callgrind_annotate', '--inclusive=yes', '--tree=calling',
                          '--threshold=100', cg], capture_output=True, text=True).stdout
    total = num(re.search(r'([\d,]+) \([ \d.]+%\)\s+PROGRAM TOTALS', txt).group(1))
    incl, calls, edges = {}, {}, {}
    for block in txt.split('\n\n'):
        me = None
        for l in block.splitlines():
            m = line_re.match(l)
            if not m: continue
            cost, kind, name, cnt = num(m.group(1)), m.group(2), m.group(3), m.group(4)
            if kind == '*':
                me = name; incl[name] = cost
            elif me is not None:
                k = num(cnt) if cnt else 0
                calls[name] = calls.get(name, 0) + k
                edges[(me, name)] = (cost, k)
    return total, incl, calls, edges
def find(d, sub):
    ks = [k for k in d if k.endswith(sub) or sub in k]
    ks.sort(key=len)
    return ks[0] if ks else None
side = sys.argv[1]
for cg in sys.argv[2:]:
    total, incl, calls, edges = load(cg)
    per_call = lambda sub: (lambda k: incl[k] / calls[k] if k and calls.get(k) else 0)(find(incl, sub))
    if side == 'client':
        rpcs = calls[find(incl, 'endpoint::Endpoint>::call')]
        rpc = find(incl, 'HomaClient as homa_perf::worker::RpcClient>::rpc')
        perf = (incl[rpc] - incl[find(incl, 'endpoint::Endpoint>::call')]) / rpcs
        parts = [('handle_packet_meta', per_call('ingress::<impl homa_core::endpoint::Endpoint>::handle_packet_meta')),
                 ('end_round', per_call('reader::<impl homa::endpoint::Inner>::end_round')),
                 ('homa-perf per RPC (rpc - call)', perf),
                 ('Endpoint::send_request', per_call('endpoint::Endpoint>::send_request'))]
    else:
        rpcs = calls[find(incl, 'endpoint::Endpoint>::reply')]
        perf = sum(incl[k] for k in incl if k.startswith('homa_perf::proto::')) / rpcs
        parts = [('handle_packet_meta', per_call('ingress::<impl homa_core::endpoint::Endpoint>::handle_packet_meta')),
                 ('end_round', per_call('reader::<impl homa::endpoint::Inner>::end_round')),
                 ('homa-perf per request (proto::*)', perf),
                 ('Endpoint::reply', per_call('endpoint::Endpoint>::reply'))]
    # The reader's own round around the packet (locks, per-datagram loop,
    # the timer check): take_input_from less what it calls that is counted
    # above or off the path, per RPC.
    def per_rpc(sub):
        k = find(incl, sub)
        return incl[k] / rpcs if k else 0
    def edge(parent, child):
        p = find(incl, parent)
        return sum(c for (a, b), (c, _) in edges.items() if a == p and child in b) / rpcs
    tif = 'reader::<impl homa::endpoint::Inner>::take_input_from'
    reader = per_rpc(tif) - sum(edge(tif, c) for c in ['handle_packet_meta', 'end_round', 'run_timers',
        'recvmmsg', 'RecvBufs::prepare', 'Endpoint::reap', 'settle_now', 'take_icmp_errors'])
    parts.insert(1, ('reader round (take_input_from, rest)', reader))
    cp = sum(v for _, v in parts)
    settle = find(incl, 'homa_core::endpoint::Endpoint::settle_now')
    print(f'{cg}: {rpcs} RPCs, total {total/rpcs:,.0f} Ir/RPC, critical path {cp:,.0f} Ir/RPC'
          + (f', settle_now {incl[settle]/rpcs:,.0f}/RPC' if settle else ''))
    for n, v in parts:
        print(f'    {v:8,.0f}  {n}')
