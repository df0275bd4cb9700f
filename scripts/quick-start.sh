#!/usr/bin/env bash
# Runs the README's quick start as it is written (the indented lines under "## Quick start"),
# in a fresh folder under target/ whose `../shared` is the project's, then checks what a new
# user would: the fine-tuned model's dev score beats the majority class by at least MARGIN
# points (default 10), the console showed both numbers, and the exported folder answered in
# transformers. The `python3` line runs with $TRUENEG_PYTHON when it is set (CI's venv), and
# is skipped, saying so, when that Python lacks transformers.
#
# Usage: scripts/quick-start.sh   (after `cargo build --release`)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
margin=${MARGIN:-10}
python=${TRUENEG_PYTHON:-python3}
base=$root/target/quick-start
rm -rf "$base"
mkdir -p "$base/run"
ln -s "$(cd "$root/../shared" && pwd)" "$base/shared"
export PATH=$root/target/release:$PATH

mapfile -t lines < <(awk '/^## Quick start/ {on = 1; next} /^## / {on = 0} on && /^    [^ ]/ {sub(/^    /, ""); print}' "$root/README.md")
[ ${#lines[@]} -ge 4 ] || { echo "quick-start: README.md: no quick start block found" >&2; exit 1; }

cd "$base/run"
for line in "${lines[@]}"; do
  echo "+ $line"
  start=$SECONDS
  case $line in
    python3\ *)
      if ! "$python" -c 'import transformers' 2>/dev/null; then
        echo "quick-start: $python has no transformers; the pipeline line is skipped" >&2
        continue
      fi
      eval "\"\$python\" ${line#python3 }" 2>&1 | tee -a console.log | tail -3
      ;;
    *) eval "$line" 2>&1 | tee -a console.log | grep -v '^\s*$' | tail -4 ;;
  esac
  echo "  ($((SECONDS - start)) s)"
done

results=$(find "$base/run" -name results.json -path '*ft*' | head -1)
[ -n "$results" ] || { echo "quick-start: no results.json under ft/" >&2; exit 1; }
python3 - "$results" "$margin" "$base/run/console.log" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
margin = float(sys.argv[2])
console = open(sys.argv[3]).read()
score, base = r["score"]["mean"], r["baselines"]["majority"]
print(f"quick-start: {r['task']} dev {score:.2f} against the majority class's {base:.2f} (margin wanted: {margin})")
if "majority class" not in console:
    sys.exit("quick-start: the console did not show the majority-class baseline")
if score < base + margin:
    sys.exit(f"quick-start: {score:.2f} does not beat the majority class {base:.2f} by {margin} points")
EOF
