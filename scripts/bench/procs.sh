#!/bin/bash
# usage: [N=rounds] [SZ=bytes] [ST=server threads] [B=spinners] [SPIN=proc|client|none] [SECS=s] procs.sh BIN [client args]
# Homa then TCP, alternating N (4) times: server, client and spinners (B=2 threads) each a process of
# their own (SPIN=client: the spinners run in the client's process, as in the demo; none: quiet).
# Per run: Gbit/s, RPC/s, p50, p99, and user/system CPU per RPC of client and server (from /proc,
# over the middle SECS-2 s; with SPIN=client the client's figures include its spinners), and the CPUs
# the spinners got (SPIN=proc; 0 otherwise). Then the
# median of each protocol's Gbit/s, RPC/s and p50. Run it under quiet.sh (quiet.sh procs.sh BIN ...).
H=$1; shift
N=${N:-4}; SZ=${SZ:-500000}; ST=${ST:-1}; B=${B:-2}; SPIN=${SPIN:-proc}; SECS=${SECS:-4}
port=$((4900 + RANDOM % 50))
out=$(mktemp); trap 'rm -f $out $out.json' EXIT
one() {
  local p=$1; shift
  local bp=
  if [ "$SPIN" = proc ]; then
    $H --busy-threads $B server --bind 127.0.0.1:$((port + 1)) --protocol udp --duration $((SECS + 4)) >/dev/null 2>&1 &
    bp=$!
  fi
  $H server --bind 127.0.0.1:$port --protocol $p --threads $ST --duration $((SECS + 3)) >/dev/null 2>&1 &
  local sp=$!; sleep 0.4
  local spin=; [ "$SPIN" = client ] && spin="--busy-threads $B"
  $H $spin client --server 127.0.0.1:$port --protocol $p --size $SZ --seconds $SECS --json "$@" > $out.json 2>/dev/null &
  local cp=$!; sleep 1
  local c0 s0 c1 s1 b0=0 b1=0
  c0=$(awk '{print $14, $15}' /proc/$cp/stat); s0=$(awk '{print $14, $15}' /proc/$sp/stat)
  [ -n "$bp" ] && b0=$(awk '{print $14 + $15}' /proc/$bp/stat)
  sleep $((SECS - 2))
  c1=$(awk '{print $14, $15}' /proc/$cp/stat); s1=$(awk '{print $14, $15}' /proc/$sp/stat)
  [ -n "$bp" ] && b1=$(awk '{print $14 + $15}' /proc/$bp/stat)
  wait $cp; kill $sp 2>/dev/null; [ -n "$bp" ] && kill $bp 2>/dev/null; wait 2>/dev/null
  python3 - $out.json $p $((SECS - 2)) $c0 $s0 $c1 $s1 $b0 $b1 <<'PY' | tee -a $out
import json, sys
p, secs = sys.argv[2], float(sys.argv[3])
a = [int(x) for x in sys.argv[4:]]
c = json.load(open(sys.argv[1]))
n = c['rpcs_per_s'] * secs
f = lambda d: d * 1e4 / n
print(f"{p} {c['gbps']:.2f} Gbit/s {c['rpcs_per_s']:.0f} rpc/s p50 {c['p50_us']:.1f} p99 {c['p99_us']:.1f}"
      f" | client user {f(a[4]-a[0]):.1f} sys {f(a[5]-a[1]):.1f} | server user {f(a[6]-a[2]):.1f} sys {f(a[7]-a[3]):.1f} us/rpc"
      f" | spinners {(a[9]-a[8])/100/secs:.2f} CPUs")
PY
}
for i in $(seq $N); do
  for p in homa tcp; do one $p "$@"; done
done
python3 - $out <<'PY'
import statistics as st, sys
d = {}
for l in open(sys.argv[1]):
    w = l.split()
    d.setdefault(w[0], []).append((float(w[1]), float(w[3]), float(w[6])))
for p, v in d.items():
    print(f"median {p}: {st.median(x[0] for x in v):.2f} Gbit/s, {st.median(x[1] for x in v):.0f} rpc/s, p50 {st.median(x[2] for x in v):.1f} us ({len(v)} runs)")
PY
