#!/usr/bin/env bash
# The GPU scripts a lent GPU runs first, run as written with their CPU stand-in at tiny sizes, and
# checked. The figures mean nothing; that the scripts run through is the point, so a lent GPU's
# minutes go to measuring:
# - `scripts/gpu.sh quick` (STANDIN=cpu, scripts/gpu/common.sh; the `tiny` preset on shards of
#   64 tokens made from the repository's text): every part ends, every trueneg and PyTorch run
#   measures, every pre-training run and resume exits 0, and the "recorded" curves (the same
#   runs unrecorded on the CPU) are identical to the unrecorded ones;
# - `scripts/gpu.sh finetune` (DEVICE=libtorch TORCH_DEVICE=cpu SIZES=tiny): all five runs
#   measure.
#
#   scripts/gpu/standin.sh BIN [OUT]    (BIN: a `--features tch` build; PYTHON: the Python whose
#                                        PyTorch BIN was built against, default python3)
set -euo pipefail
bin=$(realpath "$1")
out=$(realpath -m "${2:-/tmp/gpu-standin}")
cd "$(dirname "$0")/../.."
rm -rf "$out" && mkdir -p "$out"
. scripts/gpu/common.sh
STANDIN=cpu gpu_setup "$out" >/dev/null
cat README.md BENCHMARKS.md docs/*.md >"$out/corpus.txt"
"$bin" --quiet prepare --input "$out/corpus.txt" --train-vocab 2000 --max-seq-len 64 \
  --out "$out/shards" >/dev/null
STANDIN=cpu ELECTRA_SIZE=tiny LAYERS=2 OPS_BATCH=4 PRESET=tiny PRESET_STEPS=30 CURVE_STEPS=24 \
  OUT_DIR=$out/quick scripts/gpu.sh quick "$bin" "$out/shards"

q=$out/quick
problems=$(grep -rhE 'FAILED|rc=[1-9]|no windows' "$q" --include='*.txt' || true)
results=$(cat "$q"/step/results.txt 2>/dev/null | grep -c '^RESULT' || true)
ops=$(grep -c 'calls_per_step\|ops_per_step\|calls into LibTorch' "$q/launches/phases.txt" || true)
presets=$(grep -c '^RESULT preset' "$q/preset/preset.txt" || true)
curves=$(grep -c '^curve .* rc=0' "$q/curve/summary.txt" || true)
# The "recorded" runs are the same runs unrecorded here: the curves must be identical.
same=$(grep -cE '^RESULT (curve|resume) .*difference 0.00e\+00' "$q/curve/summary.txt" || true)
echo "stand-in: $results step results, $ops operation counts, $presets preset rates," \
  "$curves curve runs, $same identical comparisons"
if [ -n "$problems" ] || [ "$results" -ne 5 ] || [ "$ops" -lt 2 ] || [ "$presets" -ne 4 ] ||
  [ "$curves" -ne 8 ] || [ "$same" -ne 6 ]; then
  echo "gpu stand-in: scripts/gpu.sh quick did not run through on the CPU:" >&2
  echo "$problems" >&2
  cat "$q/parts.txt" >&2
  exit 1
fi

ft=$out/finetune
DEVICE=libtorch TORCH_DEVICE=cpu SIZES=tiny ROUNDS=1 EXAMPLES=64 BATCH=8 LEN=32 \
  scripts/gpu.sh finetune "$bin" "$ft"
measured=$(grep -cv ' failed ' "$ft/finetune.txt" || true)
if grep -q ' failed ' "$ft/finetune.txt" || [ "$measured" -ne 5 ]; then
  echo "gpu stand-in: scripts/gpu.sh finetune did not measure all five runs on the CPU:" >&2
  cat "$ft/finetune.txt" >&2
  exit 1
fi
echo "stand-in: the fine-tuning script measured its five runs"
