#!/bin/bash
# usage: [C=outstanding] [ST=server threads] sysbig.sh BIN PROTO [client args]: syscalls, switches, CPU per RPC on both sides, 500 KB, C (default 4) outstanding
b=$1; p=$2; shift 2
ev='syscalls:sys_enter_ppoll,syscalls:sys_enter_recvmmsg,syscalls:sys_enter_recvfrom,syscalls:sys_enter_sendmsg,syscalls:sys_enter_sendto,syscalls:sys_enter_futex,syscalls:sys_enter_write,syscalls:sys_enter_read,context-switches,task-clock'
port=$((4820 + RANDOM % 50))
perf stat -x, -e $ev -o /tmp/sysbig-s.txt $b server --protocol $p --bind 127.0.0.1:$port ${ST:+--threads $ST} >/dev/null 2>&1 & S=$!
sleep 0.4
perf stat -x, -e $ev -o /tmp/sysbig-c.txt $b client --protocol $p --server 127.0.0.1:$port --size 500000 --concurrency ${C:-4} --seconds 2 --json "$@" > /tmp/sysbig.json 2>/dev/null
kill -INT $(pgrep -P $S); wait $S 2>/dev/null; sleep 0.2
python3 "$(dirname "$0")/per_rpc.py" /tmp/sysbig.json /tmp/sysbig-s.txt /tmp/sysbig-c.txt
