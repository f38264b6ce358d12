#!/usr/bin/env bash
# Tests the Wireshark dissector (tools/wireshark/homa.lua) with tshark:
# installs tshark when running as root and it is missing, then runs the
# integration test that writes pcaps of every Homa packet type and checks
# what tshark decodes from them (crates/homa-wire/tests/dissector.rs).
# Without tshark (not root, or the install failed) the test skips, saying so.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v tshark >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  echo "== installing tshark"
  # wireshark-common asks whether non-root users may capture; answer no.
  echo "wireshark-common wireshark-common/install-setuid boolean false" |
    debconf-set-selections 2>/dev/null || true
  (apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tshark) >/dev/null 2>&1 ||
    echo "could not install tshark; the dissector test will be skipped"
fi

if command -v tshark >/dev/null 2>&1; then
  # tshark is here: a skip would hide a broken test, so make it an error.
  export HOMA_DISSECTOR_REQUIRE_TSHARK=1
  tshark --version 2>/dev/null | sed -n 1p
fi
echo "== dissector test"
cargo test -p homa-wire --test dissector -- --nocapture
