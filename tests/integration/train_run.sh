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
  --set checkpoint.every=15 --set 'eval.sample_prompts=["The"]' --set eval.sample_tokens=8 2>&1 | tee "$run.log"

first=$(grep -m1 '^step [0-9]*/' "$run.log" | grep -o 'loss [0-9.]*' | awk '{print $2}')
final=$(grep 'eval step 40: val loss' "$run.log" | awk '{print $6}' | tr -d ,)
echo "first training loss $first, final validation loss $final"
awk -v a="$first" -v b="$final" 'BEGIN { exit !(a > 10 && b < a - 3) }' ||
  { echo "FAIL: the loss did not fall enough ($first -> $final)" >&2; exit 1; }
best_step=$(grep '^eval step [0-9]*: val loss' "$run.log" | sort -g -k6 | head -1 | awk '{print $3}' | tr -d :)
[[ "$(readlink -f "$run/best")" == */step-$(printf %08d "$best_step") ]] ||
  { echo "FAIL: best is $(readlink -f "$run/best"), the lowest validation loss was at step $best_step" >&2; exit 1; }
for step in $(grep '^eval step [0-9]*: val loss.*(best)' "$run.log" | awk '{print $3}' | tr -d :); do
  grep -q "^step $step: checkpoint saved to .*best so far" "$run.log" ||
    { echo "FAIL: the new best validation loss at step $step was not saved at once" >&2; exit 1; }
done
grep -q "finished after 40 steps" "$run.log" || { echo "FAIL: no completion line" >&2; exit 1; }
grep -q "^unigram baseline: validation loss [0-9]" "$run.log" || { echo "FAIL: no unigram baseline" >&2; exit 1; }
grep -q "^final validation loss [0-9.]* vs unigram baseline [0-9.]*" "$run.log" ||
  { echo "FAIL: no final comparison with the unigram baseline" >&2; exit 1; }
[[ $(grep -c '^sample step [0-9]*: "The"' "$run.log") -eq 4 ]] ||
  { echo "FAIL: expected a sample at each of the 4 evaluations" >&2; exit 1; }
# Logs: every step line and evaluation in metrics.jsonl, the TensorBoard files agree with it
# (checked by an independent reader of the record format), and the loss curve exists.
[[ $(grep -c '"type":"step"' "$run/metrics.jsonl") -eq 20 && $(grep -c '"type":"eval"' "$run/metrics.jsonl") -eq 4 ]] ||
  { echo "FAIL: metrics.jsonl does not hold 20 step and 4 eval records" >&2; exit 1; }
/usr/bin/python3 "$(dirname "$0")/../../tools/tfevents_reader.py" --compare-jsonl "$run/metrics.jsonl" ||
  { echo "FAIL: the TensorBoard event files disagree with metrics.jsonl" >&2; exit 1; }
grep -q "<polyline" "$run/loss.svg" || { echo "FAIL: no loss curve in $run/loss.svg" >&2; exit 1; }
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
