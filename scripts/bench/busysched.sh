#!/bin/bash
# usage: [T=server threads] [SARGS=server args] busysched.sh BIN PROTO [client args]
# 500 KB x4, a thread per RPC, 2 spinning threads in the client process; `perf sched record`
# of the whole host for 1 s in the middle of a 3 s run, then CPU time, wait and scheduling
# delay per thread group (perf sched timehist): who got the CPUs.
B=$1; P=$2; shift 2
port=$((4760 + RANDOM % 50))
out=$(mktemp /tmp/busysched.XXXX)
trap 'rm -f $out $out.json; kill $S 2>/dev/null' EXIT
$B server --protocol $P --bind 127.0.0.1:$port --threads ${T:-2} $SARGS >/dev/null 2>&1 & S=$!
sleep 0.3
$B --busy-threads 2 client --protocol $P --server 127.0.0.1:$port --size 500000 --concurrency 4 --seconds 3 --json "$@" > $out.json 2>/dev/null &
C=$!
sleep 1
perf sched record -o $out -- sleep 1 >/dev/null 2>&1
wait $C
python3 -c "import json; j=json.load(open('$out.json')); print('$(basename $B) $P $*: %.1f Gbit/s'%j['gbps'])"
perf sched timehist -i $out 2>/dev/null | python3 -c "
import sys, re, collections
agg = collections.defaultdict(lambda: [0, 0.0, 0.0, 0.0])
for l in sys.stdin:
    p = l.split()
    if len(p) < 6 or not p[0][0].isdigit():
        continue
    try:
        w, d, r = float(p[-3]), float(p[-2]), float(p[-1])
    except ValueError:
        continue
    k = re.sub(r'[-:/]?[0-9]*$', '', re.sub(r'\[.*', '', p[2]))
    a = agg[k]; a[0] += 1; a[1] += w; a[2] += d; a[3] += r
for k, a in sorted(agg.items(), key=lambda x: -x[1][3])[:6]:
    print('  %-18s run %7.1f ms  waited %7.1f ms  scheduling delay %7.1f ms  switches %5d' % (k, a[3], a[1], a[2], a[0]))
"
