#!/usr/bin/env bash
# gpu_check.sh: the whole CUDA check in one go on a GPU machine, from the bundle that
# scripts/gpu_bundle.sh packed into .gpu/ (docs/GPU.md): makes the synthetic models, runs every
# gate of scripts/gpu_gates.txt (serving and training), `kipp bench --backend cuda`, the training
# bench against PyTorch (bench/train_cuda_vs_torch.py), the PyTorch anchor
# (bench/cuda_torch_anchor.py) and the server throughput (bench/serve_throughput.py), then writes
#   OUT_DIR/summary.json      every step's status and time, the machine, the headline figures
#   OUT_DIR/bench_cuda.json   the kipp bench runs;  OUT_DIR/torch_anchor.json;  OUT_DIR/serve_cuda.json
#   OUT_DIR/train_cuda.json   the training bench (kipp train --device cuda against PyTorch)
#   OUT_DIR/logs.tar.gz       every step's log (each cut to 4 MiB)
#   OUT_DIR/gpu_check.log     this script's own output
# and prints a short table last. Each step has its own timeout and the run a global deadline
# (--budget); a failed step does not stop the others. The exit status is 0 when every gate that
# exists passed and every measurement ran.
#
# --dry-run, on a machine without a GPU: everything but the GPU work. It unpacks the bundle, checks
# that every program's libraries resolve (the bundle's lib/ and the CUDA libraries), compiles the
# Python scripts, makes and converts the tiny model, runs every gate program (each must report
# SKIPPED, exit 77, not crash or pass), checks each kipp command's flags against its --help, runs
# kipp bench briefly on the CPU, the convergence gate's CPU run for a few steps, the training
# bench's dry run (its PyTorch model on the CPU, kipp train on the CPU, every GPU command line up
# to the device check), the anchor's CPU self-check, and the server client against kipp serve on
# the CPU.
#
# Usage: scripts/gpu_check.sh OUT_DIR [--dry-run] [--budget SECONDS] [--only REGEX]
# --only REGEX runs only the gates and measurements whose names match (for a short second run on
# the same machine, which reuses the models), besides the machine and bundle checks.
# Environment: KIPP_GPU_WORK (scratch folder, default /tmp/kipp-gpu-check; the models are kept
# there, so a second run on the same machine skips making them), KIPP_GPU_PYTHON (the python3
# with torch and numpy; default the first of python3, /usr/bin/python3 that imports both).
set -uo pipefail

# ---------------------------------------------------------------- what runs, in one place
BUDGET_S=570            # the whole run; --budget overrides
RESERVE_S=12            # kept for the summary at the end
# Each phase ends at this share of the budget (or earlier steps' slack moves it forward): the
# gates first (they decide the issues), then the measurements; serve runs until the reserve.
PHASE_END_PCT_GATES=49  # models + serving and training gates
PHASE_END_PCT_BENCH=57  # kipp bench
PHASE_END_PCT_TRAIN=82  # the training bench
PHASE_END_PCT_ANCHOR=93 # the PyTorch anchor
MODELS_TIMEOUT_S=240
BENCH_MODEL=qwen3-0.6b-bf16
# name  timeout_s  kipp bench arguments (after --backend cuda -m MODEL --json FILE)
BENCH_RUNS=(
  "bench_b8    120  --prompt-len 512,2048 --gen 64 --repeats 3 --batch 8"
  "bench_b32   60   --prompt-len 512 --gen 32 --repeats 1 --batch 32 --no-probe"
  "bench_b128  60   --prompt-len 512 --gen 32 --repeats 1 --batch 128 --no-probe"
)
ANCHOR_TIMEOUT_S=150
ANCHOR_ARGS=(--prefill "512,2048" --batches "1,8,32,128" --prompt-len 512 --gen 32)
SERVE_TIMEOUT_S=90
TRAIN_BENCH_TIMEOUT_S=160
SERVE_ARGS=(--levels "1,16,64" --rounds 2 --max-tokens 64 --ctx 1024)
# The dry run's small versions, on the tiny model and the CPU.
DRY_SERVE_ARGS=(--levels "1,2" --rounds 1 --max-tokens 4 --ctx 256 --server-arg=--backend=cpu)
DRY_BENCH_ARGS=(--backend cpu --prompt-len 8 --gen 2 --repeats 1 --batch 2 --no-probe)
LOG_CAP_BYTES=$((4 * 1024 * 1024))

