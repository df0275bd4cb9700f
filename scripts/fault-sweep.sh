#!/usr/bin/env bash
# Every command under the faults a user's machine deals out, and a table of outcomes:
#
#   kill -9     killed part-way; the same command again finishes (or refuses in one line)
#   SIGTERM     stopped part-way: exit 130 and one line saying how to go on, no lock left;
#               the same command again finishes
#   ulimit -v   600 MiB, 1.5 and 3 GiB: runs or refuses in one line, never aborts, and once it runs
#               it runs at every higher limit
#   ulimit -f   a 64 KiB file-size limit: runs, or one error line; no temporary file left
#   full disk   its output on a file system with 1 MiB free: runs, or one error line; no temporary left
#   read-only   its output on a read-only file system: one error line
#
# Usage: scripts/fault-sweep.sh [TRUENEG-BINARY]   (default: target/release/trueneg)
# The full-disk and read-only rows need root (they mount a small tmpfs); without it they say
# "skipped". Work happens in a temporary folder, removed at the end.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$(realpath "${1:-$ROOT/target/release/trueneg}")
S=$(realpath "$ROOT/../shared/data")
W=$S/wikitext-2/wiki.test.raw
G=$S/glue
WORK=$(mktemp -d)
trap 'for m in "$WORK"/mnt-*; do umount "$m" 2>/dev/null; done; rm -rf "$WORK"' EXIT
cd "$WORK" || exit 1
t() { "$BIN" --quiet "$@"; }

echo "setting up in $WORK ..." >&2
t prepare --input "$W" --train-vocab 2000 --max-seq-len 64 --out base-prep >/dev/null || exit 1
t pretrain --config tiny --set data.shards=base-prep --set train.steps=20 \
    --set train.checkpoint_every=10 --run base-run >/dev/null || exit 1
t finetune --task rte --data "$G/RTE" --model base-run --max-train-examples 32 --epochs 1 \
    --max-eval-examples 32 --out base-ft >/dev/null || exit 1
head -200 "$S/glue/SST-2/dev.tsv" > sentences.tsv

# The command line of each command, writing to $1 (a folder, or a copy of the run for the
# commands that write their reports beside it).
cmd() {
    local name=$1 out=$2
    case $name in
    prepare) echo prepare --input "$W" --train-vocab 2000 --max-seq-len 64 --out "$out" ;;
    pretrain) echo pretrain --config tiny --set data.shards="$WORK/base-prep" --set train.steps=60 \
        --set train.checkpoint_every=10 --run "$out" ;;
    finetune) echo finetune --task rte --data "$G/RTE" --model "$WORK/base-run" \
        --max-train-examples 64 --epochs 1 --seeds 1,2 --out "$out" ;;
    evaluate) echo evaluate --model "$WORK/base-ft/seed-1" --data "$G/RTE" --out "$out" ;;
    export) echo export --run "$WORK/base-run" --out "$out" ;;
    lexicon) echo lexicon build --tokenizer "$WORK/base-prep/tokenizer.json" --out "$out/lex.safetensors" ;;
    inspect) echo inspect --run "$out" --corpus "$W" --batches 4 --batch-size 16 ;;
    stats) echo stats --checkpoints "$out" --corpus "$W" --batches 4 --batch-size 16 ;;
    hits) echo hits --model "$WORK/base-run" --sentences "$WORK/sentences.tsv" --out "$out" ;;
    compare-continued) echo compare-continued --base-run "$WORK/base-run" --objective hc --steps 4 \
        --pretrain-seeds 1 --finetune-seeds 1 \
        --task-data "$S/counterfactual/sentiment/orig" \
        --contrast "$S/counterfactual/sentiment/combined/paired/dev_paired.tsv" \
        --hits-sentences "$WORK/sentences.tsv" --hits-max 20 --max-train-examples 32 --epochs 1 \
        --out "$out" ;;
    ablation) echo ablation --config tiny --set data.shards="$WORK/base-prep" --set train.steps=10 \
        --objectives baseline,hc --pretrain-seeds 1 --finetune-seeds 1 --checkpoints 1 \
        --glue "$G" --tasks rte --max-train-examples 16 --epochs 1 --stats-corpus "$W" --stats-batches 2 \
        --out "$out" ;;
    esac
}
COMMANDS="prepare pretrain finetune evaluate export lexicon inspect stats hits compare-continued ablation"

# A fresh output place for `name` under $2 (the parent folder): a copy of the run for the
# commands that write beside it, else a path that does not exist yet.
fresh() {
    local name=$1 parent=$2 out
    out=$(mktemp -d -p "$parent" "$name.XXXX")
    case $name in
    inspect | stats) rm -rf "$out" && cp -r "$WORK/base-run" "$out" && rm -f "$out/.trueneg.lock" ;;
    *) rmdir "$out" ;;
    esac
    echo "$out"
}

# The last line of stderr without the path it names, shortened.
last_line() { tail -1 "$WORK/err" | sed 's/^error: [^:]*: //' | cut -c1-60; }

# One error line: the last line of stderr starts with "error:" and only one line does.
one_line() { [ "$(grep -c '^error' "$1")" = 1 ] && ! grep -q panicked "$1"; }
temporaries() { find "$1" -name '.*.tmp*' 2>/dev/null | grep -c .; }

