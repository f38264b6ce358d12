#!/usr/bin/env bash
# Runs every cargo-fuzz target for a few seconds each (default 30).
# Needs a nightly toolchain; installs cargo-fuzz from crates.io if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-30}"
if ! rustup toolchain list 2>/dev/null | grep -q nightly; then
  echo "no nightly toolchain: skipping the fuzz run (the targets build only on nightly)"
  exit 0
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked
fi
cd fuzz
for target in $(cargo +nightly fuzz list); do
  echo "fuzzing $target for ${secs}s"
  cargo +nightly fuzz run "$target" -- -max_total_time="$secs" -rss_limit_mb=4096
done
