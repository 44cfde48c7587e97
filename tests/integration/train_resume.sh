#!/usr/bin/env bash
# Resume is exact: a run stopped at step 6 (--until-step) and resumed, and a run killed with
# SIGKILL at arbitrary moments (checkpointing every step, so most kills land in a save) and
# resumed each time, both end with weights and optimizer state bitwise equal to an
# uninterrupted run.
# Usage: train_resume.sh KIPP CONFIG TOKENIZER_JSON CORPUS WORK_DIR
set -euo pipefail
kipp=$1 config=$2 tokenizer=$3 corpus=$4 work=$5
rm -rf "$work" && mkdir -p "$work"
common=(--set "tokenizer=$tokenizer" --set "data.train=[$corpus]" --set train.max_steps=12)

final_files() {  # the weights and optimizer state a run ends with
  local dir
  dir=$(readlink -f "$1/latest")
  [[ "$(basename "$dir")" == step-00000012 ]] || { echo "FAIL: $1/latest is $dir, not step 12" >&2; exit 1; }
  echo "$dir/model.safetensors" "$dir/optimizer.safetensors"
}
same() {  # same RUN_A RUN_B
  read -r ma oa < <(final_files "$1")
  read -r mb ob < <(final_files "$2")
  cmp "$ma" "$mb" && cmp "$oa" "$ob" || { echo "FAIL: $2 differs from $1" >&2; exit 1; }
  echo "bitwise equal: $2 and $1"
}

"$kipp" train --config "$config" "${common[@]}" --set "run.dir=$work/straight" >"$work/straight.log"

"$kipp" train --config "$config" "${common[@]}" --set "run.dir=$work/stopped" --until-step 6 >"$work/stopped.log"
grep -q "stopped after 6 steps" "$work/stopped.log" || { echo "FAIL: --until-step 6 did not stop at 6" >&2; exit 1; }
"$kipp" train --resume "$work/stopped" >"$work/resumed.log"
grep -q "resumed from .* at step 6" "$work/resumed.log" || { echo "FAIL: resume did not start at step 6" >&2; exit 1; }
same "$work/straight" "$work/stopped"

# Checkpoint every step; SIGKILL after growing delays, resuming (or starting) each time.
killed="$work/killed"
"$kipp" train --config "$config" "${common[@]}" --set "run.dir=$killed" --set checkpoint.every=1 \
  --until-step 1 >"$work/killed-0.log"
for delay in 0.3 0.5 0.7 0.9 1.1 1.3; do
  "$kipp" train --resume "$killed" --set checkpoint.every=1 >>"$work/killed.log" 2>&1 &
  pid=$!
  sleep "$delay"
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  step=$(basename "$(readlink -f "$killed/latest")")
  echo "killed after ${delay}s; latest is $step"
done
"$kipp" train --resume "$killed" --set checkpoint.every=1 >>"$work/killed.log"
same "$work/straight" "$killed"
