#!/usr/bin/env bash
# The fine-tuning step on a GPU: `trueneg finetune` (GLUE's SST-2 layout, every row filling
# LEN tokens) against transformers' ElectraForSequenceClassification doing the Trainer's step
# in PyTorch on rows of the same length (scripts/torch_finetune_bench.py: eager and
# torch.compile, bf16 autocast, fused AdamW), alternating, at ELECTRA-Small and Base sizes.
# trueneg runs bf16 and f32, and bf16 with --grad-accum 2. Its rate is results.json's
# train_examples_per_s over EXAMPLES rows (its first steps included, which counts against it);
# PyTorch's is timed after WARMUP steps. Lines go to OUT/finetune.txt:
#   <size> <round> <side> <mode> <precision> <examples/s>
#
#   scripts/gpu.sh finetune BIN [OUT]
#   SIZES     default "small base"      ROUNDS   default 2
#   BATCH     default 32                LEN      default 128
#   EXAMPLES  default 4096 (trueneg's training rows per measurement; PyTorch times
#             STEPS = EXAMPLES / BATCH steps)
#   DEVICE    default libtorch-cuda; the CPU stand-in: DEVICE=libtorch TORCH_DEVICE=cpu
#             SIZES=tiny (LD_LIBRARY_PATH then names the LibTorch BIN was built against)
#   PYTHON    default python3 (with torch and transformers)
set -uo pipefail
bin=$(realpath "$1")
out=$(realpath -m "${2:-${OUT:-/tmp/gpu-finetune}}")
cd "$(dirname "$0")/../.."
py=${PYTHON:-python3}
device=${DEVICE:-libtorch-cuda}
torch_device=${TORCH_DEVICE:-cuda}
batch=${BATCH:-32}
len=${LEN:-128}
examples=${EXAMPLES:-4096}
steps=$((examples / batch))
mkdir -p "$out"
if [ "$torch_device" = cuda ]; then
  . scripts/gpu/common.sh
  gpu_setup "$out"
fi
work=$out/work
results=$out/finetune.txt
: >"$results"

trueneg_rate() { # SIZE ROUND MODE PRECISION FLAGS...
  local size=$1 round=$2 mode=$3 precision=$4
  shift 4
  local ft=$work/ft-$size-$round-$mode-$precision
  rm -rf "$ft"
  if "$bin" finetune --task sst2 --data "$work/data-$size" --model "$work/model-$size" \
    --out "$ft" --device "$device" --precision "$precision" --epochs 1 --lr 1e-4 \
    --batch-size "$batch" --max-seq-len "$len" --max-train-examples "$examples" \
    --eval-every end --quiet "$@" >"$ft.log" 2>&1; then
    local rate
    rate=$("$py" -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["train_examples_per_s"], 1))' "$ft/results.json")
    echo "$size $round trueneg $mode $precision $rate" | tee -a "$results"
  else
    echo "$size $round trueneg $mode $precision failed (see $ft.log)" | tee -a "$results"
    tail -3 "$ft.log"
  fi
}

torch_rate() { # SIZE ROUND MODE
  local line
  if line=$("$py" scripts/torch_finetune_bench.py step "$1" --device "$torch_device" \
    --mode "$3" --precision bf16 --batch "$batch" --len "$len" --steps "$steps" \
    --warmup 10 2>"$work/torch-$1-$2-$3.err" | tail -1); then
    echo "$1 $2 torch $3 bf16 $(echo "$line" | awk '{print $(NF-1)}')" | tee -a "$results"
  else
    echo "$1 $2 torch $3 bf16 failed (see $work/torch-$1-$2-$3.err)" | tee -a "$results"
  fi
}

for size in ${SIZES:-small base}; do
  mkdir -p "$work"
  "$py" scripts/torch_finetune_bench.py make "$size" "$work" --rows "$examples" >/dev/null 2>&1
  rm -rf "$work/data-$size"
  mv "$work/data" "$work/data-$size"
  for round in $(seq "${ROUNDS:-2}"); do
    trueneg_rate "$size" "$round" plain bf16
    torch_rate "$size" "$round" eager
    trueneg_rate "$size" "$round" accum2 bf16 --grad-accum 2
    torch_rate "$size" "$round" compile
    trueneg_rate "$size" "$round" plain f32
  done
done
# Ratios: trueneg bf16 against PyTorch's best bf16 configuration, per size and round.
"$py" - "$results" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1]) if not l.rstrip().endswith(")")]
best = {}
for size, rnd, side, mode, prec, rate in rows:
    key = (size, rnd)
    if side == "torch":
        best[key] = max(best.get(key, 0.0), float(rate))
for size, rnd, side, mode, prec, rate in rows:
    if side == "trueneg" and best.get((size, rnd)):
        print(f"{size} round {rnd}: trueneg {mode} {prec} {float(rate) / best[(size, rnd)]:.2f}x PyTorch's best bf16")
PY
