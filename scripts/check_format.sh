#!/usr/bin/env bash
# Fails, naming the files, when a C++ or CUDA source under src/, include/, tests/, bench/ or fuzz/ differs
# from what clang-format makes of it with the repository's .clang-format.
# Usage: scripts/check_format.sh [--fix | --selftest]
# --selftest first shows that a misformatted file is reported, then checks the tree.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "check_format: clang-format not found (scripts/setup.sh installs it)" >&2; exit 1; }
patterns=(src include tests bench fuzz)
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files -- "${patterns[@]}" | grep -E '\.(cpp|h|cu|cuh)$')
else
  mapfile -t files < <(find "${patterns[@]}" \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) | sort)
fi
if [ "${1:-}" = "--selftest" ]; then
  scratch="$(mktemp -d)"
  trap 'rm -rf "$scratch"' EXIT
  cp .clang-format "$scratch/"
  printf 'int  main( ){return 0;}\n' >"$scratch/misformatted.cpp"
  if clang-format --dry-run -Werror "$scratch/misformatted.cpp" >/dev/null 2>&1; then
    echo "check_format: self-test failed: a misformatted file was not reported" >&2
    exit 1
  fi
fi
if [ "${1:-}" = "--fix" ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ "${#bad[@]}" -gt 0 ]; then
  echo "check_format: ${#bad[@]} of ${#files[@]} files are not clang-formatted (scripts/check_format.sh --fix):"
  printf '  %s\n' "${bad[@]}"
  exit 1
fi
echo "check_format: ${#files[@]} files formatted"
