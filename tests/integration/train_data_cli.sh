#!/usr/bin/env bash
# The data side of training from the command line: conversations train with loss on the
# assistant tokens only, `kipp data preview` shows the mask, malformed records are reported with
# file and line (and --strict stops on them), `kipp eval` gives the same loss on the checkpoint
# and its GGUF and reads other formats, and the tokenized-data cache is reused.
# Usage: train_data_cli.sh KIPP CONFIG TOKENIZER_JSON CORPUS TRAINED_RUN GGUF WORK
set -euo pipefail
kipp=$1 config=$2 tokenizer=$3 corpus=$4 trained=$5 gguf=$6 work=$7
here="$(cd "$(dirname "$0")" && pwd)"
conversations="$here/../../examples/sft/conversations.jsonl"
rm -rf "$work"
mkdir -p "$work"
fail() { echo "FAIL: $*" >&2; exit 1; }

# 1. SFT on the example conversations: every record read, fewer than half the tokens carry loss.
"$kipp" train --config "$config" --set "tokenizer=$tokenizer" --set "data.train=[$conversations]" \
  --set data.format=auto --set "run.dir=$work/sft" --set "data.cache_dir=$work/cache" --set train.max_steps=4 \
  --set eval.every=2 --plain > "$work/sft.log" 2>&1 || { cat "$work/sft.log" >&2; fail "SFT run failed"; }
read -r records tokens counted < <(sed -nE 's/^data: ([0-9]+) records \(0 malformed, 0 without assistant tokens, skipped\), ([0-9]+) tokens \(([0-9]+) carry loss\).*/\1 \2 \3/p' "$work/sft.log")
[[ "${records:-}" == 400 ]] || fail "expected 400 conversations read cleanly: $(grep '^data:' "$work/sft.log")"
(( counted > 0 && counted * 2 < tokens )) || fail "$counted of $tokens tokens carry loss; expected only the assistant turns"
grep -q "^eval step 4: val loss [0-9]" "$work/sft.log" || fail "no validation on conversations"
# The tuned model exports with its chat format and holds a conversation in `kipp chat`.
"$kipp" convert "$work/sft/latest" -o "$work/sft.gguf" --chat-format chatml > /dev/null
printf 'What is 2 plus 2?\n/stats\n' | "$kipp" chat -m "$work/sft.gguf" --temp 0 --max-tokens 8 > "$work/chat.txt" 2>&1 ||
  { cat "$work/chat.txt" >&2; fail "kipp chat on the tuned model failed"; }
grep -q "turns\|tokens" "$work/chat.txt" || { cat "$work/chat.txt" >&2; fail "kipp chat printed no /stats"; }

# 2. The preview marks what carries loss: the assistant's answer and end-of-turn, not the question.
"$kipp" data preview "$conversations" -t "$tokenizer" -n 2 --no-color > "$work/preview.txt"
grep -q '⟦15 minus 3 is 12.<|im_end|>' "$work/preview.txt" || { cat "$work/preview.txt" >&2; fail "preview mask"; }
grep -q '⟦.*What is' "$work/preview.txt" && fail "the question carries loss in the preview"
grep -q "conversation, chatml" "$work/preview.txt" || fail "preview does not name the chat format"

# 3. Malformed records: reported with file and line and skipped; --strict fails on the first.
printf '%s\n' '{"text": "a good line"}' '{"text": ' '{"text": 7}' '{"text": "another good line"}' > "$work/bad.jsonl"
"$kipp" data preview "$work/bad.jsonl" -t "$tokenizer" --no-color > "$work/bad.txt" 2> "$work/bad.err"
grep -q "bad.jsonl:2:" "$work/bad.err" && grep -q "bad.jsonl:3:" "$work/bad.err" || { cat "$work/bad.err" >&2; fail "malformed lines not reported"; }
grep -q "2 records shown; 2 malformed" "$work/bad.txt" || { cat "$work/bad.txt" >&2; fail "malformed lines not counted"; }
if "$kipp" data preview "$work/bad.jsonl" -t "$tokenizer" --strict > /dev/null 2> "$work/strict.err"; then
  fail "--strict accepted a malformed record"
fi
grep -q "bad.jsonl:2:" "$work/strict.err" || fail "--strict error does not name the line: $(cat "$work/strict.err")"

# 4. kipp eval: the checkpoint and its BF16 GGUF agree within 1%; a repeated run reuses the cache
# (the cache is keyed by the tokenizer's file, so the GGUF, which embeds it, has its own).
eval_loss() {  # MODEL DATA [OPTION...]
  "$kipp" eval -m "$1" --data "$2" --seq-len 32 --max-windows 40 --cache-dir "$work/cache" "${@:3}" 2> "$work/eval.err" |
    sed -nE 's/^loss ([0-9.]+) .*/\1/p'
}
a=$(eval_loss "$trained" "$corpus")
grep -q "^tokenized" "$work/eval.err" || fail "the first eval did not tokenize"
again=$(eval_loss "$trained" "$corpus")
grep -q "^tokenized" "$work/eval.err" && fail "the second eval tokenized again instead of using the cache"
[[ "$again" == "$a" ]] || fail "the same eval gave $a, then $again"
b=$(eval_loss "$gguf" "$corpus")
awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a > 0 && d < 0.01 * a) }' ||
  fail "eval loss on the checkpoint ($a) and on the GGUF ($b) differ"
echo "eval: checkpoint $a, GGUF $b"

# 5. Other formats through eval: the corpus as CSV (quoted, multi-line cells).
{ echo 'id,text'; n=0; while IFS= read -r line; do n=$((n + 1)); printf '%d,"%s"\n' "$n" "${line//\"/\"\"}"; done < "$corpus"; } > "$work/corpus.csv"
c=$(eval_loss "$trained" "$work/corpus.csv" --format csv)
[[ -n "$c" ]] || fail "eval on CSV failed: $(cat "$work/eval.err")"
echo "PASS"
