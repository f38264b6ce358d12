#!/usr/bin/env bash
# Builds homa-sim with profile-guided optimisation: an instrumented build
# runs a short training mix (Homa and pFabric, short- and long-message
# workloads), and the final build is optimised for the branches and call
# paths that mix took. Results are bit-for-bit those of the plain build
# (PGO changes code layout and inlining, never arithmetic); only speed
# differs. Output: target/sim-pgo/sim/homa-sim (or $CARGO_TARGET_DIR/...).
#
# Needs the llvm-tools rustup component (installed here if missing).
set -euo pipefail
cd "$(dirname "$0")/.."
target=${CARGO_TARGET_DIR:-target}/sim-pgo
profdir=$(mktemp -d "${TMPDIR:-/tmp}/homa-sim-pgo.XXXXXX")
trap 'rm -rf "$profdir"' EXIT

sysroot=$(rustc --print sysroot)
host=$(rustc -vV | sed -n 's/^host: //p')
profdata="$sysroot/lib/rustlib/$host/bin/llvm-profdata"
if [ ! -x "$profdata" ]; then
  echo "== installing the llvm-tools rustup component (for llvm-profdata)"
  rustup component add llvm-tools >/dev/null
fi

echo "== instrumented build"
RUSTFLAGS="-Cprofile-generate=$profdir/raw" \
  cargo build --profile sim -p homa-sim --target-dir "$target/instrumented" --quiet
bin="$target/instrumented/sim/homa-sim"
scenario="$profdir/nic.toml"
echo 'nic_queue_packets = 1.0' >"$scenario"
echo "== training runs"
for args in "--workload w4 --messages 6000" "--workload w1 --messages 20000" \
  "--workload w5 --messages 600" "--workload w3 --messages 6000 --protocol pfabric"; do
  # shellcheck disable=SC2086
  "$bin" run --scenario "$scenario" --load 0.8 --seed 7 $args --out "$profdir/out" --quiet >/dev/null
  rm -rf "$profdir/out"
done
"$profdata" merge -o "$profdir/merged.profdata" "$profdir/raw"
echo "== optimised build"
RUSTFLAGS="-Cprofile-use=$profdir/merged.profdata" \
  cargo build --profile sim -p homa-sim --target-dir "$target" --quiet
echo "built $target/sim/homa-sim"
