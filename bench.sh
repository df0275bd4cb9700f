#!/usr/bin/env bash
# Side-by-side CPU benchmark, alternating in one session.
#   BERT (default): trueneg against torch_bench.py at equal work (masked-position MLM head, eager
#   and torch.compile) and against transformers' own full-logits head (what a transformers user
#   would run).
#   MODEL=electra: the ELECTRA step (generator + discriminator, Hard Correction on both sides)
#   against torch_electra_bench.py eager and torch.compile, at a size that fits a small CPU
#   (LAYERS, default 2; BATCH, default 8).
# Usage: PYTHON=venv/bin/python [MODEL=electra] ./bench.sh [rounds] [steps]
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-venv/bin/python}
ROUNDS=${1:-3}
STEPS=${2:-20}
# The binary measured is the release build of this checkout: build it, in sight.
echo "bench.sh: cargo build --release (measuring target/release/trueneg)" >&2
cargo build --release >&2
ms() { grep -E '^ms_per_step=' | cut -d= -f2; }
if [ "${MODEL:-bert}" = electra ]; then
  size=(--layers "${LAYERS:-2}" --batch "${BATCH:-8}")
  ref() { "$PY" ../shared/bench/torch_electra_bench.py --hc "${size[@]}" --steps "$STEPS" --warmup 3 "$@" | ms; }
  echo "round trueneg eager compile ratio_eager ratio_compile"
  for r in $(seq 1 "$ROUNDS"); do
    rust=$(./target/release/trueneg --quiet bench --model electra --hc "${size[@]}" --steps "$STEPS" --warmup 3 | ms)
    eager=$(ref)
    compiled=$(ref --compile)
    python3 -c "r,e,c=$rust,$eager,$compiled; print('$r', r, e, c, round(e/r,3), round(c/r,3))"
  done
  exit
fi
ref() { "$PY" ../shared/bench/torch_bench.py --steps "$STEPS" --warmup 3 "$@" | ms; }
echo "round trueneg masked_eager masked_compile full_logits ratio_eager ratio_compile ratio_full"
for r in $(seq 1 "$ROUNDS"); do
  rust=$(./target/release/trueneg --quiet bench --steps "$STEPS" --warmup 3 | ms)
  eager=$(ref --masked-head)
  compiled=$(ref --masked-head --compile)
  full=$(ref)
  python3 -c "r,e,c,f=$rust,$eager,$compiled,$full; print('$r', r, e, c, f, round(e/r,3), round(c/r,3), round(f/r,3))"
done
