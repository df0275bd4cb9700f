#!/usr/bin/env bash
# Side-by-side CPU benchmark, alternating in one session: trueneg against the PyTorch reference at
# equal work (masked-position MLM head, eager and torch.compile) and against transformers' own
# full-logits head (what a transformers user would run).
# Usage: PYTHON=venv/bin/python ./bench.sh [rounds] [steps]
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-venv/bin/python}
ROUNDS=${1:-3}
STEPS=${2:-20}
cargo build --release --quiet
ms() { grep -E '^ms_per_step=' | cut -d= -f2; }
ref() { "$PY" ../shared/bench/torch_bench.py --steps "$STEPS" --warmup 3 "$@" | ms; }
echo "round trueneg masked_eager masked_compile full_logits ratio_eager ratio_compile ratio_full"
for r in $(seq 1 "$ROUNDS"); do
  rust=$(./target/release/trueneg --quiet bench --steps "$STEPS" --warmup 3 | ms)
  eager=$(ref --masked-head)
  compiled=$(ref --masked-head --compile)
  full=$(ref)
  python3 -c "r,e,c,f=$rust,$eager,$compiled,$full; print('$r', r, e, c, f, round(e/r,3), round(c/r,3), round(f/r,3))"
done
