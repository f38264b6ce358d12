#!/bin/bash
# usage: [BUSY=1] sleep100.sh ROUNDS BIN...: 100 B p50 and p99 with every waiter sleeping at once (Homa --poll-us 0;
# UDP and TCP blocking), 1 s runs, binaries alternating, then UDP and TCP: medians and ratios to UDP;
# BUSY=1 runs two spinning threads in a process of their own throughout. Builds older than --poll-us
# (before the thirteenth pass's end) fail here: use a --config file with poll_us = 0 for them.
rounds=$1; shift
[ -n "$BUSY" ] && { $1 --busy-threads 2 server --bind 127.0.0.1:5098 --protocol udp --duration 100000 >/dev/null 2>&1 & SP=$!; }
for r in $(seq $rounds); do
  for b in "$@" udp tcp; do
    if [ $b = udp ] || [ $b = tcp ]; then bin=$1; proto=$b; cfg=; else bin=$b; proto=homa; cfg="--poll-us 0"; fi
    port=$((4700 + RANDOM % 90))
    $bin server --protocol $proto --bind 127.0.0.1:$port $cfg >/dev/null 2>&1 & S=$!
    sleep 0.2
    j=$($bin client --protocol $proto --server 127.0.0.1:$port --size 100 --seconds 1 --json $cfg 2>/dev/null)
    kill $S 2>/dev/null; wait $S 2>/dev/null
    # (A run that failed, e.g. a build without --poll-us, prints nothing.)
    r=$(echo "$j" | python3 -c 'import json,sys; c=json.load(sys.stdin); print(c["p50_us"], c["p99_us"])' 2>/dev/null) && echo "$(basename $b) $r"
  done
done | python3 -c "
import sys,statistics as st
d={}
for l in sys.stdin:
    k,v,w=l.split(); d.setdefault(k,[]).append((float(v),float(w)))
u=st.median(x[0] for x in d['udp'])
for k,v in d.items(): print('%-10s p50 median %.2f (÷udp %.2f) p99 median %.1f:'%(k,st.median(x[0] for x in v),st.median(x[0] for x in v)/u,st.median(x[1] for x in v)), ' '.join('%.1f'%x[0] for x in v))
"
[ -n "$SP" ] && kill $SP
