#!/bin/bash
# usage: ustime.sh BIN PROTO [client args]: user and system CPU per RPC (µs) of server and client (/proc stat), 100 B, 2 spinners in the client process (their CPU is not counted: spinner threads are excluded by reading per-thread stats)
b=$1; p=$2; shift 2
$b server --protocol $p --bind 127.0.0.1:4851 >/dev/null 2>&1 & S=$!
sleep 0.4
st() { awk '{print $14, $15}' /proc/$S/stat; }
read su0 ss0 < <(st)
$b --busy-threads 2 client --protocol $p --server 127.0.0.1:4851 --size 100 --seconds 2 --json "$@" > /tmp/us.json 2>/dev/null &
C=$!
sleep 1.9
# client threads other than spinners: sum all threads' stats, minus the two busiest (spinners)
ct=$(for t in /proc/$C/task/*; do awk '{print $14+$15, $14, $15, $2}' $t/stat; done | sort -n | head -n -2 | awk '{u+=$2; s+=$3} END {print u, s}')
wait $C
read su1 ss1 < <(st)
kill $S; wait $S 2>/dev/null
python3 - $p $su0 $ss0 $su1 $ss1 $ct <<'PY'
import json,sys
j=json.load(open('/tmp/us.json')); n=j['rpcs']
p,su0,ss0,su1,ss1,cu,cs=sys.argv[1],*map(int,sys.argv[2:])
f=lambda t: t*10000/n
print('%s: server user %.2f sys %.2f | client (no spinners, to 1.9 s) user %.2f sys %.2f us/rpc | p50 %.1f rpc/s %d'%(p,f(su1-su0),f(ss1-ss0),f(cu)*1.0,f(cs),j['p50_us'],j['rpcs_per_s']))
PY
