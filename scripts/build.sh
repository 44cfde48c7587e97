#!/usr/bin/env bash
# Configures and builds one CMake preset (default: release), or only the named targets.
# Usage: scripts/build.sh [PRESET [TARGET...]]
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-release}"
targets=("${@:2}")
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" -j "$(nproc)" ${targets[@]:+--target "${targets[@]}"}
