#!/usr/bin/env bash
# Kills `pretrain` and `prepare` with SIGKILL at random moments, continues them each time as a
# user would (`pretrain --resume`, the same `prepare` again), and checks that what each ends
# with is byte-identical to an uninterrupted run: the last checkpoint's weights and optimizer
# state; the shards, manifest and tokenizer. Episodes (a fresh folder, killed until it
# finishes) repeat until each command has been killed KILLS times.
#
#   scripts/kill-resume.sh [KILLS per command, default 20]
#
# BIN names the binary (default target/release/trueneg). Exits non-zero on the first difference.
set -euo pipefail
kills=${1:-20}
bin=$(realpath "${BIN:-target/release/trueneg}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

now() { date +%s.%N; }
# A random delay from 0.05 s to $1 s.
delay() { awk -v m="$1" -v r="$RANDOM" 'BEGIN { printf "%.2f", 0.05 + (m - 0.05) * r / 32767 }'; }
same() { cmp -s "$1" "$2" || { echo "DIFFERENT: $1 $2"; exit 1; }; }

# Runs "$@" in the background and kills it after a random delay up to $1 s; 0 when it
# finished first (and succeeded), 1 when it was killed.
killed_run() {
  local max=$1; shift
  "$@" >/dev/null 2>&1 &
  local pid=$!
  sleep "$(delay "$max")"
  if kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null; then
    wait "$pid" 2>/dev/null || true
    return 1
  fi
  wait "$pid"
}

# Episodes of the command `$1` (a function printing the command line for folder $2) until
# `kills` kills; `$3` compares a finished folder with the reference.
episodes() {
  local make=$1 compare=$2 seconds=$3 total=0 episode=0
  while [ "$total" -lt "$kills" ]; do
    episode=$((episode + 1))
    local dir="$work/episode-$episode"
    while true; do
      mapfile -t cmd < <("$make" "$dir")
      if killed_run "$seconds" "${cmd[@]}"; then break; fi
      total=$((total + 1))
    done
    "$compare" "$dir"
    rm -rf "$dir"
  done
  echo "$total kills in $episode episodes"
}

pretrain_cmd() {
  if [ -f "$1/config.toml" ]; then
    printf '%s\n' "$bin" --quiet pretrain --resume "$1"
  else
    printf '%s\n' "$bin" --quiet pretrain --config tiny --run "$1" \
      --set train.steps=60 --set train.checkpoint_every=5
  fi
}
pretrain_same() {
  local last=checkpoints/step-00000060
  same "$work/ref/$last/model.safetensors" "$1/$last/model.safetensors"
  same "$work/ref/$last/optimizer.safetensors" "$1/$last/optimizer.safetensors"
}
start=$(now)
mapfile -t ref < <(pretrain_cmd "$work/ref")
"${ref[@]}" >/dev/null
t=$(awk -v a="$start" -v b="$(now)" 'BEGIN { print b - a }')
echo "pretrain: reference in ${t} s; $(episodes pretrain_cmd pretrain_same "$t"), the last checkpoint byte-identical each time"

shared=$(dirname "$(realpath "$0")")/../../shared/data/wikitext-2
for i in 1 2 3 4 5 6; do cat "$shared/wiki.valid.tokens" "$shared/wiki.test.raw"; done > "$work/corpus.txt"
prepare_cmd() {
  printf '%s\n' "$bin" --quiet prepare --input "$work/corpus.txt" --train-vocab 2000 \
    --max-seq-len 64 --examples-per-shard 512 --out "$1"
}
prepare_same() { for f in "$work/pref"/*; do same "$f" "$1/$(basename "$f")"; done; }
start=$(now)
mapfile -t ref < <(prepare_cmd "$work/pref")
"${ref[@]}" >/dev/null
t=$(awk -v a="$start" -v b="$(now)" 'BEGIN { print b - a }')
echo "prepare: reference in ${t} s; $(episodes prepare_cmd prepare_same "$t"), every file byte-identical each time"
