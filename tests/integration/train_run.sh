#!/usr/bin/env bash
# A fresh `kipp train` run on the tiny test config: the loss falls well below its start
# (ln(vocab) ~ 11.9 for a random init), validation runs, `latest` and `best` name complete
# checkpoints (`best` the step with the lowest validation loss, even when that step is not one
# of the regular checkpoints), and a run folder that already holds a run is refused without --resume.
# Usage: train_run.sh KIPP CONFIG TOKENIZER_JSON CORPUS RUN_DIR
set -euo pipefail
kipp=$1 config=$2 tokenizer=$3 corpus=$4 run=$5
rm -rf "$run"
sets=(--set "tokenizer=$tokenizer" --set "data.train=[$corpus]" --set "run.dir=$run")
"$kipp" train --config "$config" "${sets[@]}" --set train.max_steps=40 --set eval.every=10 \
  --set checkpoint.every=15 | tee "$run.log"

first=$(grep -m1 -o 'loss [0-9.]*' "$run.log" | awk '{print $2}')
final=$(grep 'step 40: validation loss' "$run.log" | awk '{print $5}' | tr -d ,)
echo "first training loss $first, final validation loss $final"
awk -v a="$first" -v b="$final" 'BEGIN { exit !(a > 10 && b < a - 3) }' ||
  { echo "FAIL: the loss did not fall enough ($first -> $final)" >&2; exit 1; }
best_step=$(grep '^step [0-9]*: validation loss' "$run.log" | sort -g -k5 | head -1 | awk '{print $2}' | tr -d :)
[[ "$(readlink -f "$run/best")" == */step-$(printf %08d "$best_step") ]] ||
  { echo "FAIL: best is $(readlink -f "$run/best"), the lowest validation loss was at step $best_step" >&2; exit 1; }
for step in $(grep '^step [0-9]*: validation loss.*(best)' "$run.log" | awk '{print $2}' | tr -d :); do
  grep -q "^step $step: checkpoint saved to .*best so far" "$run.log" ||
    { echo "FAIL: the new best validation loss at step $step was not saved at once" >&2; exit 1; }
done
grep -q "finished after 40 steps" "$run.log" || { echo "FAIL: no completion line" >&2; exit 1; }
for link in latest best; do
  for file in config.json model.safetensors tokenizer.json optimizer.safetensors trainer_state.json; do
    [[ -f "$run/$link/$file" ]] || { echo "FAIL: $run/$link/$file is missing" >&2; exit 1; }
  done
done

if "$kipp" train --config "$config" "${sets[@]}" 2>"$run.refused"; then
  echo "FAIL: a second run into the same folder was accepted" >&2; exit 1
fi
grep -q "already holds a run; continue it with --resume" "$run.refused" ||
  { echo "FAIL: unclear refusal: $(cat "$run.refused")" >&2; exit 1; }
echo "PASS"
