#!/usr/bin/env bash
# Builds the corpus and the benchmark, runs it and writes bench/results/tokenizer.json (the
# figures plus the machine, the command and the corpus hashes).
# Usage: bench/run_tokenizer_bench.sh [BUILD_DIR] [REPEATS]   (defaults: build/release, 5)
# Run it on an otherwise idle machine: every figure is single-run wall time (median of REPEATS).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build/release}"
repeats="${2:-5}"
cd "$root"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" --target tokenizer_bench -j "${KIPP_BUILD_JOBS:-2}" >/dev/null
corpus="$build/bench-corpus"
corpus_report="$(python3 bench/make_tokenizer_corpus.py "$corpus")"
tokenizer_dir="$(tools/fetch_qwen_tokenizer.sh | tail -n1)"
raw="$(mktemp)"
trap 'rm -f "$raw"' EXIT
"$build/bench/tokenizer_bench" --corpus "$corpus" --tokenizer "$tokenizer_dir" --repeats "$repeats" --out "$raw"
python3 - "$raw" "$repeats" "$corpus_report" <<'PY'
import json, platform, subprocess, sys
raw, repeats, corpus = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
result = json.load(open(raw))
result["command"] = f"bench/run_tokenizer_bench.sh BUILD_DIR {repeats}"
result["corpus"] = {"builder": "bench/make_tokenizer_corpus.py", "sections": corpus}
result["machine"]["kernel"] = platform.release()
result["compiler"] = subprocess.run(["c++", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
result["git_commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
json.dump(result, open("bench/results/tokenizer.json", "w"), indent=2)
print("wrote bench/results/tokenizer.json")
PY