run_in() { # run_in OUT [prefix words...]: runs the command with OUT, stderr to $WORK/err
    local out=$1; shift
    # shellcheck disable=SC2046
    "$@" "$BIN" --quiet $(cmd "$CURRENT" "$out") > "$WORK/stdout" 2> "$WORK/err"
}

# The command that continues `$CURRENT`'s work in $1 after a stop: the same command, but for
# `pretrain`, whose stopped run continues with --resume.
continue_in() {
    local out=$1
    if [ "$CURRENT" = pretrain ]; then
        "$BIN" --quiet pretrain --resume "$out" > "$WORK/stdout" 2> "$WORK/err"
    else
        run_in "$out"
    fi
}

kill_case() { # kill_case SIGNAL: stop it 40 % through (timed on a whole run), then go on
    local sig=$1 out pid rc start took
    out=$(fresh "$CURRENT" "$WORK")
    start=$(date +%s.%N)
    run_in "$(fresh "$CURRENT" "$WORK")"
    took=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { d = (b - a) * 0.4; printf "%.2f", (d < 0.05 ? 0.05 : d) }')
    # shellcheck disable=SC2046
    "$BIN" --quiet $(cmd "$CURRENT" "$out") > "$WORK/stdout" 2> "$WORK/err" &
    pid=$!
    sleep "$took"
    kill "-$sig" "$pid" 2>/dev/null
    wait "$pid"; rc=$?
    local first="stopped at ${took}s"
    if [ "$rc" = 0 ]; then first="finished first"; fi
    if [ "$sig" = TERM ] && [ "$rc" != 0 ]; then
        [ "$rc" = 130 ] || { echo "FAIL: exit $rc on SIGTERM"; return; }
        [ "$(grep -cv '^\s*$' "$WORK/err")" -ge 1 ] || { echo "FAIL: no line on SIGTERM"; return; }
        [ ! -e "$out/.trueneg.lock" ] || { echo "FAIL: lock left"; return; }
    fi
    continue_in "$out"; rc=$?
    if [ "$rc" = 0 ]; then echo "ok ($first; continued)"
    elif one_line "$WORK/err"; then echo "ok ($first; then refused: $(last_line))"
    else echo "FAIL: continuing, exit $rc: $(last_line)"; fi
}

vsweep_case() {
    local ran="" v out rc
    for v in 600 1500 3000; do
        out=$(fresh "$CURRENT" "$WORK")
        run_in "$out" prlimit --as=$((v << 20)); rc=$?
        if [ "$rc" = 0 ]; then ran=${ran:-$v}
        elif [ "$rc" = 1 ] && one_line "$WORK/err"; then
            [ -z "$ran" ] || { echo "FAIL: refused at $v MiB after running at $ran"; return; }
        else echo "FAIL: exit $rc at $v MiB: $(last_line)"; return; fi
    done
    if [ -n "$ran" ]; then echo "ok (runs from $ran MiB)"; else echo "ok (refused up to 3 GiB)"; fi
}

fsize_case() {
    local out rc
    out=$(fresh "$CURRENT" "$WORK")
    run_in "$out" prlimit --fsize=65536; rc=$?
    local left; left=$(temporaries "$out")
    if [ "$rc" = 0 ]; then echo "ok (ran)"
    elif [ "$rc" = 1 ] && one_line "$WORK/err" && [ "$left" = 0 ]; then echo "ok (one line)"
    else echo "FAIL: exit $rc, $left temporaries: $(last_line)"; fi
}

mounted_case() { # mounted_case OPTIONS: output on a small tmpfs
    local opts=$1 mnt out rc
    if [ "$(id -u)" != 0 ]; then echo "skipped (needs root)"; return; fi
    mnt=$(mktemp -d -p "$WORK" mnt-XXXX)
    # Room for the command's own copy of the run where it writes beside one, and 1 MiB more.
    local kib=1024
    case $CURRENT in inspect | stats) kib=$(($(du -sk "$WORK/base-run" | cut -f1) + 1024)) ;; esac
    mount -t tmpfs -o size=${kib}k tmpfs "$mnt" 2>/dev/null || { echo "skipped (no tmpfs)"; return; }
    out=$(fresh "$CURRENT" "$mnt" 2>/dev/null) || out="$mnt/out"
    [ "$opts" = ro ] && mount -o remount,ro "$mnt"
    run_in "$out"; rc=$?
    local left; left=$(temporaries "$mnt")
    umount "$mnt"
    if [ "$rc" = 0 ] && [ "$opts" != ro ]; then echo "ok (fits)"
    elif [ "$rc" = 1 ] && one_line "$WORK/err" && [ "$left" = 0 ]; then echo "ok (one line)"
    else echo "FAIL: exit $rc, $left temporaries: $(last_line)"; fi
}

printf '| command | kill -9 | SIGTERM | ulimit -v | ulimit -f | full disk | read-only |\n'
printf '|---|---|---|---|---|---|---|\n'
for CURRENT in $COMMANDS; do
    echo "sweeping $CURRENT ..." >&2
    row="| $CURRENT | $(kill_case KILL) | $(kill_case TERM) | $(vsweep_case) | $(fsize_case)"
    row="$row | $(mounted_case rw) | $(mounted_case ro) |"
    echo "$row"
done
