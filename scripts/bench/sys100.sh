#!/bin/bash
# usage: sys100.sh BIN [client args]: syscalls per RPC on the server and client, 100 B, 2 spinners in the client
b=$1; shift
ev='syscalls:sys_enter_ppoll,syscalls:sys_enter_recvmmsg,syscalls:sys_enter_recvfrom,syscalls:sys_enter_sendmsg,syscalls:sys_enter_sendto,syscalls:sys_enter_futex,syscalls:sys_enter_setsockopt,context-switches'
perf stat -x, -e $ev -o /tmp/sys100-s.txt $b server --bind 127.0.0.1:4811 >/dev/null 2>&1 & S=$!
sleep 0.4
perf stat -x, -e $ev -o /tmp/sys100-c.txt $b --busy-threads 2 client --server 127.0.0.1:4811 --size 100 --seconds 2 --json "$@" > /tmp/sys100.json 2>/dev/null
kill -INT $(pgrep -P $S); wait $S 2>/dev/null; sleep 0.2
python3 "$(dirname "$0")/per_rpc.py" /tmp/sys100.json /tmp/sys100-s.txt /tmp/sys100-c.txt
