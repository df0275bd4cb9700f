#!/usr/bin/env bash
# The ELECTRA step on one GPU, in one call (a lent GPU's minutes go to measuring):
#   1. `scripts/gpu.sh bench` with MODEL=electra at ELECTRA-Small size (12 layers × batch 128,
#      Hard Correction on both sides): trueneg `libtorch-cuda` f32 / bf16 against
#      torch_electra_bench.py eager f32, eager bf16 + fused AdamW, torch.compile and
#      torch.compile(mode="reduce-overhead"), alternating;
#   2. where the step's time goes, f32 against bf16 (`bench --sync-phases`), at batch 128 and
#      512 (a gap that stays the same in ms as the batch grows is launch cost, not arithmetic),
#      and the kernels each launches per step (`bench --count-ops`, batch 128); PHASE_BATCHES
#      (default "128 512") picks the batches of the phase runs, "" none;
#   3. the `electra-small` preset end to end, f32 and bf16, recorded (`train.cuda_graph`) and
#      not, alternating for ROUNDS rounds: the median tokens/s of the 10-step windows after the
#      first two (PRESET_STEPS steps, default 60), and the model FLOP/s and MFU at ≈ 67 MFLOP per
#      token against 989 TFLOP/s (H100 bf16 dense).
# Everything it prints is also written under OUT_DIR (default $OUT, else /tmp/gpu-electra).
# The CPU stand-in (STANDIN=cpu, scripts/gpu/common.sh) takes smaller sizes from ELECTRA_SIZE
# (part 1, default small), LAYERS and OPS_BATCH (part 2, defaults 12 and 128) and PRESET (part 3,
# default electra-small).
#
#   scripts/gpu.sh electra BIN SHARDS [ROUNDS] [PARTS]
#     BIN     a `--features tch` build of trueneg
#     SHARDS  prepared shards for part 3 (e.g. WikiText-2's test split, --train-vocab 8000)
#     PARTS   which parts to run, default "1 2 3"
set -uo pipefail
bin=$(realpath "$1")
shards=$(realpath "$2")
rounds=${3:-1}
parts=${4:-1 2 3}
out=${OUT_DIR:-${OUT:-/tmp/gpu-electra}}
cd "$(dirname "$0")/../.."
torch_bench=${TORCH_ELECTRA_BENCH:-../shared/bench/torch_electra_bench.py}
. scripts/gpu/common.sh
gpu_setup "$out"

for part in $parts; do
  case $part in
    1)
      MODEL=electra SIZES=${ELECTRA_SIZE:-small} WARMUP=${WARMUP:-8} \
        TRUENEG=${TRUENEG:-$GPU_DEVICE:f32 $GPU_DEVICE:bf16} \
        TORCH=${TORCH:-eager-f32 eager-bf16-fused compile-bf16-fused compile-ro-bf16-fused} \
        scripts/gpu.sh bench "$bin" "$torch_bench" "$rounds" "${STEPS:-20}" 2>&1 | tee -a "$out/bench.txt"
      grep RESULT "$out/bench.txt" | tee "$out/results.txt"
      ;;
    2)
      for batch in ${PHASE_BATCHES-128 512}; do
        for prec in f32 bf16; do
          echo "== phases batch=$batch precision=$prec" | tee -a "$out/phases.txt"
          "$bin" --quiet bench --model electra --hc --device "$GPU_DEVICE" --layers "${LAYERS:-12}" \
            --batch "$batch" --precision "$prec" --sync-phases --steps 10 --warmup 4 2>&1 \
            | grep -E '^# |ms_per_step' | tee -a "$out/phases.txt"
        done
      done
      for prec in f32 bf16; do
        echo "== operations precision=$prec" | tee -a "$out/phases.txt"
        "$bin" --quiet bench --model electra --hc --device "$GPU_DEVICE" --layers "${LAYERS:-12}" \
          --batch "${OPS_BATCH:-128}" --precision "$prec" --count-ops --steps 2 --warmup 3 2>&1 \
          | grep -E 'calls into LibTorch|ops_per_step|calls_per_step' | tee -a "$out/phases.txt"
      done
      ;;
    3)
      for round in $(seq "$rounds"); do
        for prec in f32 bf16; do
          for mode in plain graph; do
            run=$out/preset/$prec-$mode-$round
            rm -rf "$run"
            "$bin" --quiet pretrain --config "${PRESET:-electra-small}" --run "$run" \
              --set "data.shards=$shards" --set model.vocab_size=0 --set "train.device=$GPU_DEVICE" \
              --set "train.precision=$prec" --set "train.steps=${PRESET_STEPS:-60}" --set train.log_every=10 \
              --set train.checkpoint_every=100000 --set "train.cuda_graph=$([ $mode = graph ] && echo "$GRAPH_ON" || echo false)" \
              >"$out/preset-$prec-$mode-$round.log" 2>&1
            echo "preset ${PRESET:-electra-small} $prec $mode round $round rc=$?" | tee -a "$out/preset.txt"
          done
        done
      done
      python3 - "$out/preset" <<'PY' | tee -a "$out/preset.txt"
import json, pathlib, statistics, sys
d = pathlib.Path(sys.argv[1])
for prec in ("f32", "bf16"):
    for mode in ("plain", "graph"):
        rates = []
        for f in sorted(d.glob(f"{prec}-{mode}-*/metrics.jsonl")):
            rates += [json.loads(l)["tokens_per_s"] for l in open(f)][2:]
        if not rates:
            print(f"preset {prec} {mode}: no windows"); continue
        m = statistics.median(rates)
        flops = m * 67e6
        print(f"RESULT preset electra-small {prec} {mode}: median tokens/s {m:,.0f} over {len(rates)} windows, "
              f"{flops / 1e12:.1f} TFLOP/s, MFU {100 * flops / 989e12:.2f} %")
PY
      ;;
  esac
done
