#!/usr/bin/env bash
# Overhead of the true-negative objectives on the CPU bench spec: baseline (MLM), hc+sr and
# sr-sent, alternating, in one session. Usage: ./bench-objectives.sh [rounds] [steps]
set -euo pipefail
cd "$(dirname "$0")"
ROUNDS=${1:-3}
STEPS=${2:-10}
echo "bench-objectives.sh: cargo build --release (measuring target/release/trueneg)" >&2
cargo build --release >&2
for r in $(seq 1 "$ROUNDS"); do
  line="round $r:"
  for o in baseline hc hc+sr sr-sent; do
    ms=$(./target/release/trueneg --quiet bench --steps "$STEPS" --warmup 2 --objective "$o" | grep -E '^ms_per_step=' | cut -d= -f2)
    line="$line $o ${ms}"
  done
  echo "$line"
done
