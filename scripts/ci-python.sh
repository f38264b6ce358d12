#!/usr/bin/env bash
# The Python package homars (crates/homa-py): builds and installs it the way
# a user does (`pip install crates/homa-py`, a release build through maturin)
# into a fresh virtual environment under a temporary directory, then runs its
# pytest suite against the installed package.
#
# Needs python3 (3.8 or newer, with the venv module) and PyPI for maturin,
# pytest and pytest-asyncio. PYTHON picks another interpreter. 1.5 to 3
# minutes on the 2-core CI machine from a clean target/ (measured 94 s and
# 183 s, the machine busier): 80-160 s the release build of the extension
# (fat LTO, the workspace's release profile), ~6 s the 88 tests.
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-python3}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

echo "== python: venv ($("$python" --version 2>&1))"
"$python" -m venv "$tmp/venv"
py="$tmp/venv/bin/python"
"$py" -m pip install --quiet --disable-pip-version-check maturin pytest pytest-asyncio

echo "== python: pip install crates/homa-py"
start=$(date +%s)
"$py" -m pip install --quiet --disable-pip-version-check crates/homa-py
echo "built and installed in $(($(date +%s) - start)) s"

echo "== python: pytest"
# From outside the source tree, so `import homars` is the installed package.
cd "$tmp"
"$py" -m pytest -p no:cacheprovider -q "$OLDPWD/crates/homa-py/tests"
