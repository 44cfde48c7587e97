#!/usr/bin/env bash
# Data-parallel training under `mpirun -np 2` (one thread per rank) against one process, on the
# CTest tiny config. Gates (GATE picks one):
#   equivalence: 2 ranks x micro-batch B with grad_accum 1 = 1 process x micro-batch B with
#                grad_accum 2 over 50 steps (same windows, same dropout keys): every step's loss
#                and the validation losses within a relative FP32 summation-order tolerance, the
#                same data position; rank 1 prints nothing. Then the same for LoRA with adapter
#                dropout on the tiny HF base (6 steps): same dropout masks, rank 0 writes adapter/.
#   resume:      a 2-rank run stopped with --until-step and resumed on 2 ranks is bitwise the
#                uninterrupted 2-rank run; its checkpoint resumed on 1 process (grad_accum 2), and
#                a 1-process checkpoint resumed on 2 ranks, continue at the same data position
#                with the same losses within the tolerance.
#   failure:     a rank whose flags differ from rank 0's stops every rank with its error, naming
#                the rank; rank 1 killed in the middle of a run stops rank 0 too, mpirun names
#                the rank, and the last checkpoint resumes to the end of the run.
# Usage: train_mpi.sh GATE KIPP CONFIG TOKENIZER_JSON CORPUS WORK_DIR
set -euo pipefail
gate=$1 kipp=$2 config=$3 tokenizer=$4 corpus=$5 work=$6
command -v mpirun >/dev/null || { echo "SKIPPED: no mpirun on PATH"; exit 77; }
work="$work/$gate"
rm -rf "$work" && mkdir -p "$work"
common=(--set "tokenizer=$tokenizer" --set "data.train=[$corpus]" --set train.threads=1 --set log.every=1
        --set checkpoint.every=0 --set checkpoint.keep_last=1 --plain)
two=(mpirun --oversubscribe -np 2 --tag-output)
# The two sides sum the same products in a different order: one process adds micro-batch 1's
# gradient into micro-batch 0's inside each GEMM, two ranks add two finished gradients, and the
# FP32 rounding differences grow slowly over the steps (docs/SCALING.md has the measured drift).
# 1e-5 relative stays well above that and well below what a wrong window, dropout key or
# normalization does to the loss.
tolerance=1e-5

fail() { echo "FAIL: $*" >&2; exit 1; }

# losses_match RUN_A RUN_B FROM_STEP: "step" and "eval" losses of both run logs, from FROM_STEP on,
# equal within the tolerance (exactly with tolerance 0).
losses_match() {
  python3 - "$1/metrics.jsonl" "$2/metrics.jsonl" "$3" "${4:-$tolerance}" <<'PY'
import json, sys
def losses(path, first):
    out = {}
    for line in open(path):
        r = json.loads(line)
        if r["type"] in ("step", "eval") and r["step"] >= first:
            out[(r["type"], r["step"])] = r["loss"]
    return out
a, b = losses(sys.argv[1], int(sys.argv[3])), losses(sys.argv[2], int(sys.argv[3]))
tol = float(sys.argv[4])
if a.keys() != b.keys():
    sys.exit(f"FAIL: the logs hold different steps: {sorted(a.keys() ^ b.keys())[:5]}")
worst = max((abs(a[k] - b[k]) / abs(a[k]), k) for k in a)
print(f"{len(a)} losses from step {sys.argv[3]}: largest relative difference {worst[0]:.2e} at {worst[1]}")
if worst[0] > tol:
    sys.exit(f"FAIL: {worst[1]}: {a[worst[1]]!r} vs {b[worst[1]]!r}, beyond {tol}")
PY
}

# same_position RUN_A RUN_B: the data position and token count of both runs' latest checkpoints.
same_position() {
  local keys='"(step|epoch|data_cursor|tokens_seen)"'
  diff <(grep -E "$keys" "$1/latest/trainer_state.json") <(grep -E "$keys" "$2/latest/trainer_state.json") ||
    fail "$2 ends at another data position than $1"
  echo "same data position: $(grep -E '"(data_cursor|tokens_seen)"' "$1/latest/trainer_state.json" | tr -d ' \n')"
}

