#!/usr/bin/env bash
# check.sh: `kipp tokenizer train` against implementations no one here wrote.
#   1. Trains a tokenizer on the repository's own text (README, docs, headers), then encodes
#      corpus.jsonl (Unicode, numbers, contractions, whitespace runs, emoji, special tokens) and
#      tools/tokenizer_goldens/corpus.jsonl with `kipp tokenizer encode` and with encode.mjs (the
#      JS tokenizer of @lenml/tokenizers, cross-checked by Hugging Face's tokenizers): the ids
#      must be identical on every line. The same for the --byte-level tokenizer.
#   2. Trains on the lines of that text that start with a printable ASCII character and
#      requires the merges Hugging Face's BpeTrainer learns from the same file (hf_train.mjs).
# Prints PASS at the end.
# Usage: tools/tokenizer_train_check/check.sh KIPP WORK_DIR
set -euo pipefail
kipp=$1
work=$2
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"

rm -rf "$work"
mkdir -p "$work/bpe" "$work/bytes" "$work/hf"
cat "$root/README.md" "$root"/docs/*.md "$root"/src/*/*.h > "$work/corpus.txt"
cat "$here/corpus.jsonl" "$root/tools/tokenizer_goldens/corpus.jsonl" > "$work/lines.jsonl"
lines=$(grep -c . "$work/lines.jsonl")

compare() {  # NAME TOKENIZER_JSON
  "$kipp" tokenizer encode -t "$2" --jsonl "$work/lines.jsonl" > "$work/$1-kipp.jsonl"
  node "$here/encode.mjs" "$2" "$work/lines.jsonl" > "$work/$1-js.jsonl"
  if ! cmp -s "$work/$1-kipp.jsonl" "$work/$1-js.jsonl"; then
    echo "FAIL: $1: kipp and the JS tokenizer give different ids:" >&2
    diff "$work/$1-kipp.jsonl" "$work/$1-js.jsonl" | head -n 20 >&2
    exit 1
  fi
  echo "$1: all $lines lines encode to the same ids"
}

"$kipp" tokenizer train -q --input "$work/corpus.txt" --vocab-size 4000 --special '<think>' --special '</think>' \
  -o "$work/bpe/tokenizer.json"
compare bpe "$work/bpe/tokenizer.json"
"$kipp" tokenizer train --byte-level -o "$work/bytes/tokenizer.json" > /dev/null
compare bytes "$work/bytes/tokenizer.json"

grep -a '^[!-~]' "$work/corpus.txt" > "$work/hf/lines.txt"
"$kipp" tokenizer train -q --input "$work/hf/lines.txt" --vocab-size 1000000 --min-frequency 1 --no-default-specials \
  -o "$work/hf/tokenizer.json"
node "$here/hf_train.mjs" "$work/hf/tokenizer.json" "$work/hf/lines.txt"
echo PASS
