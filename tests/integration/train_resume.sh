#!/usr/bin/env bash
# Resume is exact: a run stopped at step 6 (--until-step) and resumed, a run stopped by SIGTERM
# (which saves), and a run killed with SIGKILL in the middle of writing checkpoints and resumed
# each time, all end with weights and optimizer state bitwise equal to an
# uninterrupted run.
# Usage: train_resume.sh KIPP CONFIG TOKENIZER_JSON CORPUS WORK_DIR [--set KEY=VALUE ...]
# (the extra overrides apply to every run, e.g. --set train.precision=bf16 or train.device=cuda).
# Exit 0 pass, 77 when the runs ask for a GPU that is not usable here, 1 fail.
set -euo pipefail
kipp=$1 config=$2 tokenizer=$3 corpus=$4 work=$5
shift 5
rm -rf "$work" && mkdir -p "$work"
# Most windows held out for validation, so the 12 steps cross an epoch boundary (a new shuffle):
# the corpus (tests/train/corpus.md, about 30K tokens) leaves 5% of its windows, 48 of them.
common=(--set "tokenizer=$tokenizer" --set "data.train=[$corpus]" --set train.max_steps=12
        --set data.validation_fraction=0.95 "$@")

final_files() {  # the weights and optimizer state a run ends with
  local dir
  dir=$(readlink -f "$1/latest")
  [[ "$(basename "$dir")" == step-00000012 ]] || { echo "FAIL: $1/latest is $dir, not step 12" >&2; exit 1; }
  echo "$dir/model.safetensors" "$dir/optimizer.safetensors"
}
state_without_time() { grep -v elapsed_seconds "$(dirname "$1")/trainer_state.json"; }
same() {  # same RUN_A RUN_B
  read -r ma oa < <(final_files "$1")
  read -r mb ob < <(final_files "$2")
  cmp "$ma" "$mb" && cmp "$oa" "$ob" || { echo "FAIL: $2 differs from $1" >&2; exit 1; }
  diff <(state_without_time "$ma") <(state_without_time "$mb") ||
    { echo "FAIL: $2's trainer_state.json differs from $1's" >&2; exit 1; }
  echo "bitwise equal: $2 and $1"
}

# A run asked for a GPU it cannot use (train.device cuda, no usable GPU) is SKIPPED (77).
if ! "$kipp" train --config "$config" "${common[@]}" --set "run.dir=$work/straight" >"$work/straight.log" 2>"$work/straight.err"; then
  reason=$(grep -m1 "train.device: cuda, but" "$work/straight.err" || true)
  [[ -z "$reason" ]] || { echo "SKIPPED: ${reason#kipp: error: }"; exit 77; }
  cat "$work/straight.err" >&2
  exit 1
fi
grep -q '"epoch": 1' "$work/straight/latest/trainer_state.json" ||
  { echo "FAIL: the run did not reach a second epoch" >&2; exit 1; }

"$kipp" train --config "$config" "${common[@]}" --set "run.dir=$work/stopped" --until-step 6 >"$work/stopped.log"
grep -q "stopped after 6 steps" "$work/stopped.log" || { echo "FAIL: --until-step 6 did not stop at 6" >&2; exit 1; }
"$kipp" train --resume "$work/stopped" >"$work/resumed.log" 2>&1
grep -q "resumed from .* at step 6" "$work/resumed.log" || { echo "FAIL: resume did not start at step 6" >&2; exit 1; }
same "$work/straight" "$work/stopped"

# SIGTERM (as Ctrl-C's SIGINT) saves a checkpoint at the current step and exits 0; resuming
# from it continues the same run.
termed="$work/termed"
"$kipp" train --config "$config" "${common[@]}" --set "run.dir=$termed" >"$work/termed.log" 2>&1 &
pid=$!
for _ in $(seq 600); do
  grep -q "^step 2/12" "$work/termed.log" 2>/dev/null && break
  sleep 0.05
done
kill -TERM "$pid"
wait "$pid" || { echo "FAIL: SIGTERM gave exit status $?" >&2; cat "$work/termed.log" >&2; exit 1; }
stopped=$(grep -oE "^stopped after [0-9]+ steps" "$work/termed.log" | awk '{print $3}') ||
  { echo "FAIL: no 'stopped' line after SIGTERM" >&2; exit 1; }
[[ "$(readlink -f "$termed/latest")" == */step-$(printf %08d "$stopped") ]] ||
  { echo "FAIL: SIGTERM at step $stopped did not save that step" >&2; exit 1; }
echo "SIGTERM: stopped and saved at step $stopped"
"$kipp" train --resume "$termed" >"$work/termed-resumed.log"
same "$work/straight" "$termed"

# Checkpoint every step and SIGKILL the run the moment a save's temporary folder appears, i.e.
# in the middle of writing a checkpoint; then resume. Every resume must find `latest` complete.
killed="$work/killed"
"$kipp" train --config "$config" "${common[@]}" --set "run.dir=$killed" --set checkpoint.every=1 \
  --until-step 1 >"$work/killed-0.log"
caught=0
for round in 1 2 3 4; do
  "$kipp" train --resume "$killed" --set checkpoint.every=1 >"$work/killed-$round.log" 2>&1 &
  pid=$!
  partial=""
  for _ in $(seq 3000); do
    partial=$(compgen -G "$killed/checkpoints/.step-*.tmp-$pid" | head -1) && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.01
  done
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  if [[ -n "$partial" && -e "$partial" ]]; then
    caught=$((caught + 1))
    echo "round $round: killed during a save ($(basename "$partial") left behind); latest is $(basename "$(readlink -f "$killed/latest")")"
  else
    echo "round $round: the kill missed the save; latest is $(basename "$(readlink -f "$killed/latest")")"
  fi
done
[[ $caught -ge 2 ]] || { echo "FAIL: only $caught of 4 kills landed inside a save" >&2; exit 1; }
"$kipp" train --resume "$killed" --set checkpoint.every=1 >>"$work/killed.log"
same "$work/straight" "$killed"
