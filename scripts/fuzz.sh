#!/usr/bin/env bash
# Builds the GGUF libFuzzer target with the `fuzz` CMake preset (clang, ASan + UBSan) and runs it
# for a bounded time. Usage: scripts/fuzz.sh [SECONDS]   (default 60)
# Exits non-zero when the fuzzer finds a crash, leak, timeout or sanitizer report; the input
# that triggered it is left as build/fuzz/artifacts/crash-* (rerun: build/fuzz/fuzz/gguf_fuzz FILE).
# New interesting inputs accumulate in build/fuzz/corpus/gguf; fuzz/corpus/gguf holds the seeds.
set -euo pipefail

seconds="${1:-60}"
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -lt 1 ]; then
  echo "usage: $0 [SECONDS]  (a positive whole number, default 60)" >&2
  exit 2
fi

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz --target gguf_fuzz -j "${KIPP_FUZZ_BUILD_JOBS:-2}"

corpus="build/fuzz/corpus/gguf"
artifacts="build/fuzz/artifacts"
mkdir -p "$corpus" "$artifacts"
echo "fuzz: running gguf_fuzz for ${seconds}s"
build/fuzz/fuzz/gguf_fuzz \
  -max_len=65536 \
  -max_total_time="$seconds" \
  -timeout=10 \
  -rss_limit_mb=2048 \
  -dict=fuzz/gguf.dict \
  -artifact_prefix="$artifacts/" \
  -print_final_stats=1 \
  "$corpus" fuzz/corpus/gguf
echo "fuzz: no crash in ${seconds}s"
