#!/usr/bin/env bash
# Instruction tuning with loss masking, after scripts/quickstart.sh: continues the quickstart
# model on examples/sft/conversations.jsonl (400 short conversations in the OpenAI messages
# format, made by tools/make_sft_example.py), rendered as ChatML with loss on the assistant
# tokens only, exports GGUF and asks it questions through the chat template.
set -euo pipefail
cd "$(dirname "$0")/.."
kipp=build/app/kipp
base="${KIPP_QUICKSTART_DIR:-runs/quickstart}"
[[ -e "$base/run/latest" ]] || { echo "sft_example: run scripts/quickstart.sh first (no $base/run/latest)" >&2; exit 1; }
out=runs/sft-example
rm -rf "$out"
"$kipp" data preview examples/sft/conversations.jsonl -t "$base/tokenizer.json" -n 2
"$kipp" train --config configs/sft-example.yaml --init "$base/run/latest" --set "tokenizer=$base/tokenizer.json" \
  --set "run.dir=$out" --set "data.cache_dir=$base/cache"
"$kipp" convert "$out/latest" -o "$out/sft.gguf" --chat-format chatml
for question in "What is 21 plus 14?" "Which day comes after Friday?" "Spell water backwards."; do
  echo "--- $question"
  "$kipp" generate -m "$out/sft.gguf" -p $'<|im_start|>user\n'"$question"$'<|im_end|>\n<|im_start|>assistant\n' --temp 0 --max-tokens 30
  echo
done
