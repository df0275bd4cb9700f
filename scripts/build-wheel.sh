#!/usr/bin/env bash
# Builds the Python wheel (pyproject.toml) into target/wheels: the release binary first (the
# `trueneg` command the wheel carries), then the module through maturin, which the venv at
# $PYTHON (default target/py-venv/bin/python) gets if it lacks it.
#   scripts/build-wheel.sh            # builds; prints the wheel's path last
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-target/py-venv/bin/python}

cargo build --release
# A build with feature `tch` (the LibTorch stage's) links LibTorch: not a binary to ship.
if ldd target/release/trueneg 2>/dev/null | grep -q libtorch; then
  echo "target/release/trueneg links LibTorch (a --features tch build): rebuild it with 'touch src/main.rs && cargo build --release'" >&2
  exit 1
fi
rm -rf target/wheel-data target/wheels
mkdir -p target/wheel-data/scripts
cp target/release/trueneg target/wheel-data/scripts/trueneg
strip target/wheel-data/scripts/trueneg 2>/dev/null || true

"$PYTHON" -m maturin --version >/dev/null 2>&1 ||
  "$PYTHON" -m pip install --quiet --disable-pip-version-check 'maturin>=1.8,<2'
"$PYTHON" -m maturin build --release --strip --out target/wheels --interpreter "$PYTHON" >&2
ls target/wheels/trueneg-*.whl
