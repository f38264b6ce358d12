#!/bin/bash
# usage: [SPIN=N] [ST=server threads] [SZ=bytes] [SECS=s] [AGG=1] [SARGS="server args"] perthread.sh BIN PROTO [client args]
# One run of homa-perf server + client (processes of their own; SPIN=N adds N spinning threads in a
# third process, a busy host), then per RPC and per thread (AGG=1: per kind of thread, e.g. all
# client-N together) over the middle of the run: CPU time, time runnable but waiting for a CPU (run
# delay), times scheduled in (slices), voluntary and involuntary context switches (rates are the
# client's over the whole run, applied to the snapshots' interval, SECS-2.5 s from 1 s in). From
# /proc/PID/task/TID/{schedstat,status}, read at nice -15 (TCP with 64 clients keeps some 130 threads
# runnable: a snapshot at normal priority took seconds). Run it under quiet.sh; threads under 0.1 us/RPC
# of CPU are left out.
H=$1; P=$2; shift 2
[ -x "$H" ] && [ -n "$P" ] || { echo "usage: [SPIN=N] [ST=] [SZ=] [SECS=] [AGG=1] perthread.sh BIN homa|tcp|udp [client args]" >&2; exit 2; }
SZ=${SZ:-500000}; SECS=${SECS:-5}; [ "$SECS" -ge 4 ] || { echo "SECS must be at least 4" >&2; exit 2; }; ST=${ST:-1}
port=$((5100 + RANDOM % 400))
tmp=$(mktemp -d); bp=
trap 'kill $bp $sp $cp 2>/dev/null; [ -n "$KEEP" ] || rm -rf $tmp' EXIT
if [ -n "$SPIN" ]; then
  $H --busy-threads $SPIN server --bind 127.0.0.1:$((port + 1)) --protocol udp --duration $((SECS + 4)) >/dev/null 2>&1 & bp=$!
fi
$H server --bind 127.0.0.1:$port --protocol $P --threads $ST $SARGS --duration $((SECS + 3)) >/dev/null 2>&1 & sp=$!
sleep 0.4
$H client --server 127.0.0.1:$port --protocol $P --size $SZ --seconds $SECS --json "$@" > $tmp/c.json 2>$tmp/c.err & cp=$!
sleep 1
snap() {  # one line per thread still there: tid name cpu_ns delay_ns slices voluntary involuntary
  nice -n -15 python3 -S -c '
import os, sys
d = f"/proc/{sys.argv[1]}/task"
for t in os.listdir(d):
    try:
        c, w, n = open(f"{d}/{t}/schedstat").read().split()[:3]
        name = open(f"{d}/{t}/comm").read().strip().replace(" ", "_")
        st = dict(l.split(":", 1) for l in open(f"{d}/{t}/status") if ":" in l)
        print(t, name, c, w, n, st["voluntary_ctxt_switches"].strip(), st["nonvoluntary_ctxt_switches"].strip())
    except (OSError, KeyError, ValueError):
        pass
' $1 2>/dev/null
}
t0=$(date +%s.%N); snap $cp > $tmp/c0; snap $sp > $tmp/s0
sleep $((SECS - 3)).5
t1=$(date +%s.%N); snap $cp > $tmp/c1; snap $sp > $tmp/s1
wait $cp || { echo "client failed: $(cat $tmp/c.err)" >&2; exit 1; }
python3 - $tmp $t0 $t1 <<'PY'
import json, os, re, sys, collections
tmp, secs = sys.argv[1], float(sys.argv[3]) - float(sys.argv[2])
c = json.load(open(f'{tmp}/c.json')); n = c['rpcs_per_s'] * secs
print(f"{c['protocol']} {c['gbps']:.2f} Gbit/s, {c['rpcs_per_s']:.0f} rpc/s, p50 {c['p50_us']:.1f} us, p99 {c['p99_us']:.1f} us")
agg = bool(os.environ.get('AGG'))
for side, label in (('c', 'client'), ('s', 'server')):
    load = lambda f: {w[0]: (w[1], [int(x) for x in w[2:7]]) for w in (l.split() for l in open(f)) if len(w) == 7}
    a, b = load(f'{tmp}/{side}0'), load(f'{tmp}/{side}1')
    rows = collections.OrderedDict()
    for tid, (name, y) in b.items():
        if tid not in a: continue
        key = re.sub(r'[-0-9.]+$', '', name) if agg else f'{name}'
        d = rows.setdefault(key, [0] * 5)
        for i in range(5): d[i] += y[i] - a[tid][1][i]
    for k, d in rows.items():
        if d[0] / n < 100: continue
        print(f"  {label} {k:16} cpu {d[0]/n/1e3:7.1f} us  delay {d[1]/n/1e3:6.1f} us  slices {d[2]/n:5.2f}"
              f"  voluntary {d[3]/n:5.2f}  involuntary {d[4]/n:5.2f}  per rpc")
PY
