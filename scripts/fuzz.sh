#!/usr/bin/env bash
# Builds the libFuzzer targets with the `fuzz` CMake preset (clang, ASan + UBSan) and runs each
# for a bounded time. Usage: scripts/fuzz.sh [SECONDS] [TARGET]
#   SECONDS  per target (default 60)
#   TARGET   gguf | tokenizer | parquet | records | tool_call | json_schema | gbnf | all (default all: each target runs SECONDS)
# The tokenizer target also fuzzes the real Qwen3 tokenizer when tools/fetch_qwen_tokenizer.sh
# can provide it (or KIPP_TOKENIZER_DIR is set); otherwise only the small hand-made one.
# parquet fuzzes the Parquet reader and the Parquet dataset source (seeds: fuzz/parquet_seeds.mjs
# and three tools/parquet_fixtures files); records the JSONL / JSON / CSV / text / Alpaca /
# ShareGPT / OpenAI record readers (the first input byte picks the format; see records_fuzz.cpp);
# tool_call the server's tool-call parser (any cut of the text parses as the whole does);
# json_schema and gbnf compile the input as a JSON Schema or a GBNF grammar and walk a matcher
# through what compiles.
# Exits non-zero when a fuzzer finds a crash, leak, timeout or sanitizer report; the input
# that triggered it is left as build/fuzz/artifacts/TARGET/crash-* (rerun: build/fuzz/fuzz/TARGET_fuzz FILE).
# New interesting inputs accumulate in build/fuzz/corpus/TARGET; fuzz/corpus/TARGET holds the seeds.
set -euo pipefail

seconds="${1:-60}"
which="${2:-all}"
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -lt 1 ]; then
  echo "usage: $0 [SECONDS] [gguf|tokenizer|parquet|records|tool_call|json_schema|gbnf|all]  (SECONDS a positive whole number, default 60)" >&2
  exit 2
fi
case "$which" in
  gguf) targets=(gguf) ;;
  tokenizer) targets=(tokenizer) ;;
  parquet) targets=(parquet) ;;
  records) targets=(records) ;;
  tool_call) targets=(tool_call) ;;
  json_schema) targets=(json_schema) ;;
  gbnf) targets=(gbnf) ;;
  all) targets=(gguf tokenizer parquet records tool_call json_schema gbnf) ;;
  *) echo "usage: $0 [SECONDS] [gguf|tokenizer|parquet|records|tool_call|json_schema|gbnf|all]  (unknown target '$which')" >&2; exit 2 ;;
esac

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
cmake --preset fuzz >/dev/null
for target in "${targets[@]}"; do
  cmake --build --preset fuzz --target "${target}_fuzz" -j "${KIPP_FUZZ_BUILD_JOBS:-2}"
done

for target in "${targets[@]}"; do
  corpus="build/fuzz/corpus/$target"
  artifacts="build/fuzz/artifacts/$target"
  mkdir -p "$corpus" "$artifacts"
  extra=()
  case "$target" in
    gguf) extra=(-max_len=65536 -dict=fuzz/gguf.dict) ;;
    parquet) extra=(-max_len=16384 -dict=fuzz/parquet.dict) ;;  # the seeds are up to ~11 KB
    records) extra=(-max_len=4096 -dict=fuzz/records.dict) ;;
    tool_call) extra=(-max_len=4096 -dict=fuzz/tool_call.dict) ;;
    json_schema) extra=(-max_len=2048 -dict=fuzz/json_schema.dict) ;;
    gbnf) extra=(-max_len=2048 -dict=fuzz/gbnf.dict) ;;
    tokenizer)
      extra=(-max_len=4096 -dict=fuzz/tokenizer.dict)
      if [ -z "${KIPP_TOKENIZER_DIR:-}" ]; then
        if dir="$(tools/fetch_qwen_tokenizer.sh 2>/dev/null | tail -n1)" && [ -f "$dir/tokenizer.json" ]; then
          export KIPP_TOKENIZER_DIR="$dir"
        else
          echo "fuzz: the real Qwen3 tokenizer is unavailable; fuzzing the small hand-made one only" >&2
        fi
      fi
      ;;
  esac
  echo "fuzz: running ${target}_fuzz for ${seconds}s"
  "build/fuzz/fuzz/${target}_fuzz" \
    "${extra[@]}" \
    -max_total_time="$seconds" \
    -timeout=10 \
    -rss_limit_mb=2048 \
    -artifact_prefix="$artifacts/" \
    -print_final_stats=1 \
    "$corpus" "fuzz/corpus/$target"
  echo "fuzz: ${target}_fuzz found nothing in ${seconds}s"
done
