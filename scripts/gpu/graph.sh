#!/usr/bin/env bash
# The GPU checks of the recorded step and of the collectives, in one call (a lent GPU's
# minutes go to measuring). Needs a `tch` build against a LibTorch with CUDA
# (scripts/build-gpu.sh) and the python3 whose PyTorch it was built against.
#   1. `bench --cuda-graph` against the unrecorded step, ELECTRA-Small-sized with Hard
#      Correction (12 layers × batch 128), f32 and bf16: the loss of every step (same seeds:
#      dropout and sampling draw the same numbers) and ms per step;
#   2. tiny BERT with SR (the GPU machines have no WordNet), dropout off, 20 steps on `libtorch-cuda`: one process without a group,
#      torchrun with a world of one (NCCL), and torchrun with two processes sharing the GPU
#      (Gloo on CUDA tensors; NCCL refuses two ranks on one GPU; `libtorch-cuda:0` overrides the
#      LOCAL_RANK choice): the curves, and tokens/s;
#   3. the cost of a world of one at the ELECTRA-Small size (the `electra-small` preset, 128 ×
#      128 tokens, Soft Regularization): one process without a group, torchrun with a world of
#      one (NCCL, the all-reduce overlapped with the backward pass), and the same with
#      TRUENEG_OVERLAP=0, alternating for ROUNDS rounds (default 3); tokens/s of steps 21–30
#      (W1_SHARDS: shards at 128 tokens to use instead of the repository's text).
#   4. `pretrain` recorded (`train.cuda_graph`) against the same fixed-shape step unrecorded
#      (`train.static_shapes`: the padded masking draws other samples than the usual step's,
#      so that is the step a recording must repeat exactly), the `electra-small` preset
#      (Soft Regularization; dropout and sampling on), CURVE_STEPS steps (default 50) with a
#      line per step, f32 and bf16: every logged value of every step, same seeds (the first 3
#      steps run unrecorded, the 4th is recorded, the rest are replays), and both runs resumed
#      from their step-20 checkpoint must repeat their own curve. (CURVE_CONFIG, CURVE_DEVICE
#      and CURVE_FLAG run the same comparison with another preset, device or key; STANDIN=cpu
#      runs it on the CPU, scripts/gpu/common.sh.)
# Parts 2 and 3 compare unrecorded steps: their one-process runs set train.cuda_graph = false
# (unset, one process on libtorch-cuda records; a world of several processes does not).
# Everything it prints is also written under OUT (default $OUT, else /tmp/gpu-graph).
#
#   scripts/gpu.sh graph BIN [PARTS]     (PARTS default "1 2 3 4")
set -uo pipefail
bin=$(realpath "$1")
parts=${2:-1 2 3 4}
out=${OUT_DIR:-${OUT:-/tmp/gpu-graph}}
cd "$(dirname "$0")/../.."
. scripts/gpu/common.sh
gpu_setup "$out"

