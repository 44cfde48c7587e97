#!/usr/bin/env bash
# Kipp's main job on an embedded default: install, build, make the tiny synthetic Qwen3
# checkpoint (real Qwen3 tokenizer, random weights), convert it to GGUF, inspect it and
# evaluate a chat prompt on the CPU engine.
# Until the training quickstart exists, this is the end-to-end path a new user runs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh release
out="${KIPP_QUICKSTART_DIR:-build/quickstart}"
mkdir -p "$out"
/usr/bin/python3 tools/make_synthetic.py --preset tiny --out "$out/tiny-hf"
build/release/kipp convert "$out/tiny-hf" -o "$out/tiny.gguf"
build/release/kipp inspect "$out/tiny.gguf"
build/release/kipp logits -m "$out/tiny.gguf" --prompt $'<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n'
