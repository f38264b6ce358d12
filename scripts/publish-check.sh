#!/usr/bin/env bash
# Would every publishable crate publish? Exits non-zero if not.
#
# 1. `cargo publish --dry-run --workspace`: packages every member without
#    `publish = false` (in dependency order, each against the others'
#    packages through a local overlay, so unpublished path dependencies
#    resolve) and verifies each by building its packaged sources. Nothing
#    is uploaded.
# 2. Each packaged crate builds (clippy, warnings denied, tests and examples
#    included) with no default features and with all features.
#
# Network: only the crates.io registry (or the mirror cargo is set up
# with). Builds go to the usual target dir, so a second run rebuilds only
# the packaged crates themselves (seconds). Needs cargo >= 1.90.
set -euo pipefail
cd "$(dirname "$0")/.."

read -r major minor < <(cargo --version | sed -E 's/^cargo ([0-9]+)\.([0-9]+).*/\1 \2/')
if ((major < 1 || (major == 1 && minor < 90))); then
  echo "publish-check: cargo $major.$minor is too old; 'cargo publish --workspace' needs 1.90" >&2
  exit 1
fi

# Cargo verifies each crate against the others' packages through a local
# overlay registry. Like any registry crate, such a package is assumed never
# to change for a given name and version: cargo extracts it once under
# $CARGO_HOME/registry/src/-<hash of the overlay's path>/<name>-<version>, and
# it does not rebuild what it compiled from it. Our versions stay the same
# from commit to commit, so a second run from the same checkout path (CI
# clones to one fixed path) would verify against the sources, or the build, of
# an earlier commit. Forget both for our own crates first: their overlay
# extractions (directories named '-<hash>'; crates.io's are left alone) and
# the fingerprints of whatever was compiled from those extractions.
cargo_home=${CARGO_HOME:-$HOME/.cargo}
metadata=$(cargo metadata --no-deps --format-version 1)
mapfile -t members < <(python3 -c 'import json,sys
for p in json.load(sys.stdin)["packages"]: print(p["name"] + "-" + p["version"])' <<<"$metadata")
target=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])' <<<"$metadata")
for m in "${members[@]}"; do
  rm -rf "$cargo_home"/registry/src/-*/"$m"
done
shopt -s nullglob
for dep in "$target"/debug/deps/*.d; do
  if grep -qE '/registry/src/-[0-9a-f]+/homa-' "$dep"; then
    hash=${dep##*-}
    rm -rf "$target"/debug/.fingerprint/*-"${hash%.d}"
  fi
done
shopt -u nullglob

echo "== publish dry-run (every crate without publish = false)"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# --allow-dirty: a check, not a publication (CI's earlier steps may leave
# files behind); a real `cargo publish` refuses a dirty tree.
rc=0
cargo publish --dry-run --workspace --allow-dirty >"$log" 2>&1 || rc=$?
grep -E '^ *(Packaging|Packaged|Verifying|Uploading|error|warning)' "$log" || true
if ((rc != 0)); then
  echo "publish-check: the dry run failed (exit $rc); its whole output:" >&2
  cat "$log" >&2
  exit 1
fi
mapfile -t crates < <(sed -nE 's/^ *Packaging ([^ ]+) v.*/\1/p' "$log")
if ((${#crates[@]} == 0)); then
  echo "publish-check: no crate was packaged" >&2
  exit 1
fi
echo "packaged and verified: ${crates[*]}"

for c in "${crates[@]}"; do
  for features in --no-default-features --all-features; do
    echo "== $c $features"
    cargo clippy -q -p "$c" "$features" --all-targets -- -D warnings
  done
done
echo "publish-check: ${#crates[@]} crates would publish"
