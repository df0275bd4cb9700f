#!/usr/bin/env bash
# On a machine with NVIDIA GPUs and a `--features cuda` build: the same tiny BERT run (dropout
# off, nothing drawn at random per replica) three ways, whose logged curves must agree to f32
# rounding:
#   plain  train.device = "cuda"          one device, no collectives
#   ddp1   --devices cuda:0               burn's distributed data parallel, NCCL, world size 1
#   ddpN   --devices cuda:0,...,cuda:N-1  every GPU the machine has (skipped with one)
# and prints tokens/s of each. NCCL must be loadable as libnccl.so (docs/gpu.md, "Several GPUs").
#
#   scripts/gpu-ddp-check.sh [BIN] [OUT]
set -euo pipefail
BIN=${1:-target/cuda/release/trueneg}
OUT=${2:-/tmp/trueneg-ddp-check}
rm -rf "$OUT" && mkdir -p "$OUT"
# A small corpus that travels with the repository: its own documentation.
cat README.md BENCHMARKS.md > "$OUT/corpus.txt"
"$BIN" --quiet prepare --input "$OUT/corpus.txt" --train-vocab 2000 --max-seq-len 64 --out "$OUT/shards"
SETS=(--set "data.shards=$OUT/shards" --set model.kind=bert --set objective.kind=hc+sr
  --set model.hidden_dropout_prob=0 --set model.attention_probs_dropout_prob=0
  --set data.batch_size=32 --set train.steps=20 --set train.log_every=1)
"$BIN" --quiet pretrain --config tiny --run "$OUT/plain" "${SETS[@]}" --set train.device=cuda
"$BIN" --quiet pretrain --config tiny --run "$OUT/ddp1" "${SETS[@]}" --devices cuda:0
N=$(nvidia-smi -L | wc -l)
if [ "$N" -gt 1 ]; then
  DEVICES=$(seq -s, 0 $((N - 1)) | sed 's/\([0-9]\+\)/cuda:\1/g')
  "$BIN" --quiet pretrain --config tiny --run "$OUT/ddp$N" "${SETS[@]}" --devices "$DEVICES"
fi
python3 - "$OUT" <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
runs = sorted(p for p in out.iterdir() if (p / "metrics.jsonl").exists())
curves = {p.name: [json.loads(l) for l in open(p / "metrics.jsonl")] for p in runs}
ref = curves["plain"]
worst = 0.0
for name, c in curves.items():
    assert len(c) == len(ref), name
    for a, b in zip(ref, c):
        for k in ("loss", "mlm_loss", "sr_loss", "sr_sent_loss", "grad_norm"):
            if a.get(k) is not None:
                worst = max(worst, abs(a[k] - b[k]) / max(1.0, abs(a[k])))
        assert (a["masked"], a["mismatched"]) == (b["masked"], b["mismatched"]), name
    tps = sorted(m["tokens_per_s"] for m in c[2:])
    print(f"{name:6s} final loss {c[-1]['loss']:.6f}  median tokens/s {tps[len(tps) // 2]:.0f}")
print(f"largest relative difference from plain: {worst:.2e}")
sys.exit(0 if worst < 1e-4 else 1)
PY