# bitwise RUN_A RUN_B: the final weights, optimizer state and trainer state (but its clock).
bitwise() {
  local a b
  a=$(readlink -f "$1/latest") b=$(readlink -f "$2/latest")
  cmp "$a/model.safetensors" "$b/model.safetensors" || fail "$2's weights differ from $1's"
  cmp "$a/optimizer.safetensors" "$b/optimizer.safetensors" || fail "$2's optimizer state differs from $1's"
  diff <(grep -v elapsed_seconds "$a/trainer_state.json") <(grep -v elapsed_seconds "$b/trainer_state.json") ||
    fail "$2's trainer_state.json differs from $1's"
  echo "bitwise equal: $2 and $1"
}

case "$gate" in
equivalence)
  steps=(--set train.max_steps=50 --set eval.every=25)
  "$kipp" train --config "$config" "${common[@]}" "${steps[@]}" --set train.grad_accum=2 \
    --set "run.dir=$work/one" >"$work/one.log" 2>&1 || { cat "$work/one.log"; fail "1 process"; }
  "${two[@]}" "$kipp" train --config "$config" "${common[@]}" "${steps[@]}" --set train.grad_accum=1 \
    --set "run.dir=$work/two" >"$work/two.log" 2>&1 || { cat "$work/two.log"; fail "2 ranks"; }
  grep -q "data parallel: MPI .*2 ranks" "$work/two.log" || fail "the 2-rank run did not report its ranks"
  grep -q "2 ranks, allreduce [0-9]*% of the step" "$work/two.log" || fail "no allreduce share in the step lines"
  ! grep -q '^\[1,1\]' "$work/two.log" || fail "rank 1 printed: $(grep -m1 '^\[1,1\]' "$work/two.log")"
  grep -q '"allreduce_share"' "$work/two/metrics.jsonl" || fail "no allreduce_share in the run log"
  losses_match "$work/one" "$work/two" 1
  same_position "$work/one" "$work/two"
  lora=(--config "$(dirname "$0")/../../configs/finetune-qwen3-0.6b.yaml" --init "$(dirname "$tokenizer")"
        --set "data.train=[$corpus]" --set data.format=text --set train.seq_len=32 --set train.micro_batch=2
        --set train.max_steps=6 --set train.warmup_steps=2 --set train.lr=1e-2 --set eval.every=3
        --set eval.batches=1 --set "eval.sample_prompts=[]" --set train.lora.rank=4 --set train.lora.alpha=8
        --set train.lora.dropout=0.1 --set train.threads=1 --set log.every=1 --set checkpoint.every=0 --plain)
  "$kipp" train "${lora[@]}" --set train.grad_accum=2 --set "run.dir=$work/lora-one" >"$work/lora-one.log" 2>&1 ||
    { cat "$work/lora-one.log"; fail "LoRA, 1 process"; }
  "${two[@]}" "$kipp" train "${lora[@]}" --set train.grad_accum=1 --set "run.dir=$work/lora-two" \
    >"$work/lora-two.log" 2>&1 || { cat "$work/lora-two.log"; fail "LoRA, 2 ranks"; }
  [[ -e "$work/lora-two/adapter/adapter_model.safetensors" ]] || fail "the 2-rank LoRA run wrote no adapter/"
  losses_match "$work/lora-one" "$work/lora-two" 1
  ;;
