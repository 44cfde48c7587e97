#!/usr/bin/env bash
# The ARM64 build's gates on an x86-64 host: cross-builds the `aarch64` preset (Debian's cross
# compiler and :arm64 libraries, installed by scripts/setup.sh) and runs the tests labelled
# aarch64 (kernel unit tests with the neon table, the tiny model's engine gates) under
# qemu-aarch64. Emulation checks correctness only; it says nothing about speed on ARM.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset aarch64 >/dev/null
cmake --build --preset aarch64 -j 2 --target kipp kipp_kernel_tests engine_gates
ctest --preset aarch64 -j 2
