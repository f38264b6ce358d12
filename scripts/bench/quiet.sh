#!/bin/bash
# usage: quiet.sh CMD...  -- SIGSTOPs niced processes (builds, test runs; not qemu: a stopped guest fails the interop suite) while CMD runs, one measurement at a time
exec 9>/tmp/homa-bench.lock; flock 9
pids=$(ps -eo pid=,ni=,comm= | awk '($2>=5) && $1 != '"$$"' {print $1}')
for p in $pids; do kill -STOP $p 2>/dev/null; done
trap 'for p in $pids; do kill -CONT $p 2>/dev/null; done' EXIT
sleep 0.3
"$@"
