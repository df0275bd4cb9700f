#!/usr/bin/env bash
# Hard Correction seen acting on a CPU: the `hc-acting` preset (configs/hc-acting.toml) on the
# shared WikiText-2, then Table 8's three levels at every checkpoint with the table the run used
# and with WordNet's, and `inspect`'s examples in context at the last checkpoint with both; the
# figures, the commands, the machine and each stage's time go to results/hc-acting/.
#
# Resumable: run it again after an interruption (or Ctrl-C): the corpus is prepared once, the
# pre-training resumes from its last checkpoint, and the measurements are made again.
#
# Usage: scripts/hc-acting.sh [WORK]      (WORK: default target/hc-acting; after
#        `cargo build --release`). SETS="train.steps=40 train.checkpoint_every=20 …" adds --set
#        overrides, for a short trial; OUT (default results/hc-acting) is where the report goes;
#        BIN another binary than target/release/trueneg (a copy, while the tree is rebuilt).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$root/target/hc-acting}
out=${OUT:-$root/results/hc-acting}
bin=${BIN:-$root/target/release/trueneg}
text=$root/../shared/data/wikitext-2
mkdir -p "$work" "$out"
log=$out/stages.txt
: >"$log"
stage() { # stage NAME COMMAND…: runs it, printing and logging its time
  local name=$1 start=$SECONDS
  shift
  echo "+ $*" | sed "s|$root/||g" | tee -a "$out/commands.txt"
  "$@"
  echo "$name: $((SECONDS - start)) s" | tee -a "$log"
}
: >"$out/commands.txt"

# The held-out text: the last 300 lines of WikiText-2's raw test split; the rest of it and the
# validation split train.
if [ ! -f "$work/heldout.txt" ]; then
  n=$(wc -l <"$text/wiki.test.raw")
  head -n $((n - 300)) "$text/wiki.test.raw" >"$work/train.txt"
  tail -n 300 "$text/wiki.test.raw" >"$work/heldout.txt"
fi
[ -f "$work/data/manifest.json" ] ||
  stage prepare "$bin" prepare --quiet --input "$work/train.txt" "$text/wiki.valid.tokens" \
    --train-vocab 8000 --max-seq-len 128 --out "$work/data"
[ -f "$work/heldout/manifest.json" ] ||
  stage prepare-heldout "$bin" prepare --quiet --input "$work/heldout.txt" \
    --tokenizer "$work/data/tokenizer.json" --max-seq-len 128 --out "$work/heldout"

sets=(--set "data.shards=$work/data" --set "data.eval_shards=$work/heldout" --set train.eval_every=500)
for s in ${SETS:-}; do sets+=(--set "$s"); done
if [ -f "$work/run/config.toml" ]; then
  stage pretrain "$bin" pretrain --resume "$work/run"
else
  stage pretrain "$bin" pretrain --config hc-acting --run "$work/run" "${sets[@]}"
fi

# Table 8 at every checkpoint: with the table each checkpoint trained with, then WordNet's.
stage stats-in-use "$bin" stats --quiet --checkpoints "$work/run" --corpus "$work/heldout.txt" --force
for f in md json png; do cp "$work/run/correction-stats.$f" "$out/stats-table-in-use.$f"; done
stage stats-wordnet "$bin" stats --quiet --checkpoints "$work/run" --corpus "$work/heldout.txt" \
  --lexicon "$work/run/lexicon.safetensors" --force
for f in md json png; do cp "$work/run/correction-stats.$f" "$out/stats-wordnet.$f"; done

# Examples in context at the last checkpoint: WordNet's table, and the model's own table built
# from its embeddings by the run's rules (whether or not it passed the gate).
last=$(ls -d "$work"/run/checkpoints/step-* | tail -1)
stage self-table "$bin" lexicon build --tokenizer "$work/run/tokenizer.json" \
  --checkpoint "$last/model.safetensors" --top-k 5 --min-cosine 0.5 --out "$work/self.lex"