resume)
  steps=(--set train.max_steps=16 --set eval.every=8)
  "${two[@]}" "$kipp" train --config "$config" "${common[@]}" "${steps[@]}" --set train.grad_accum=1 \
    --set "run.dir=$work/two" >"$work/two.log" 2>&1 || { cat "$work/two.log"; fail "2 ranks"; }
  "${two[@]}" "$kipp" train --config "$config" "${common[@]}" "${steps[@]}" --set train.grad_accum=1 \
    --set "run.dir=$work/stopped" --until-step 8 >"$work/stopped.log" 2>&1 || { cat "$work/stopped.log"; fail "2 ranks to step 8"; }
  "$kipp" train --config "$config" "${common[@]}" "${steps[@]}" --set train.grad_accum=2 \
    --set "run.dir=$work/one-to-two" --until-step 8 >"$work/one.log" 2>&1 || { cat "$work/one.log"; fail "1 process to step 8"; }
  cp -r "$work/stopped" "$work/two-to-one"
  "${two[@]}" "$kipp" train --resume "$work/stopped" --plain >"$work/resumed.log" 2>&1 ||
    { cat "$work/resumed.log"; fail "2-rank resume"; }
  grep -q "resumed from .* at step 8" "$work/resumed.log" || fail "the 2-rank resume did not start at step 8"
  bitwise "$work/two" "$work/stopped"
  losses_match "$work/two" "$work/stopped" 1 0
  "$kipp" train --resume "$work/two-to-one" --set train.grad_accum=2 --plain >"$work/two-to-one.log" 2>&1 ||
    { cat "$work/two-to-one.log"; fail "2 ranks -> 1 process"; }
  same_position "$work/two" "$work/two-to-one"
  losses_match "$work/two" "$work/two-to-one" 1
  "${two[@]}" "$kipp" train --resume "$work/one-to-two" --set train.grad_accum=1 --plain >"$work/one-to-two.log" 2>&1 ||
    { cat "$work/one-to-two.log"; fail "1 process -> 2 ranks"; }
  same_position "$work/two" "$work/one-to-two"
  losses_match "$work/two" "$work/one-to-two" 1
  ;;
failure)
  status=0
  timeout 120 mpirun --oversubscribe -np 1 "$kipp" train --config "$config" "${common[@]}" \
    --set "run.dir=$work/run" : -np 1 "$kipp" train --config "$config" "${common[@]}" \
    --set "run.dir=$work/run" --set train.lr=0.5 >"$work/failure.log" 2>&1 || status=$?
  [[ $status -ne 0 && $status -ne 124 ]] || { cat "$work/failure.log"; fail "exit status $status, not a failure"; }
  grep -q "kipp: error: rank 1: the config, flags or data differ from rank 0's" "$work/failure.log" ||
    { cat "$work/failure.log"; fail "rank 1's error is not named"; }
  [[ ! -e "$work/run/latest" ]] || fail "a checkpoint was written"
  echo "rank 1's mismatch stopped both ranks (exit status $status)"

  # Rank 1 dies mid-run (SIGKILL: no chance to say anything): rank 0 must not wait forever in a
  # sum, and the checkpoint written before the death must be whole.
  killed=(--config "$config" "${common[@]}" --set train.max_steps=400 --set checkpoint.every=2
          --set eval.every=0 --set "run.dir=$work/killed")
  timeout 300 "${two[@]}" "$kipp" train "${killed[@]}" >"$work/killed.log" 2>&1 &
  launcher=$!
  rank1=""
  for _ in $(seq 600); do
    if [[ -z "$rank1" ]]; then
      for pid in $(pgrep -f -- "run.dir=$work/killed" || true); do
        tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=1 && rank1=$pid
      done
    fi
    [[ -n "$rank1" && -e "$work/killed/latest" ]] && break
    sleep 0.1
  done
  [[ -n "$rank1" && -e "$work/killed/latest" ]] || { cat "$work/killed.log"; fail "no rank 1 or no checkpoint to kill at"; }
  kill -KILL "$rank1"
  status=0
  wait "$launcher" || status=$?
  [[ $status -ne 0 && $status -ne 124 ]] || { cat "$work/killed.log"; fail "exit status $status after rank 1 was killed"; }
  grep -qi "rank 1 .*signal 9\|rank 1 .*killed" "$work/killed.log" || { cat "$work/killed.log"; fail "the killed rank is not named"; }
  ! pgrep -f -- "run.dir=$work/killed" >/dev/null || fail "a rank outlived the failure"
  at=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["step"])' "$work/killed/latest/trainer_state.json")
  timeout 300 "${two[@]}" "$kipp" train --resume "$work/killed" --set train.max_steps=$((at + 4)) --plain \
    >"$work/killed-resumed.log" 2>&1 || { cat "$work/killed-resumed.log"; fail "resuming after the killed rank"; }
  grep -q "resumed from .* at step $at" "$work/killed-resumed.log" || fail "the resume did not start at step $at"
  echo "rank 1 killed after the checkpoint of step $at: both ranks stopped (exit status $status), the checkpoint resumed"
  ;;
*) fail "unknown gate $gate" ;;
esac
echo PASS
