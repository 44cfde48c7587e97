#!/usr/bin/env bash
# Installs every Debian package Kipp needs to build, test and run its tooling
# (--runtime: only what building and running `kipp` needs, for the quickstart).
# Idempotent: packages already present are skipped; safe to run on every CI start.
set -euo pipefail

# What building and running `kipp` needs (scripts/setup.sh --runtime installs only these).
RUNTIME_PACKAGES=(
  build-essential cmake pkg-config
  nlohmann-json3-dev libcli11-dev libssl-dev libcurl4-openssl-dev libxxhash-dev libpcre2-dev libutf8proc-dev libedit-dev
  # training: FP32 GEMM (OpenMP OpenBLAS, which also makes it the system BLAS PyTorch uses), YAML configs
  libopenblas-openmp-dev libyaml-cpp-dev
  # dataset readers: Parquet codecs (snappy, zstd; gzip through zlib)
  libsnappy-dev libzstd-dev zlib1g-dev
  # SIMD kernels with runtime dispatch; the OpenAI-compatible server
  libhwy-dev libcpp-httplib-dev
  # the quickstart's training corpus
  fortunes
)
PACKAGES=("${RUNTIME_PACKAGES[@]}")
if [ "${1:-}" != "--runtime" ]; then
  PACKAGES+=(
    git
    # tests, benchmarks, the ASan/fuzz presets
    libgtest-dev libgmock-dev libbenchmark-dev clang clang-format libclang-rt-14-dev
    # interactive `kipp chat` is tested under tmux
    tmux
    # tooling: PyTorch reference, synthetic checkpoints, test fixtures
    python3 python3-numpy python3-torch python3-jinja2 libopenblas0-openmp
    curl ca-certificates
  )
  # Node.js and npm may come from Debian or from NodeSource (whose nodejs provides npm and
  # conflicts with Debian's npm package): install Debian's only when the commands are absent.
  command -v node >/dev/null || PACKAGES+=(nodejs)
  command -v npm >/dev/null || PACKAGES+=(npm)
fi

missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  SUDO="sudo"
fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
