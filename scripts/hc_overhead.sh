#!/usr/bin/env bash
# What Hard Correction's self table and its samples of corrections cost a run, on this machine:
# for each preset, runs of the same steps alternate between the fixed WordNet table, the self
# table rebuilt every REFRESH steps, and samples shown at every logged line; each round runs the
# three in turn. Prints the wall time of each run, the refreshes' own time (their records'
# `seconds`), and what both cost at the defaults (a refresh every 1000 steps, a sample every
# 10 logged lines).
#
#   scripts/hc_overhead.sh target/release/trueneg /tmp/hc-overhead [tiny electra-small]
#
# ROUNDS (2), STEPS (12), LOG (4: steps between logged lines, so a sample every LOG steps),
# REFRESH (4), VOCAB (30522: the vocabulary trained on WikiText-2's test split, up to this).
set -euo pipefail
BIN=${1:?usage: hc_overhead.sh BIN OUT [PRESET...]}
OUT=${2:?usage: hc_overhead.sh BIN OUT [PRESET...]}
shift 2
PRESETS=${*:-tiny electra-small}
ROUNDS=${ROUNDS:-2}
STEPS=${STEPS:-12}
LOG=${LOG:-4}
REFRESH=${REFRESH:-4}
VOCAB=${VOCAB:-30522}
HERE=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$OUT"
SHARDS=$OUT/wiki128
if [ ! -d "$SHARDS" ]; then
    "$BIN" prepare --input "$HERE/../shared/data/wikitext-2/wiki.test.raw" \
        --train-vocab "$VOCAB" --max-seq-len 128 --out "$SHARDS" >/dev/null
fi

variant_sets() {
    case $1 in
    table) echo "objective.hc_samples_every=0" ;;
    refresh) echo "objective.hc_source=self objective.hc_refresh_every=$REFRESH objective.hc_samples_every=0" ;;
    samples) echo "objective.hc_samples_every=1" ;;
    esac
}

# One run; prints its wall seconds.
run() {
    local preset=$1 variant=$2 dir=$3
    rm -rf "$dir"
    local sets=(--set "data.shards=$SHARDS" --set model.vocab_size=0 --set data.max_seq_len=128
        --set model.max_position_embeddings=512 --set "train.steps=$STEPS"
        --set "train.log_every=$LOG" --set train.checkpoint_every=1000000
        --set optimizer.warmup_steps=2 --set objective.kind=hc)
    for s in $(variant_sets "$variant"); do sets+=(--set "$s"); done
    local t0 t1
    t0=$(date +%s.%N)
    "$BIN" pretrain --config "$preset" --run "$dir" "${sets[@]}" >/dev/null 2>&1
    t1=$(date +%s.%N)
    echo "$t1 - $t0" | bc -l
}

echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | xargs) model $(grep -m1 '^model' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) threads"
echo "vocabulary: $(python3 -c "import json;print(json.load(open('$SHARDS/manifest.json'))['vocab_size'])")"
for preset in $PRESETS; do
    declare -A total=([table]=0 [refresh]=0 [samples]=0)
    for round in $(seq "$ROUNDS"); do
        for variant in table refresh samples; do
            s=$(run "$preset" "$variant" "$OUT/$preset-$variant")
            total[$variant]=$(echo "${total[$variant]} + $s" | bc -l)
            printf '%s round %s %-8s %8.2f s\n' "$preset" "$round" "$variant" "$s"
        done
    done
    python3 - "$OUT/$preset" "$preset" "$STEPS" "$LOG" "$ROUNDS" \
        "${total[table]}" "${total[refresh]}" "${total[samples]}" <<'EOF'
import json, sys, tomllib
base, preset, steps, log, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
table, refresh, samples = (float(x) / rounds for x in sys.argv[6:9])
lines = [json.loads(l) for l in open(f"{base}-refresh/metrics.jsonl")]
refreshes = [l for l in lines if l.get("record") == "synonym_refresh"]
own = sum(r["seconds"] for r in refreshes) / max(len(refreshes), 1)
# The step's time from the fixed-table run's throughput (start-up left out).
cfg = tomllib.load(open(f"{base}-table/config.toml", "rb"))
tokens = cfg["data"]["batch_size"] * cfg["data"]["max_seq_len"]
rates = [json.loads(l)["tokens_per_s"] for l in open(f"{base}-table/metrics.jsonl") if '"record"' not in l]
step = tokens / (sum(rates) / len(rates))
per_sample = (samples - table) / (steps // log)
per_refresh = (refresh - table) / max(len(refreshes), 1)
print(f"{preset}: step {step:.3f} s; refresh {own:.3f} s own, {per_refresh:.3f} s by wall; "
      f"sample {per_sample:.3f} s by wall (wall differences within run-to-run noise where negative)")
print(f"{preset}: at the defaults, refreshes add {100 * own / (1000 * step):.3f} % "
      f"(every 1000 steps), samples {100 * per_sample / (10 * 10 * step):.3f} % "
      f"(every 10 lines of train.log_every = 10)")
EOF
done
