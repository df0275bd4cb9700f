#!/usr/bin/env bash
# The ELECTRA step on one GPU, in one call (a lent GPU's minutes go to measuring):
#   1. `scripts/gpu-bench.sh` with MODEL=electra at ELECTRA-Small size (12 layers × batch 128,
#      Hard Correction on both sides): trueneg `libtorch-cuda` f32 / bf16 against
#      torch_electra_bench.py eager f32, eager bf16 + fused AdamW, torch.compile and
#      torch.compile(mode="reduce-overhead"), alternating;
#   2. where the step's time goes, f32 against bf16 (`bench --sync-phases`), at batch 128 and
#      512 (a gap that stays the same in ms as the batch grows is launch cost, not arithmetic);
#   3. the `electra-small` preset end to end, f32 and bf16 (tokens/s of the last window).
# Everything it prints is also written under OUT_DIR (default $OUT, else /tmp/gpu-electra).
#
#   scripts/gpu-electra-bench.sh BIN SHARDS [ROUNDS] [PARTS]
#     BIN     a `--features tch` build of trueneg
#     SHARDS  prepared shards for part 3 (e.g. WikiText-2's test split, --train-vocab 8000)
#     PARTS   which parts to run, default "1 2 3"
set -uo pipefail
bin=$(realpath "$1")
shards=$(realpath "$2")
rounds=${3:-1}
parts=${4:-1 2 3}
out=${OUT_DIR:-${OUT:-/tmp/gpu-electra}}
cd "$(dirname "$0")/.."
torch_bench=${TORCH_ELECTRA_BENCH:-../shared/bench/torch_electra_bench.py}
. scripts/gpu-common.sh
gpu_setup "$out"

for part in $parts; do
  case $part in
    1)
      MODEL=electra SIZES=small WARMUP=${WARMUP:-8} \
        TRUENEG=${TRUENEG:-libtorch-cuda:f32 libtorch-cuda:bf16} \
        TORCH=${TORCH:-eager-f32 eager-bf16-fused compile-bf16-fused compile-ro-bf16-fused} \
        scripts/gpu-bench.sh "$bin" "$torch_bench" "$rounds" "${STEPS:-20}" 2>&1 | tee -a "$out/bench.txt"
      grep RESULT "$out/bench.txt" | tee "$out/results.txt"
      ;;
    2)
      for batch in 128 512; do
        for prec in f32 bf16; do
          echo "== phases batch=$batch precision=$prec" | tee -a "$out/phases.txt"
          "$bin" --quiet bench --model electra --hc --device libtorch-cuda --layers 12 \
            --batch "$batch" --precision "$prec" --sync-phases --steps 10 --warmup 4 2>&1 \
            | grep -E '^# |ms_per_step' | tee -a "$out/phases.txt"
        done
      done
      ;;
    3)
      for prec in f32 bf16; do
        run=$(mktemp -d)/run
        "$bin" --quiet pretrain --config electra-small --run "$run" \
          --set "data.shards=$shards" --set model.vocab_size=0 --set train.device=libtorch-cuda \
          --set "train.precision=$prec" --set train.steps=40 --set train.log_every=10 \
          >"$out/preset-$prec.log" 2>&1
        echo "preset electra-small $prec rc=$? $(tail -1 "$run/metrics.jsonl" | grep -o '"tokens_per_s":[0-9.]*')" \
          | tee -a "$out/preset.txt"
      done
      ;;
  esac
done
