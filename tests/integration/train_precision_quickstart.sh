#!/usr/bin/env bash
# BF16 products train as well as FP32 ones: the quickstart recipe (configs/quickstart.yaml on the
# fortune cookies), shortened to STEPS steps, run once per precision from the same start; the
# final validation losses (metrics.jsonl) must agree within 1%.
# Usage: train_precision_quickstart.sh KIPP WORK_DIR STEPS
set -euo pipefail
kipp=$1 work=$2 steps=$3
cd "$(dirname "$0")/../.."
rm -rf "$work" && mkdir -p "$work"
corpus=()
for file in /usr/share/games/fortunes/*; do
  [[ -f "$file" && ! -L "$file" && "$file" != *.dat ]] && corpus+=("$file")
done
[[ ${#corpus[@]} -gt 0 ]] || { echo "FAIL: no fortune files in /usr/share/games/fortunes" >&2; exit 1; }
list=$(IFS=,; echo "${corpus[*]}")
"$kipp" tokenizer train --input "${corpus[@]}" --vocab-size 4096 -o "$work/tokenizer.json" >/dev/null

final_loss() {  # the last validation loss a run logged
  python3 -c 'import json, sys
evals = [json.loads(l) for l in open(sys.argv[1]) if json.loads(l).get("type") == "eval"]
print(evals[-1]["loss"])' "$1/metrics.jsonl"
}
for precision in fp32 bf16; do
  "$kipp" train --config configs/quickstart.yaml --set "tokenizer=$work/tokenizer.json" --set "data.train=[$list]" \
    --set "data.cache_dir=$work/cache" --set "run.dir=$work/$precision" --set "train.max_steps=$steps" \
    --set "train.warmup_steps=$((steps / 10))" --set "eval.every=$steps" --set "checkpoint.every=0" \
    --set "eval.sample_prompts=[]" --set "train.precision=$precision" --plain >"$work/$precision.log" 2>&1 ||
    { cat "$work/$precision.log" >&2; exit 1; }
  grep -q "^precision: $precision" "$work/$precision.log" || { echo "FAIL: no precision line for $precision" >&2; exit 1; }
done
fp32=$(final_loss "$work/fp32") bf16=$(final_loss "$work/bf16")
echo "final validation loss after $steps steps: fp32 $fp32, bf16 $bf16"
awk -v a="$fp32" -v b="$bf16" 'BEGIN { d = (b - a) / a; if (d < 0) d = -d; exit !(d <= 0.01) }' ||
  { echo "FAIL: bf16's validation loss is not within 1% of fp32's" >&2; exit 1; }
echo PASS
