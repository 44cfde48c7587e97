#!/usr/bin/env bash
# Training on the GPU converges as on the CPU: the model of CONFIG (configs/tiny.yaml) trained
# for 200 steps on CORPUS with a byte-level tokenizer, once with --device cuda (BF16 products)
# and once with --device cpu (FP32), from the same initialization (the same seed: the weights are
# initialized on the host either way) and on the same windows; the final validation losses must
# agree within 2% (relative to the CPU's). Both runs go at once: the CPU run takes all cores but
# two, the GPU run's host side those two. Training windows of 128 tokens, micro-batch 8, one
# micro-batch per step, 10% of the windows held out and evaluated at the last step.
# Exit 0 pass, 77 no usable GPU (the GPU run's device check says why), 1 fail.
#
# Usage: train_convergence_cuda.sh KIPP CONFIG CORPUS WORK_DIR [--steps N] [--cpu-only] [--json FILE]
#   --steps N    steps of each run (default 200)
#   --cpu-only   only the CPU run (checks the command and the log parsing on a machine without a GPU)
#   --json FILE  also write the losses and the verdict as JSON
set -euo pipefail
readonly TOLERANCE=0.02
kipp=$1 config=$2 corpus=$3 work=$4
shift 4
steps=200 cpu_only=0 json=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --steps) steps=$2; shift 2 ;;
    --cpu-only) cpu_only=1; shift ;;
    --json) json=$2; shift 2 ;;
    *) echo "train_convergence_cuda: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
rm -rf "$work" && mkdir -p "$work/tokenizer"
"$kipp" tokenizer train --byte-level -q -o "$work/tokenizer/tokenizer.json" >/dev/null

cores=$(nproc)
cpu_threads=$((cores > 4 ? cores - 2 : cores))
common=(--config "$config" --set "tokenizer=$work/tokenizer/tokenizer.json" --set "data.train=[$corpus]"
        --set train.seq_len=128 --set train.micro_batch=8 --set train.grad_accum=1
        --set "train.max_steps=$steps" --set "train.warmup_steps=$(((steps + 9) / 10))"
        --set data.validation_fraction=0.1 --set "eval.every=$steps" --set eval.batches=16
        --set checkpoint.every=0 --set log.every=1 --plain)

# The last validation loss and the first step's training loss of a run's metrics.jsonl.
final_eval_loss() { sed -n 's/^{"type":"eval",.*"loss":\([^,}]*\).*/\1/p' "$1/metrics.jsonl" | tail -n1; }
first_step_loss() { sed -n 's/^{"type":"step","step":1,.*"loss":\([^,}]*\).*/\1/p' "$1/metrics.jsonl" | head -n1; }

gpu_pid=""
if [[ $cpu_only == 0 ]]; then
  "$kipp" train "${common[@]}" --device cuda --set train.threads=2 --set "data.cache_dir=$work/gpu-cache" \
    --set "run.dir=$work/gpu" >"$work/gpu.log" 2>&1 &
  gpu_pid=$!
fi
"$kipp" train "${common[@]}" --device cpu --set "train.threads=$cpu_threads" --set "data.cache_dir=$work/cpu-cache" \
  --set "run.dir=$work/cpu" >"$work/cpu.log" 2>&1 &
cpu_pid=$!

if [[ -n "$gpu_pid" ]] && ! wait "$gpu_pid"; then
  kill "$cpu_pid" 2>/dev/null || true
  wait "$cpu_pid" 2>/dev/null || true
  reason=$(grep -m1 "train.device: cuda, but" "$work/gpu.log" || true)
  if [[ -n "$reason" ]]; then echo "SKIPPED: ${reason#kipp: error: }"; exit 77; fi
  tail -n 20 "$work/gpu.log" >&2
  echo "FAIL: the GPU run failed" >&2
  exit 1
fi
wait "$cpu_pid" || { tail -n 20 "$work/cpu.log" >&2; echo "FAIL: the CPU run failed" >&2; exit 1; }

cpu_loss=$(final_eval_loss "$work/cpu")
[[ -n "$cpu_loss" && "$cpu_loss" != null ]] || { echo "FAIL: no final validation loss in $work/cpu/metrics.jsonl" >&2; exit 1; }
echo "cpu fp32: first step loss $(first_step_loss "$work/cpu"), final validation loss $cpu_loss after $steps steps"
if [[ $cpu_only == 1 ]]; then
  [[ -z "$json" ]] || printf '{"steps": %s, "cpu_validation_loss": %s}\n' "$steps" "$cpu_loss" >"$json"
  exit 0
fi
gpu_loss=$(final_eval_loss "$work/gpu")
[[ -n "$gpu_loss" && "$gpu_loss" != null ]] || { echo "FAIL: no final validation loss in $work/gpu/metrics.jsonl" >&2; exit 1; }
echo "gpu bf16: first step loss $(first_step_loss "$work/gpu"), final validation loss $gpu_loss after $steps steps"
read -r rel verdict < <(awk -v c="$cpu_loss" -v g="$gpu_loss" -v tol="$TOLERANCE" \
  'BEGIN { d = (g - c) / c; if (d < 0) d = -d; printf "%.6f %s\n", d, (d <= tol ? "pass" : "fail") }')
echo "relative difference $rel (at most $TOLERANCE)"
[[ -z "$json" ]] || printf '{"steps": %s, "cpu_validation_loss": %s, "gpu_validation_loss": %s, "relative_difference": %s, "tolerance": %s, "passed": %s}\n' \
  "$steps" "$cpu_loss" "$gpu_loss" "$rel" "$TOLERANCE" "$([[ $verdict == pass ]] && echo true || echo false)" >"$json"
[[ $verdict == pass ]] || { echo "FAIL: the GPU run's validation loss is off by more than 2%" >&2; exit 1; }
echo "PASS: within 2%"