# ---------------------------------------------------------------- arguments and folders
die() { echo "gpu_check: error: $*" >&2; exit 2; }
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out=""
dry=0
only=""
all_args=("$@")
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dry-run) dry=1; shift ;;
    --budget) [[ $# -ge 2 && "$2" =~ ^[0-9]+$ ]] || die "--budget needs a number of seconds"; BUDGET_S="$2"; shift 2 ;;
    --only) [[ $# -ge 2 ]] || die "--only needs a regular expression"; only="$2"; shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *) [[ -z "$out" ]] || die "one OUT_DIR only"; out="$1"; shift ;;
  esac
done
[[ -n "$out" ]] || die "usage: scripts/gpu_check.sh OUT_DIR [--dry-run] [--budget SECONDS] [--only REGEX]"
[[ -f "$repo/.gpu/bundle.tar.xz" ]] || die "no bundle: run scripts/gpu_bundle.sh first (and copy .gpu/ along with the checkout)"
mkdir -p "$out" || die "cannot create $out"
out="$(cd "$out" && pwd)"
# The whole output also goes to OUT_DIR/gpu_check.log; a pipeline (not a process substitution)
# so that the table printed last is out before the script returns.
if [[ -z "${KIPP_GPU_CHECK_LOGGED:-}" ]]; then
  KIPP_GPU_CHECK_LOGGED=1 bash "${BASH_SOURCE[0]}" "${all_args[@]}" 2>&1 | tee "$out/gpu_check.log"
  exit "${PIPESTATUS[0]}"
fi
work="${KIPP_GPU_WORK:-/tmp/kipp-gpu-check}"
bundle="$work/bundle"
models="$work/models"
logs="$work/logs"
steps="$work/steps.tsv"
mkdir -p "$work" "$models" || die "cannot create $work"
rm -rf "$logs" "$work/scratch" "$work/results"
mkdir -p "$logs" "$work/scratch" "$work/results" "$work/wrap"
: >"$steps"
t_start=$(date +%s)
cd "$repo" || die "cannot enter $repo"

phase_end=$((t_start + BUDGET_S * PHASE_END_PCT_GATES / 100))
run_end=$((t_start + BUDGET_S - RESERVE_S))
problems=0

# One line per step in steps.tsv: name, kind, status, exit code, seconds, log, note.
record() { printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" "$6" "${7//$'\t'/ }" >>"$steps"; }
note() { echo "== $*"; }

selected() { [[ -z "$only" || "$1" =~ $only ]]; }

# run_step NAME KIND TIMEOUT_S LOG CMD...: runs CMD under its timeout, capped by the phase's end;
# the exit code is left in $step_rc (-1 when the deadline left no time, -2 when --only leaves it out).
run_step() {
  local name="$1" kind="$2" limit="$3" log="$4"
  shift 4
  if ! selected "$name"; then
    step_rc=-2
    return
  fi
  local left=$((phase_end - $(date +%s)))
  ((limit > left)) && limit=$left
  if ((limit < 5)); then
    step_rc=-1
    record "$name" "$kind" "skipped" "" 0 "" "no time left before the deadline"
    note "$name: skipped (deadline)"
    problems=$((problems + 1))
    return
  fi
  local t0 t1
  t0=$(date +%s.%N)
  timeout -k 5 "$limit" "$@" >"$log" 2>&1 </dev/null
  step_rc=$?
  t1=$(date +%s.%N)
  step_seconds=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
}

# finish_step NAME KIND LOG: records the measurement run_step just ran (anything but exit 0 is a
# problem), with its log's last line as the note.
finish_step() {
  ((step_rc >= 0)) || return
  local status; status="$(status_of "$2" "$step_rc")"
  [[ "$status" == passed ]] || problems=$((problems + 1))
  record "$1" "$2" "$status" "$step_rc" "$step_seconds" "${3##*/}" "$(tail -n1 "$3" | cut -c1-200)"
  note "$1: $status (${step_seconds} s)"
}

status_of() {  # KIND RC -> status word
  local kind="$1" rc="$2"
  case "$rc" in
    0) echo passed ;;
    77) [[ "$kind" == gate ]] && echo skipped || echo failed ;;
    124|137) echo "timeout" ;;
    *) echo failed ;;
  esac
}

# ---------------------------------------------------------------- the machine
note "gpu_check $([[ $dry == 1 ]] && echo '(dry run) ')in $repo, budget ${BUDGET_S} s, scratch $work"
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi 2>&1 | tee "$logs/nvidia-smi.log"
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap,clocks.max.sm,clocks.max.memory,power.limit \
             --format=csv >"$work/results/gpu.csv" 2>&1 ||
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >"$work/results/gpu.csv" 2>&1
  cat "$work/results/gpu.csv"
else
  echo "nvidia-smi not found" | tee "$logs/nvidia-smi.log"
  [[ $dry == 1 ]] || { echo "no nvidia-smi: is this the GPU machine?"; problems=$((problems + 1)); }
fi
{ uname -a; ldd --version 2>&1 | head -n1; nproc; free -g 2>/dev/null | head -n2; } >"$logs/machine.log" 2>&1

# The python3 with torch and numpy (the GPU machine's holds both; the dry run's needs only a CPU torch).
py="${KIPP_GPU_PYTHON:-}"
if [[ -z "$py" ]]; then
  for cand in python3 /usr/bin/python3; do
    if command -v "$cand" >/dev/null && "$cand" -c 'import numpy, torch' >/dev/null 2>&1; then py="$(command -v "$cand")"; break; fi
  done
fi
if [[ -z "$py" ]]; then
  echo "no python3 that imports torch and numpy (set KIPP_GPU_PYTHON)"
  py="python3"
  problems=$((problems + 1))
fi
"$py" -c 'import sys, numpy, torch; print("python", sys.version.split()[0], "numpy", numpy.__version__, "torch", torch.__version__, "cuda", torch.version.cuda, "gpu", torch.cuda.is_available())' 2>&1 | tee "$logs/python.log"

# ---------------------------------------------------------------- the bundle
bundle_sum="$(sha256sum .gpu/bundle.tar.xz | cut -c1-16)"
if [[ "$(cat "$bundle/.sum" 2>/dev/null)" != "$bundle_sum" ]]; then
  rm -rf "$bundle"
  mkdir -p "$bundle"
  if command -v xz >/dev/null; then
    tar -C "$bundle" -xJf .gpu/bundle.tar.xz
  else  # Python's tarfile reads xz without the xz program
    "$py" -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' .gpu/bundle.tar.xz "$bundle"
  fi || die "cannot unpack .gpu/bundle.tar.xz"
  echo "$bundle_sum" >"$bundle/.sum"
fi
sed 's/^/bundle: /' "$bundle/BUILD_INFO"
# A bundle built from other sources than this checkout's would test something else.
if (cd "$repo" && sha256sum --quiet -c "$bundle/SOURCES.sha256") >"$logs/sources.log" 2>&1; then
  record sources setup passed 0 0 sources.log "the bundle matches this checkout"
else
  differ="$(grep -c 'FAILED' "$logs/sources.log")"
  echo "the bundle was built from other sources: $differ file(s) differ (scripts/gpu_bundle.sh again)"
  record sources setup failed 1 0 sources.log "$differ source file(s) differ from the bundle's"
  problems=$((problems + 1))
fi

# The CUDA libraries the bundle leaves out (cuBLAS, cuBLASLt, ...): the toolkit's folder, else where
# the loader or the python packages have them.
# kipp opens libcublasLt.so.<the build's CUDA major version>.
cuda_major="$(sed -n 's/^cuda \([0-9]*\)\..*/\1/p' "$bundle/BUILD_INFO")"
lt="libcublasLt.so.${cuda_major:-*}"
cuda_lib=""
for d in ${CUDA_HOME:+"$CUDA_HOME/lib64" "$CUDA_HOME/lib"} /usr/local/cuda/lib64 /usr/local/cuda/lib \
         /usr/local/cuda/targets/x86_64-linux/lib; do
  if compgen -G "$d/$lt" >/dev/null; then cuda_lib="$d"; break; fi
done
if [[ -z "$cuda_lib" ]]; then
  found="$(ldconfig -p 2>/dev/null | awk -v lt="$lt" '$1 == lt { print $NF; exit }')"
  [[ -z "$found" ]] && found="$("$py" -c 'import glob, os, sys, nvidia; print(next(iter(sorted(glob.glob(os.path.join(os.path.dirname(nvidia.__file__), "**", sys.argv[1]), recursive=True))), ""))' "$lt" 2>/dev/null)"
  [[ -n "$found" ]] && cuda_lib="$(dirname "$found")"
fi
if [[ -z "$cuda_lib" ]]; then
  echo "no folder with $lt found (set CUDA_HOME)"
  problems=$((problems + 1))
fi
echo "cuda libraries: ${cuda_lib:-none}"
orig_ld="${LD_LIBRARY_PATH:-}"
kipp_ld="$bundle/lib${cuda_lib:+:$cuda_lib}${orig_ld:+:$orig_ld}"

# Wrappers: the bundle's kipp with its libraries (for programs that start it), and the python3
# with the caller's own library path (the bundle's libraries must not shadow torch's).
printf '#!/bin/sh\nLD_LIBRARY_PATH=%q exec %q "$@"\n' "$kipp_ld" "$bundle/bin/kipp" >"$work/wrap/kipp"
printf '#!/bin/sh\nLD_LIBRARY_PATH=%q exec %q "$@"\n' "$orig_ld" "$py" >"$work/wrap/python3"
chmod +x "$work/wrap/kipp" "$work/wrap/python3"
kipp="$work/wrap/kipp"
pyw="$work/wrap/python3"

# Every program's libraries resolve with the bundle's and the CUDA folder (and cuBLASLt is there).
: >"$logs/ldd.log"
for exe in "$bundle"/bin/*; do
  echo "-- $exe" >>"$logs/ldd.log"
  LD_LIBRARY_PATH="$kipp_ld" ldd "$exe" >>"$logs/ldd.log" 2>&1
done
if grep -q "not found" "$logs/ldd.log"; then
  echo "unresolved libraries:"; grep "not found" "$logs/ldd.log" | sort -u
  record libraries setup failed 1 0 ldd.log "$(grep 'not found' "$logs/ldd.log" | sort -u | head -n3 | tr '\n' ';')"
  problems=$((problems + 1))
else
  record libraries setup passed 0 0 ldd.log "$(ls "$bundle/lib" | wc -l) bundled, cuda ${cuda_lib:-none}"
fi

# ---------------------------------------------------------------- the Python scripts compile
pyfiles=(tools/make_synthetic.py tools/torch_reference.py tools/train_reference.py bench/cuda_torch_anchor.py
         bench/serve_throughput.py bench/train_cuda_vs_torch.py scripts/gpu_summary.py)
if "$py" -m py_compile "${pyfiles[@]}" >"$logs/py_compile.log" 2>&1; then
  record py_compile setup passed 0 0 py_compile.log ""
else
  cat "$logs/py_compile.log"; record py_compile setup failed 1 0 py_compile.log ""; problems=$((problems + 1))
fi

# ---------------------------------------------------------------- the gates
mapfile -t gate_rows < <(grep -v '^[[:space:]]*\(#\|$\)' scripts/gpu_gates.txt)

needs_models() { [[ "$1" == *"{models}"* ]]; }

run_gate() {  # one row of scripts/gpu_gates.txt
  local name kind limit rest
  read -r name kind limit rest <<<"$1"
  selected "$name" || return
  local scratch="$work/scratch/$name"
  mkdir -p "$scratch"
  rest="${rest//\{bin\}/$bundle/bin}"
  rest="${rest//\{kipp\}/$kipp}"
  rest="${rest//\{models\}/$models}"
  rest="${rest//\{py\}/$pyw}"
  rest="${rest//\{ref\}/$repo/tools/torch_reference.py}"
  rest="${rest//\{train_ref\}/$repo/tools/train_reference.py}"
  rest="${rest//\{repo\}/$repo}"
  rest="${rest//\{tokenizer\}/$bundle/tokenizer}"
  rest="${rest//\{results\}/$work/results}"
  rest="${rest//\{scratch\}/$scratch}"
  local -a cmd
  read -ra cmd <<<"$rest"
  local log="$logs/$name.log"
  if [[ ! -x "${cmd[0]}" ]]; then
    record "$name" "$kind" "not built" "" 0 "" "${cmd[0]##*/} is not in the bundle"
    note "$name: not built"
    return
  fi
  if [[ $dry == 1 && "$kind" == cli ]]; then
    # The dry run cannot run a CUDA command: it checks the command's flags against its --help.
    local sub="${cmd[1]}" missing=()
    LD_LIBRARY_PATH="$kipp_ld" "${cmd[0]}" "$sub" --help >"$log" 2>&1
    for w in "${cmd[@]:2}"; do
      [[ "$w" == -* ]] || continue
      grep -q -- "${w%%=*}\b" "$log" || missing+=("$w")
    done
    if ((${#missing[@]})); then
      record "$name" "$kind" "failed" "" 0 "$name.log" "kipp $sub --help has no ${missing[*]}"
      note "$name: kipp $sub has no ${missing[*]}"; problems=$((problems + 1))
    else
      record "$name" "$kind" "flags ok" 0 0 "$name.log" ""
    fi
    return
  fi
  # The bundle's programs run with its libraries; scripts with the machine's own (they start kipp
  # through {kipp}, the wrapper that has them).
  local ld="$orig_ld"
  [[ "${cmd[0]}" == "$bundle"/bin/* ]] && ld="$kipp_ld"
  LD_LIBRARY_PATH="$ld" run_step "$name" "$kind" "$limit" "$log" "${cmd[@]}"
  ((step_rc < 0)) && return
  local status; status="$(status_of "$kind" "$step_rc")"
  local why=""
  [[ "$status" == passed ]] || why="$(grep -v '^[[:space:]]*$' "$log" | tail -n1 | cut -c1-200)"
  if [[ $dry == 1 ]]; then
    # Without a GPU a gate must say SKIPPED (77); passing or anything else is a problem.
    if [[ "$step_rc" == 77 ]]; then status="skipped"; else status="failed"; why="exit $step_rc without a GPU (expected 77): $why"; problems=$((problems + 1)); fi
  elif [[ "$status" != passed ]]; then
    problems=$((problems + 1))  # on the GPU machine a skipped gate is a problem too
  fi
  record "$name" "$kind" "$status" "$step_rc" "$step_seconds" "$name.log" "$why"
  note "$name: $status (exit $step_rc, ${step_seconds} s)${why:+: $why}"
}

# The models are made in the background (under `timeout`, which stops the whole process group)
# while the gates that need none run.
make_models() {
  local names=(tiny) quants=(bf16 q8_0 affine4) pids=() n q p rc=0
  [[ $dry == 1 ]] || names+=(qwen3-0.6b)
  for n in "${names[@]}"; do
    local preset=tiny extra=()
    [[ "$n" == qwen3-0.6b ]] && preset=0.6b extra=(--ship-tied-lm-head)
    KIPP_PYTHON="$pyw" bash tests/integration/ensure_synthetic.sh "$models/$n-hf" --preset "$preset" \
      --tokenizer-dir "$bundle/tokenizer" --quiet "${extra[@]}" >"$logs/make-$n.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  ((rc == 0)) || { echo "making a synthetic checkpoint failed (logs make-*.log)"; return 1; }
  pids=()
  for n in "${names[@]}"; do
    for q in "${quants[@]}"; do
      local g="$models/$n-$q.gguf"
      [[ -f "$g" && "$g" -nt "$models/$n-hf/.kipp-stamp" ]] && continue
      "$kipp" convert "$models/$n-hf" -o "$g" --quant "$q" >"$logs/convert-$n-$q.log" 2>&1 &
      pids+=($!)
    done
  done
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  ((rc == 0)) || echo "a conversion failed (logs convert-*.log)"
  return $rc
}
export -f make_models
export dry models bundle logs kipp pyw

# Only what --only selects needs the models (a rerun of the training steps on a fresh machine
# does not wait for them).
models_wanted=0
for row in "${gate_rows[@]}"; do needs_models "$row" && selected "${row%% *}" && models_wanted=1; done
for name in "${BENCH_RUNS[@]%% *}" bench_cpu torch_anchor serve; do selected "$name" && models_wanted=1; done
if [[ $models_wanted == 1 ]]; then
  note "models: making the synthetic checkpoints under $models"
  models_limit=$((phase_end - $(date +%s)))
  ((models_limit > MODELS_TIMEOUT_S)) && models_limit=$MODELS_TIMEOUT_S
  models_t0=$(date +%s)
  timeout -k 5 "$models_limit" bash -c make_models >"$logs/models.log" 2>&1 &
  models_pid=$!
fi
for row in "${gate_rows[@]}"; do needs_models "$row" || run_gate "$row"; done
if [[ $models_wanted == 1 ]]; then
  wait "$models_pid"
  models_rc=$?
  models_s=$(($(date +%s) - models_t0))
  if [[ "$models_rc" == 0 ]]; then
    record models setup passed 0 "$models_s" models.log "$(ls "$models" | tr '\n' ' ')"
  else
    record models setup failed "$models_rc" "$models_s" models.log "$(tail -n1 "$logs/models.log")"
    problems=$((problems + 1))
  fi
  note "models: exit $models_rc, ${models_s} s"
fi
for row in "${gate_rows[@]}"; do needs_models "$row" && run_gate "$row"; done

# ---------------------------------------------------------------- kipp bench --backend cuda
phase_end=$((t_start + BUDGET_S * PHASE_END_PCT_BENCH / 100))
bench_model="$models/$BENCH_MODEL.gguf"
bench_selected=0
for row in "${BENCH_RUNS[@]}"; do selected "${row%% *}" && bench_selected=1; done
if [[ $dry == 1 && $bench_selected == 1 ]]; then
  LD_LIBRARY_PATH="$kipp_ld" "$bundle/bin/kipp" bench --help >"$logs/bench-help.log" 2>&1
  missing=()
  for row in "${BENCH_RUNS[@]}"; do
    read -ra words <<<"$row"
    for w in --backend --json "${words[@]:2}"; do
      [[ "$w" == -* ]] && ! grep -q -- "$w\b" "$logs/bench-help.log" && missing+=("$w")
    done
  done
  if ((${#missing[@]})); then
    record bench bench failed "" 0 bench-help.log "kipp bench --help has no $(printf '%s\n' "${missing[@]}" | sort -u | tr '\n' ' ')"
    problems=$((problems + 1))
  else
    record bench bench "flags ok" 0 0 bench-help.log ""
  fi
  # One small run on the CPU: the flags parse and the summary reads the JSON.
  run_step bench_cpu bench 60 "$logs/bench_cpu.log" "$kipp" bench -m "$models/tiny-bf16.gguf" "${DRY_BENCH_ARGS[@]}" \
    --json "$work/results/bench_cpu.json"
  finish_step bench_cpu bench "$logs/bench_cpu.log"
elif [[ $dry == 0 ]]; then
  for row in "${BENCH_RUNS[@]}"; do
    read -ra words <<<"$row"
    name="${words[0]}"
    run_step "$name" bench "${words[1]}" "$logs/$name.log" "$kipp" bench --backend cuda -m "$bench_model" \
      "${words[@]:2}" --json "$work/results/$name.json"
    finish_step "$name" bench "$logs/$name.log"
  done
fi

# ---------------------------------------------------------------- training: kipp train against PyTorch
phase_end=$((t_start + BUDGET_S * PHASE_END_PCT_TRAIN / 100))
if [[ $dry == 1 ]]; then
  # The convergence gate's CPU run, a few steps: its command line and its reading of the log.
  run_step train_convergence_cpu bench 120 "$logs/train_convergence_cpu.log" tests/integration/train_convergence_cuda.sh \
    "$kipp" configs/tiny.yaml tests/train/corpus.md "$work/scratch/train_convergence_cpu" --steps 3 --cpu-only
  finish_step train_convergence_cpu bench "$logs/train_convergence_cpu.log"
  train_bench=(--dry-run)
else
  train_bench=()
fi
# The bench starts no measurement too close to its end and writes its JSON after each one.
left=$((phase_end - $(date +%s)))
((left > TRAIN_BENCH_TIMEOUT_S)) && left=$TRAIN_BENCH_TIMEOUT_S
run_step train_bench bench "$TRAIN_BENCH_TIMEOUT_S" "$logs/train_bench.log" "$pyw" bench/train_cuda_vs_torch.py \
  --kipp "$kipp" --work "$work/scratch/train_bench" --out "$work/results/train_bench.json" \
  --budget-s $((left > 20 ? left - 8 : 12)) "${train_bench[@]}"
finish_step train_bench bench "$logs/train_bench.log"

# ---------------------------------------------------------------- the PyTorch anchor
phase_end=$((t_start + BUDGET_S * PHASE_END_PCT_ANCHOR / 100))
if [[ $dry == 1 ]]; then
  anchor=(--dry-run --model "$models/tiny-hf")
else
  anchor=(--model "$models/qwen3-0.6b-hf" "${ANCHOR_ARGS[@]}")
fi
# The anchor starts no measurement in its last 40 s (a compile can take that long).
left=$((phase_end - $(date +%s)))
((left > ANCHOR_TIMEOUT_S)) && left=$ANCHOR_TIMEOUT_S
run_step torch_anchor bench "$ANCHOR_TIMEOUT_S" "$logs/torch_anchor.log" "$pyw" bench/cuda_torch_anchor.py \
  "${anchor[@]}" --out "$work/results/torch_anchor.json" --budget-s $((left > 60 ? left - 40 : 20))
finish_step torch_anchor bench "$logs/torch_anchor.log"

# ---------------------------------------------------------------- server throughput
phase_end=$run_end
if [[ $dry == 1 ]]; then
  serve=(--model "$models/tiny-bf16.gguf" "${DRY_SERVE_ARGS[@]}")
else
  serve=(--model "$bench_model" "${SERVE_ARGS[@]}" --server-arg=--backend=cuda)
fi
run_step serve bench "$SERVE_TIMEOUT_S" "$logs/serve.log" "$pyw" bench/serve_throughput.py --kipp "$kipp" \
  "${serve[@]}" --out "$work/results/serve.json"
finish_step serve bench "$logs/serve.log"

# ---------------------------------------------------------------- results
for f in "$logs"/*.log; do
  size=$(stat -c %s "$f")
  if ((size > LOG_CAP_BYTES)); then
    { head -c $((LOG_CAP_BYTES / 2)) "$f"; printf '\n[... %d bytes cut ...]\n' $((size - LOG_CAP_BYTES)); tail -c $((LOG_CAP_BYTES / 2)) "$f"; } >"$f.cut"
    mv "$f.cut" "$f"
  fi
done
tar -C "$work" -czf "$out/logs.tar.gz" logs
"$pyw" scripts/gpu_summary.py --steps "$steps" --results "$work/results" --bundle-info "$bundle/BUILD_INFO" \
  --out "$out" --dry-run "$dry" --seconds $(($(date +%s) - t_start)) --problems "$problems"
summary_rc=$?
((summary_rc == 0)) || problems=$((problems + 1))
echo "gpu_check: $problems problem(s), $(($(date +%s) - t_start)) s; results in $out"
((problems == 0))
