#!/usr/bin/env bash
# Side-by-side CPU benchmark: trueneg vs the PyTorch reference, alternating, in one session.
# Usage: PYTHON=venv/bin/python ./bench.sh [rounds] [steps]
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-venv/bin/python}
ROUNDS=${1:-3}
STEPS=${2:-20}
cargo build --release --quiet
for r in $(seq 1 "$ROUNDS"); do
  rust=$(./target/release/trueneg --quiet bench --steps "$STEPS" --warmup 3 | grep -E '^ms_per_step=' | cut -d= -f2)
  torch=$("$PY" ../shared/bench/torch_bench.py --steps "$STEPS" --warmup 3 | grep -E '^ms_per_step=' | cut -d= -f2)
  echo "round $r: trueneg ${rust} ms/step, torch ${torch} ms/step, ratio $(python3 -c "print(round($torch/$rust, 3))")"
done
