#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs dependencies, builds with warnings as
# errors, runs every test through CTest; with the release preset on an x86-64 host, then the
# ARM64 cross build's gates under qemu (scripts/test_aarch64.sh).
# Usage: scripts/test.sh [PRESET] (release|debug|asan)
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-release}"
bash scripts/setup.sh
bash scripts/build.sh "$preset"
ctest --preset "$preset" -j "$(nproc)"
if [ "$preset" = release ] && [ "$(uname -m)" = x86_64 ]; then
  bash scripts/test_aarch64.sh
fi
