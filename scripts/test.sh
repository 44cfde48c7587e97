#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs dependencies, builds with warnings as
# errors, runs every test through CTest. Usage: scripts/test.sh [PRESET] (release|debug|asan)
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-release}"
bash scripts/setup.sh
bash scripts/build.sh "$preset"
ctest --preset "$preset" -j "$(nproc)"
