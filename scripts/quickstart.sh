#!/usr/bin/env bash
# Kipp's main job, end to end on a fresh Debian 12 machine: installs what is missing, builds
# the `kipp` binary, trains a 4096-token BPE tokenizer and the tiny model on the fortune
# cookies of Debian's `fortunes` package for a few minutes (live dashboard), exports GGUF and
# prints samples next to the final validation loss and the unigram baseline.
#
# Usage: scripts/quickstart.sh [--steps N]   (default 900 steps, about 7 minutes on 2 cores)
# Output in runs/quickstart/ (KIPP_QUICKSTART_DIR): tokenizer.json, run/ (checkpoints, logs,
# loss.svg) and fortunes.gguf. A second run starts over. KIPP_QUICKSTART_BIN=PATH uses that
# kipp binary instead of installing and building (the test suite runs it so, for a few steps).
set -euo pipefail
cd "$(dirname "$0")/.."
steps=900
case "${1:-}" in
  --steps) steps="${2:?--steps takes a number}"
           [[ "$steps" =~ ^[1-9][0-9]*$ ]] || { echo "quickstart: --steps takes a positive number" >&2; exit 2; } ;;
  -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  "") ;;
  *) echo "quickstart: unknown argument $1 (see --help)" >&2; exit 2 ;;
esac
started=$(date +%s)

kipp="${KIPP_QUICKSTART_BIN:-}"
if [[ -z "$kipp" ]]; then
  bash scripts/setup.sh --runtime
  bash scripts/build.sh app kipp
  kipp=build/app/kipp
fi
out="${KIPP_QUICKSTART_DIR:-runs/quickstart}"
rm -rf "$out"
mkdir -p "$out"

# Every fortune file of the package (the .dat indexes and .u8 links are not text).
corpus=()
for file in /usr/share/games/fortunes/*; do
  [[ -f "$file" && ! -L "$file" && "$file" != *.dat ]] && corpus+=("$file")
done
[[ ${#corpus[@]} -gt 0 ]] || { echo "quickstart: no fortune files in /usr/share/games/fortunes" >&2; exit 1; }
list=$(IFS=,; echo "${corpus[*]}")

echo "== tokenizer: byte-level BPE, 4096 ids, on ${#corpus[@]} fortune files"
"$kipp" tokenizer train --input "${corpus[@]}" --vocab-size 4096 -o "$out/tokenizer.json"

echo "== training the tiny model for $steps steps"
"$kipp" train --config configs/quickstart.yaml --set "tokenizer=$out/tokenizer.json" --set "data.train=[$list]" \
  --set "run.dir=$out/run" --set "train.max_steps=$steps" --set "train.warmup_steps=$(( steps < 500 ? steps / 10 : 50 ))" \
  --set "data.cache_dir=$out/cache" | tee "$out/train.log"

echo "== export"
"$kipp" convert "$out/run/latest" -o "$out/fortunes.gguf" --chat-format chatml

echo "== samples (kipp generate, temperature 0.8)"
seed=1
for prompt in "Q: Why" "The best way to" "Love is" "A computer"; do
  printf -- '--- %s' "$prompt"
  "$kipp" generate -m "$out/fortunes.gguf" -p "$prompt" --temp 0.8 --top-k 40 --top-p 0.95 --max-tokens 60 --seed "$seed"
  printf '\n'
  seed=$((seed + 1))
done

echo "== result"
grep -E "^final validation loss|^best validation loss" "$out/train.log" || true
echo "quickstart finished in $(( $(date +%s) - started )) s. Next:"
echo "  $kipp generate -m $out/fortunes.gguf -p 'Q: What' --temp 0.8"
echo "  $kipp chat -m $out/fortunes.gguf         (the base model knows fortunes, not conversations)"
echo "  $kipp plot $out/run                       (loss curve; also $out/run/loss.svg)"
echo "  scripts/sft_example.sh                    (instruction tuning with loss masking on top of this model)"
