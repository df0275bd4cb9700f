#!/usr/bin/env bash
# The recorded step's GPU figures in one call sized for a short device lease, the most wanted
# first. Each part runs under its
# own time limit (together 565 s, under the 600 s a lent machine gives one command) and writes
# under OUT as it ends, so a part cut short costs only itself.
#   1. kernel launches per step, f32 and bf16 (`bench --count-ops`, ELECTRA-Small size:
#      12 layers × batch 128, Hard Correction);
#   2. that step, one round: trueneg bf16 and f32 recorded and bf16 not, against PyTorch eager
#      bf16 + fused AdamW and torch.compile(mode="reduce-overhead"), ms per step and peak memory
#      (`electra` part 1);
#   3. the `electra-small` preset end to end, f32 and bf16, recorded and not, one round of
#      PRESET_STEPS (default 40) steps: tokens/s and MFU (`electra` part 3);
#   4. the preset recorded against the same fixed-shape step unrecorded, CURVE_STEPS (default
#      30) steps with every logged value compared, and both resumed from step 20
#      (`graph` part 4).
# The longer lists stay in the `electra` and `graph` parts.
#
#   scripts/gpu.sh quick BIN SHARDS     (SHARDS: prepared at 128 tokens, e.g. WikiText-2's test
#                                        split with --train-vocab 8000)
# TORCH_ELECTRA_BENCH names torch_electra_bench.py where ../shared/bench is not beside the checkout.
# STANDIN=cpu runs it on the CPU to check it (scripts/gpu/common.sh), at the sizes ELECTRA_SIZE,
# LAYERS, OPS_BATCH and PRESET say (scripts/gpu/electra.sh; PRESET also for part 4).
set -uo pipefail
bin=$(realpath "$1")
shards=$(realpath "$2")
out=${OUT_DIR:-${OUT:-/tmp/gpu-quick}}
cd "$(dirname "$0")/../.."
. scripts/gpu/common.sh
gpu_setup "$out"

# part NAME SECONDS COMMAND...: runs COMMAND under a time limit and notes how it ended.
part() {
  local name=$1 limit=$2
  shift 2
  local start=$SECONDS
  timeout "$limit" "$@"
  echo "part $name rc=$? seconds=$((SECONDS - start))" | tee -a "$out/parts.txt"
}

OUT_DIR=$out/launches PHASE_BATCHES= part launches 75 scripts/gpu.sh electra "$bin" "$shards" 1 2
OUT_DIR=$out/step TRUENEG="$GPU_DEVICE:bf16:fused:graph $GPU_DEVICE:f32:fused:graph $GPU_DEVICE:bf16" \
  TORCH="eager-bf16-fused compile-ro-bf16-fused" STEPS=20 WARMUP=8 \
  part step 210 scripts/gpu.sh electra "$bin" "$shards" 1 1
OUT_DIR=$out/preset PRESET_STEPS=${PRESET_STEPS:-40} \
  part preset 130 scripts/gpu.sh electra "$bin" "$shards" 1 3
OUT_DIR=$out/curve W1_SHARDS=$shards CURVE_STEPS=${CURVE_STEPS:-30} CURVE_CONFIG=${PRESET:-electra-small} \
  part curve 150 scripts/gpu.sh graph "$bin" 4
cat "$out/parts.txt"
