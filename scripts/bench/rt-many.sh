#!/bin/bash
# usage: rt-many.sh [client-args...] : 64 clients vs server (T threads), homa (HP) then tcp (if TCP=1):
# RPC/s, p50, CPU us/RPC server+client, client context switches & migrations per RPC
HP=${HP:?set HP to a homa-perf binary}; C=${C:-64}; T=${T:-2}
protos="homa"; [ "$TCP" = 1 ] && protos="homa tcp"
$HP server --bind 127.0.0.1:4500 --threads $T >/dev/null 2>&1 & S=$!
$HP server --protocol tcp --bind 127.0.0.1:4501 >/dev/null 2>&1 & TS=$!
sleep 0.3
cpu() { awk '{print $14+$15}' /proc/$1/stat; }
for p in $protos; do
  port=4500; pid=$S; [ $p = tcp ] && { port=4501; pid=$TS; }
  c0=$(cpu $pid)
  perf stat -x, -e context-switches,cpu-migrations,task-clock -o /tmp/rt-many.perf $HP client --protocol $p --server 127.0.0.1:$port "$@" --seconds ${SECS:-2} --concurrency $C --json > /tmp/rt-many.json 2>/dev/null
  c1=$(cpu $pid)
  python3 - $p $(basename $HP) $((c1-c0)) <<'PY'
import json,sys
j=json.load(open('/tmp/rt-many.json')); n=j['rpcs']
perf={}
for l in open('/tmp/rt-many.perf'):
    f=l.strip().split(',')
    if len(f)>3 and f[0] and f[0][0].isdigit(): perf[f[2]]=float(f[0])
rt=(j.get('homa_metrics') or {}).get('runtime') or {}
bw=' bg_wakes/rpc %.3f self_kicks/rpc %.3f recv_timeouts/rpc %.3f'%(rt.get('background_wakes',0)/n,rt.get('self_kicks',0)/n,rt.get('recv_timeouts',0)/n) if rt else ''
print('%s %s: %.0f rpc/s p50 %.0f p99 %.0f | cpu us/rpc server %.1f client %.1f | client cs/rpc %.2f migr/rpc %.3f%s'%(
  sys.argv[2],sys.argv[1],j['rpcs_per_s'],j['p50_us'],j['p99_us'],int(sys.argv[3])*10000/n,perf['task-clock']*1000/n,perf['context-switches']/n,perf['cpu-migrations']/n,bw))
PY
done
kill $S $TS; wait 2>/dev/null