for lex in wordnet self; do
  table=$work/run/lexicon.safetensors
  [ "$lex" = self ] && table=$work/self.lex
  rm -f "$work"/run/inspect-step-*
  stage "inspect-$lex" "$bin" inspect --quiet --run "$work/run" --corpus "$work/heldout.txt" \
    --lexicon "$table" --force
  # The page's tables and its first 10 sampled positions: the rest quote the shared corpus at
  # length, which stays out of the results.
  awk '/^## Sample/ {s = 1} s && /^\| / && !/^\| context/ && !/^\|---/ {if (++n > 10) next} {print}
    END {print "\n(The first 10 of the sampled positions; `inspect` on the run writes them all.)"}' \
    "$work"/run/inspect-step-*.md >"$out/inspect-$lex.md"
done
cp "$work/run/config.toml" "$out/config.toml"
grep -E '"record":"synonym_refresh"|eval_mlm_accuracy' "$work/run/metrics.jsonl" >"$out/refreshes-and-evals.jsonl" || true

python3 - "$out" "$work/run/metrics.jsonl" <<'EOF'
import json, pathlib, platform, sys
out, metrics = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
lines = [json.loads(l) for l in metrics.read_text().splitlines() if l.strip()]
evals = {l["step"]: l for l in lines if "eval_mlm_accuracy" in l}
refresh = {l["step"]: l for l in lines if l.get("record") == "synonym_refresh"}
def stats(name):
    return {c["step"]: c for c in json.loads((out / f"stats-{name}.json").read_text())["checkpoints"]}
used, wordnet = stats("table-in-use"), stats("wordnet")
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.processor())
fam = [l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith(("cpu family", "model\t"))][:2]
pct = lambda x: f"{100 * x:.2f} %"
rows = ["| step | held-out MLM accuracy | table in use (precision vs WordNet, used) | prediction level | iteration level | batch level | WordNet: prediction | iteration | batch |",
        "|---:|---:|---|---:|---:|---:|---:|---:|---:|"]
for step in sorted(used):
    e, r, u, w = evals.get(step, {}), refresh.get(step), used[step], wordnet.get(step, {})
    table = "WordNet (initial)"
    if r:
        p = r.get("precision")
        table = f"self {pct(p) if p is not None else '—'}, {'used' if r.get('accepted') else 'not used'}"
    acc = e.get("eval_mlm_accuracy")
    rows.append(f"| {step} | {pct(acc) if acc is not None else '—'} | {table} | {pct(u['prediction_level'])} | {pct(u['iteration_level'])} | {pct(u['batch_level'])} | "
                f"{pct(w.get('prediction_level', 0))} | {pct(w.get('iteration_level', 0))} | {pct(w.get('batch_level', 0))} |")
stages = (out / "stages.txt").read_text().strip().replace("\n", "; ")
import os
sets = os.environ.get("SETS", "").split()
overrides = f", with {', '.join('`' + x + '`' for x in sets)}" if sets else ""
commands = (out / "commands.txt").read_text()
(out / "README.md").write_text(f"""# Hard Correction seen acting on a CPU

Made by `scripts/hc-acting.sh`: the `hc-acting` preset (configs/hc-acting.toml; the run's own
record of every setting is `config.toml` here){overrides}.
Machine: {cpu} (family/model {', '.join(fam)}), {platform.machine()}; stage times: {stages}.

Held-out text: the last 300 lines of WikiText-2's raw test split; training: the rest of it and
the validation split. Each row is a checkpoint. The levels are Table 8's (docs/pretraining.md):
prediction level = corrected / mismatched predictions; iteration level = sequences with a
correction; batch level = batches of 32 with one. "Table in use" is what the run's Hard
Correction used from that step on: the model's own table when it passed the quality gate
(`hc_self_min_precision`), else the table before it.

{chr(10).join(rows)}

Examples in context at the last checkpoint: `inspect-wordnet.md` (WordNet's table) and
`inspect-self.md` (the model's own table, built by the run's rules from its embeddings).

Commands:

```
{commands}```
""")
print((out / "README.md").read_text())
EOF
