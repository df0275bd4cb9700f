#!/usr/bin/env bash
# trueneg and PyTorch side by side on one GPU, alternating: for each round and each size, every
# trueneg variant and every PyTorch reference runs once, in the same order. Each run prints
# `RESULT size=… impl=… ms=… peak_mib=…`: the median ms per step (the program's own
# `ms_per_step=`) and the peak GPU memory the run added over the idle GPU (nvidia-smi, sampled
# every 50 ms: the same measure for both sides, allocator caches included); then
# `alloc_mib=`, the allocator's peak of the timed steps as each program prints it
# (`peak_gpu_mib=`: torch.cuda.max_memory_allocated, trueneg's the same statistic of
# LibTorch's allocator, a recorded step's pool included).
#
# Usage: scripts/gpu.sh bench TRUENEG_BIN TORCH_BENCH_PY [ROUNDS] [STEPS]
#   MODEL      bert (default; TORCH_BENCH_PY = torch_bench.py, run with --masked-head) or electra
#              (TORCH_BENCH_PY = torch_electra_bench.py: generator + discriminator, both sides
#              with Hard Correction unless HC=0)
#   SIZES      "spec small" (default): spec = 4 layers × batch 16 (DESIGN.md's bench spec),
#              small = 12 layers × batch 128 (ELECTRA-Small-sized); tiny = 2 layers × batch 4
#              (the CPU stand-in's, STANDIN=cpu: see scripts/gpu/common.sh)
#   TRUENEG    variants, default "cuda:f32 cuda:bf16" (DEVICE:PRECISION[:KERNELS[:graph]],
#              KERNELS fused (default) or composed: bench --kernels; graph: bench --cuda-graph)
#   TORCH      references, default "eager-f32 eager-bf16-fused compile-bf16-fused"; also
#              compile-f32, compile-ro-f32 and compile-ro-bf16-fused (torch.compile
#              mode="reduce-overhead": CUDA graphs)
set -uo pipefail
. "$(dirname "$0")/common.sh"
bin=$1
torch_bench=$2
rounds=${3:-1}
steps=${4:-30}
warmup=${WARMUP:-10}
sizes=${SIZES:-spec small}
trueneg_variants=${TRUENEG:-cuda:f32 cuda:bf16}
torch_variants=${TORCH:-eager-f32 eager-bf16-fused compile-bf16-fused}
python=${PYTHON:-python3}
model=${MODEL:-bert}
hc=${HC:-1}
case $model in
  bert) model_args=(); torch_model_args=(--masked-head) ;;
  electra)
    model_args=(--model electra); torch_model_args=()
    if [ "$hc" = 1 ]; then model_args+=(--hc); torch_model_args+=(--hc); fi ;;
  *) echo "unknown MODEL $model" >&2; exit 2 ;;
esac

size_args() {
  case $1 in
    spec) echo "--layers 4 --batch 16" ;;
    small) echo "--layers 12 --batch 128" ;;
    tiny) echo "--layers 2 --batch 4" ;;
    *) echo "unknown size $1" >&2; exit 2 ;;
  esac
}

torch_args() {
  case $1 in
    eager-f32) echo "" ;;
    eager-bf16) echo "--amp bf16" ;;
    eager-bf16-fused) echo "--amp bf16 --optim-impl fused" ;;
    compile-bf16-fused) echo "--amp bf16 --optim-impl fused --compile" ;;
    compile-f32) echo "--compile" ;;
    compile-ro-f32) echo "--compile --compile-mode reduce-overhead" ;;
    compile-ro-bf16-fused) echo "--amp bf16 --optim-impl fused --compile --compile-mode reduce-overhead" ;;
    *) echo "unknown torch variant $1" >&2; exit 2 ;;
  esac
}

# Runs "$@", prints its log tail, then the RESULT line.
measure() {
  local size=$1 impl=$2
  shift 2
  local log base peak ms alloc
  log=$(mktemp)
  base=$(gpu_used_mib)
  with_gpu_memory "$log.mem" "$@" >"$log" 2>&1
  local rc=$?
  peak=$(sort -n "$log.mem" | tail -1)
  ms=$(grep -o 'ms_per_step=[0-9.]*' "$log" | tail -1 | cut -d= -f2)
  alloc=$(grep -o 'peak_gpu_mib=[0-9]*' "$log" | tail -1 | cut -d= -f2)
  if [ $rc -ne 0 ] || [ -z "$ms" ]; then
    echo "FAILED size=$size impl=$impl rc=$rc"
    tail -5 "$log"
  else
    grep -E '^# ' "$log" | head -3
    echo "RESULT size=$size impl=$impl ms=$ms peak_mib=$((peak - base)) alloc_mib=${alloc:-?}"
  fi
  rm -f "$log" "$log.mem"
}

for round in $(seq 1 "$rounds"); do
  for size in $sizes; do
    for v in $trueneg_variants; do
      IFS=: read -r dev prec kernels graph <<<"$v"
      kernels=${kernels:-fused}
      graph_args=()
      # shellcheck disable=SC2206 # GRAPH_FLAG is one flag or none
      [ "${graph:-}" = graph ] && graph_args=(${GRAPH_FLAG---cuda-graph})
      measure "$size" "trueneg-$dev-$prec-$kernels${graph:+-$graph}" "$bin" --quiet bench "${model_args[@]}" \
        --device "$dev" --precision "$prec" --kernels "$kernels" $(size_args "$size") --steps "$steps" \
        --warmup "$warmup" "${graph_args[@]}"
    done
    for t in $torch_variants; do
      measure "$size" "torch-$t" "$python" "$torch_bench" --device "${TORCH_DEVICE:-cuda}" "${torch_model_args[@]}" \
        $(torch_args "$t") $(size_args "$size") --steps "$steps" --warmup "$warmup"
    done
  done
done
