#!/usr/bin/env bash
# A `--backend cuda` command: where a GPU is usable (nvidia-smi lists one) it must succeed; on
# any other machine it must fail cleanly with the one line that says why (expect_error.sh).
# Usage: cuda_or_error.sh PATTERN COMMAND [ARGS...]
set -uo pipefail
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  shift
  "$@" >/dev/null || { echo "FAIL: a GPU is present, but the command failed with status $?" >&2; exit 1; }
  echo "PASS: ran on the GPU"
  exit 0
fi
exec "$(dirname "$0")/expect_error.sh" "$@"
