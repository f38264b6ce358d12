#!/bin/bash
# usage: bp.sh ROUNDS BIN...: busy-poll 100 B p50, 1 s each, binaries alternating (homa), then udp; prints per-binary p50s and their median
rounds=$1; shift
for r in $(seq $rounds); do
  for b in "$@" udp; do
    if [ $b = udp ]; then bin=$1; proto=udp; else bin=$b; proto=homa; fi
    port=$((4700 + RANDOM % 90))
    $bin server --protocol $proto --busy-poll --bind 127.0.0.1:$port >/dev/null 2>&1 & S=$!
    sleep 0.2
    j=$($bin client --protocol $proto --busy-poll --server 127.0.0.1:$port --size 100 --seconds 1 --json 2>/dev/null)
    kill $S; wait $S 2>/dev/null
    echo "$(basename $b) $(echo "$j" | python3 -c 'import json,sys; print(json.load(sys.stdin)["p50_us"])')"
  done
done | python3 -c "
import sys,statistics as st
d={}
for l in sys.stdin:
    k,v=l.split(); d.setdefault(k,[]).append(float(v))
u=st.median(d['udp'])
for k,v in d.items(): print('%-10s median %.2f (÷udp %.2f) :'%(k,st.median(v),st.median(v)/u), ' '.join('%.1f'%x for x in v))
"