# W1_SHARDS, or shards at 128 tokens made in folder $1 from the repository's text.
shards_128() {
  if [ -n "${W1_SHARDS:-}" ]; then
    echo "$W1_SHARDS"
    return
  fi
  cat README.md BENCHMARKS.md docs/*.md >"$1/corpus.txt"
  "$bin" --quiet prepare --input "$1/corpus.txt" --train-vocab 8000 --max-seq-len 128 --out "$1/shards" >/dev/null
  echo "$1/shards"
}

for part in $parts; do
  case $part in
    1)
      for prec in f32 bf16; do
        for mode in plain graph; do
          flag=()
          [ "$mode" = graph ] && flag=(--cuda-graph)
          "$bin" --quiet bench --model electra --hc --device libtorch-cuda --layers 12 --batch 128 \
            --precision "$prec" --steps "${STEPS:-50}" --warmup "${WARMUP:-5}" "${flag[@]}" \
            >"$out/bench-$prec-$mode.txt" 2>&1
          echo "bench $prec $mode rc=$? $(grep ms_per_step "$out/bench-$prec-$mode.txt")" | tee -a "$out/summary.txt"
        done
        python3 - "$out/bench-$prec-plain.txt" "$out/bench-$prec-graph.txt" <<'PY' | tee -a "$out/summary.txt"
import re, sys
def losses(path):
    return [float(m.group(1)) for m in re.finditer(r"loss=([-0-9.e]+)", open(path).read())]
a, b = losses(sys.argv[1]), losses(sys.argv[2])
if not a or len(a) != len(b):
    print(f"loss curves: {len(a)} vs {len(b)} steps"); sys.exit(0)
worst = max(abs(x - y) / max(1.0, abs(x)) for x, y in zip(a, b))
same = sum(x == y for x, y in zip(a, b))
print(f"{sys.argv[1].split('bench-')[1][:4]} recorded vs not: {len(a)} steps, {same} equal, largest relative difference {worst:.2e}, last {a[-1]:.6f} / {b[-1]:.6f}")
PY
      done
      ;;
    2)
      dir=$out/dist
      rm -rf "$dir" && mkdir -p "$dir"
      cat README.md BENCHMARKS.md >"$dir/corpus.txt"
      "$bin" --quiet prepare --input "$dir/corpus.txt" --train-vocab 2000 --max-seq-len 64 --out "$dir/shards" >/dev/null
      sets=(--set "data.shards=$dir/shards" --set model.kind=bert --set objective.kind=sr
        --set model.hidden_dropout_prob=0 --set model.attention_probs_dropout_prob=0
        --set data.batch_size=32 --set train.steps=20 --set train.log_every=1
        --set train.device=libtorch-cuda --set train.cuda_graph=false)
      "$bin" --quiet pretrain --config tiny --run "$dir/plain" "${sets[@]}" >"$dir/plain.log" 2>&1
      echo "plain rc=$?" | tee -a "$out/summary.txt"
      torchrun --nproc-per-node 1 --master-port 29511 --no-python "$bin" --quiet pretrain --config tiny \
        --run-dir "$dir/nccl1" "${sets[@]}" >"$dir/nccl1.log" 2>&1
      echo "nccl world 1 rc=$?" | tee -a "$out/summary.txt"
      TRUENEG_CUDA_COLLECTIVES=gloo torchrun --nproc-per-node 2 --master-port 29512 --no-python "$bin" --quiet \
        pretrain --config tiny --run-dir "$dir/gloo2" "${sets[@]}" --set train.device=libtorch-cuda:0 \
        >"$dir/gloo2.log" 2>&1
      echo "gloo 2 processes rc=$?" | tee -a "$out/summary.txt"
      tail -n 5 "$dir"/*.log >"$out/dist-logs.txt" 2>&1
      python3 - "$dir" <<'PY' | tee -a "$out/summary.txt"
import json, pathlib, sys
d = pathlib.Path(sys.argv[1])
curves = {}
for name in ("plain", "nccl1", "gloo2"):
    f = d / name / "metrics.jsonl"
    if f.exists():
        curves[name] = [json.loads(l) for l in open(f)]
ref = curves.get("plain")
for name, c in curves.items():
    worst = 0.0
    if ref and len(c) == len(ref):
        for a, b in zip(ref, c):
            for k in ("loss", "mlm_loss", "sr_loss", "grad_norm"):
                if a.get(k) is not None and b.get(k) is not None:
                    worst = max(worst, abs(a[k] - b[k]) / max(1.0, abs(a[k])))
    tps = sorted(m["tokens_per_s"] for m in c[2:])
    print(f"{name:6s} steps {len(c)} final loss {c[-1]['loss']:.6f} median tokens/s {tps[len(tps) // 2]:.0f} largest relative difference from plain {worst:.2e}")
PY
      ;;
    3)
      dir=$out/world1
      rm -rf "$dir" && mkdir -p "$dir"
      shards=$(shards_128 "$dir")
      sets=(--set "data.shards=$shards" --set model.vocab_size=0 --set objective.kind=sr
        --set "train.steps=${W1_STEPS:-30}" --set train.log_every=10 --set train.checkpoint_every=1000
        --set "train.device=${W1_DEVICE:-libtorch-cuda}" --set train.cuda_graph=false)
      for round in $(seq "${ROUNDS:-3}"); do
        "$bin" --quiet pretrain --config electra-small --run "$dir/plain-$round" "${sets[@]}" >"$dir/plain-$round.log" 2>&1
        torchrun --nproc-per-node 1 --master-port 29513 --no-python "$bin" --quiet pretrain --config electra-small \
          --run-dir "$dir/overlap-$round" "${sets[@]}" >"$dir/overlap-$round.log" 2>&1
        TRUENEG_OVERLAP=0 torchrun --nproc-per-node 1 --master-port 29514 --no-python "$bin" --quiet pretrain \
          --config electra-small --run-dir "$dir/after-$round" "${sets[@]}" >"$dir/after-$round.log" 2>&1
      done
      tail -n 3 "$dir"/*.log >"$out/world1-logs.txt" 2>&1
      python3 - "$dir" <<'PY' | tee -a "$out/summary.txt"
import json, pathlib, statistics, sys
d = pathlib.Path(sys.argv[1])
rates = {}
for name in ("plain", "overlap", "after"):
    for f in sorted(d.glob(f"{name}-*/metrics.jsonl")):
        lines = [json.loads(l) for l in open(f)]
        rates.setdefault(name, []).append(lines[-1]["tokens_per_s"] if lines else float("nan"))
base = statistics.median(rates.get("plain", [float("nan")]))
for name, r in rates.items():
    m = statistics.median(r)
    print(f"world of one, {name:7s}: tokens/s {' '.join(f'{x:.0f}' for x in r)}, median {m:.0f}, {m / base:.3f} of plain")
PY
      ;;
    4)
      dir=$out/curve
      rm -rf "$dir" && mkdir -p "$dir"
      shards=$(shards_128 "$dir")
      for prec in f32 bf16; do
        for mode in plain graph; do
          run=$dir/$prec-$mode
          "$bin" --quiet pretrain --config "${CURVE_CONFIG:-electra-small}" --run "$run" --set "data.shards=$shards" \
            --set model.vocab_size=0 --set objective.kind=sr --set "train.steps=${CURVE_STEPS:-50}" \
            --set train.log_every=1 --set train.checkpoint_every=20 --set train.keep_checkpoints=10 \
            --set "train.device=${CURVE_DEVICE:-$GPU_DEVICE}" --set "train.precision=$prec" \
            --set train.static_shapes=true --set "${CURVE_FLAG:-train.cuda_graph}=$([ $mode = graph ] && echo "${GRAPH_ON:-true}" || echo false)" \
            >"$run.log" 2>&1
          echo "curve $prec $mode rc=$?" | tee -a "$out/summary.txt"
          # Resumed from step 20: the checkpoints after it are removed, the metrics kept aside.
          cp "$run/metrics.jsonl" "$run.whole.jsonl"
          find "$run/checkpoints" -mindepth 1 -maxdepth 1 ! -name step-00000020 -exec rm -rf {} +
          "$bin" --quiet pretrain --resume "$run" >>"$run.log" 2>&1
          echo "curve $prec $mode resumed rc=$?" | tee -a "$out/summary.txt"
        done
      done
      tail -n 3 "$dir"/*.log >"$out/curve-logs.txt" 2>&1
      python3 - "$dir" <<'PY' | tee -a "$out/summary.txt"
import json, pathlib, sys
d = pathlib.Path(sys.argv[1])
def load(p):
    return [json.loads(l) for l in open(p)] if p.exists() else []
def gap(a, b):
    worst, keys = 0.0, set()
    for x, y in zip(a, b):
        for k, v in x.items():
            if k in ("tokens_per_s", "step") or not isinstance(v, (int, float)):
                continue
            w = y.get(k)
            if w is None:
                keys.add(k); continue
            worst = max(worst, abs(v - w) / max(1.0, abs(v)))
    return worst, keys
for prec in ("f32", "bf16"):
    plain, graph = load(d / f"{prec}-plain.whole.jsonl"), load(d / f"{prec}-graph.whole.jsonl")
    worst, missing = gap(plain, graph)
    same = sum(all(x.get(k) == y.get(k) for k in x if k != "tokens_per_s") for x, y in zip(plain, graph))
    print(f"RESULT curve {prec}: {len(plain)} / {len(graph)} steps, {same} identical, largest relative difference {worst:.2e}"
          + (f", missing {sorted(missing)}" if missing else ""))
    for mode in ("plain", "graph"):
        whole, resumed = load(d / f"{prec}-{mode}.whole.jsonl"), load(d / f"{prec}-{mode}" / "metrics.jsonl")
        w, _ = gap(whole, resumed)
        print(f"RESULT resume {prec} {mode}: {len(whole)} / {len(resumed)} steps, largest relative difference {w:.2e}")
PY
      ;;
  esac
done
