#!/usr/bin/env bash
# gpu_bundle.sh: builds the `gpu` preset (kipp and the gate programs of scripts/gpu_gates.txt that
# are targets) and packs what a GPU machine without Kipp's libraries needs into .gpu/bundle.tar.xz:
#   bin/        the programs, stripped
#   lib/        every shared library they link (ldd), except the C/C++ runtime (glibc, libstdc++,
#               libgcc_s), the CUDA driver and every library of the CUDA toolkit (cuBLAS, cuBLASLt,
#               cuDNN, NCCL, ...): the GPU machine has its own
#   tokenizer/  the Qwen3 tokenizer files, for tools/make_synthetic.py there
#   BUILD_INFO  the commit, the toolkit, the architectures, which gate programs were built
#   SOURCES.sha256  the sources they were built from
# The scripts it runs there (scripts/gpu_check.sh, tools/, bench/) travel with the working tree.
# Fails when .gpu/ is over 56 MiB (what travels to a borrowed GPU machine, the checkout included, is
# limited to 64 MiB).
#
# Usage: scripts/gpu_bundle.sh [--jobs N] [--no-build]
#   --jobs N     build parallelism (default: the number of cores)
#   --no-build   pack what build/gpu already holds
set -euo pipefail

readonly LIMIT_MIB=56
# Linked libraries the GPU machine provides: glibc's (which must match its loader), the C++
# runtime, the CUDA driver and CUDA libraries; also anything under the local CUDA toolkit (below).
readonly SYSTEM_LIBS='^(linux-vdso|ld-linux[-a-z0-9_]*|libc|libm|libmvec|libdl|librt|libpthread|libresolv|libutil|libanl|libnsl|libnss_[a-z]*|libthread_db|libBrokenLocale|libstdc\+\+|libgcc_s|libcuda|libcublas|libcublasLt|libcudnn[a-z_]*|libnccl)\.so'

die() { echo "gpu_bundle: error: $*" >&2; exit 1; }

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
jobs="$(nproc)"
build=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --jobs) [[ $# -ge 2 ]] || die "--jobs needs a value"; jobs="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done

bdir="$repo/build/gpu"
if [[ "$build" == 1 ]]; then
  cmake --preset gpu >"$repo/build/gpu-configure.log" 2>&1 || { tail -20 "$repo/build/gpu-configure.log" >&2; die "cmake --preset gpu failed"; }
fi
[[ -f "$bdir/CMakeCache.txt" ]] || die "build/gpu is not configured (run without --no-build)"
targets="$(cmake --build "$bdir" --target help 2>/dev/null)" || die "cannot list the targets of build/gpu"
grep -qw kipp_cuda <<<"$targets" || die "build/gpu has no CUDA backend (nvcc not found, or KIPP_CUDA off)"

# The programs: kipp, and each {bin}/NAME of the gate table that is a target of this build.
mapfile -t wanted < <(grep -v '^[[:space:]]*\(#\|$\)' scripts/gpu_gates.txt | awk '{print $4}' |
                      sed -n 's|^{bin}/||p' | sort -u)
programs=(kipp)
not_built=()
for p in "${wanted[@]}"; do
  [[ "$p" == kipp ]] && continue
  if grep -Eq "(^|[ :])$p(:|$| )" <<<"$targets"; then programs+=("$p"); else not_built+=("$p"); fi
done
if [[ "$build" == 1 ]]; then
  echo "gpu_bundle: building ${programs[*]}"
  cmake --build --preset gpu -j"$jobs" --target "${programs[@]}" || die "the gpu build failed"
fi

stage="$bdir/bundle"
rm -rf "$stage"
mkdir -p "$stage/bin" "$stage/lib" "$stage/tokenizer"
cache_value() { sed -n "s/^$1:[A-Z]*=//p" "$bdir/CMakeCache.txt" | head -n1; }
nvcc="$(cache_value CMAKE_CUDA_COMPILER)"
[[ -x "$nvcc" ]] || die "build/gpu names no nvcc (CMAKE_CUDA_COMPILER)"
cuda_root="$(realpath "$(dirname "$nvcc")/..")"
for p in "${programs[@]}"; do
  exe="$(find "$bdir" -path "$stage" -prune -o -type f -name "$p" -perm -u+x -print | head -n1)"
  [[ -n "$exe" ]] || die "built program $p not found under build/gpu"
  strip -o "$stage/bin/$p" "$exe"
  while read -r name arrow path _; do
    [[ "$arrow" == "=>" ]] || continue
    [[ "$path" != "not" ]] || die "$p needs $name, which this machine does not have"
    [[ "$name" =~ $SYSTEM_LIBS ]] && continue
    [[ "$(realpath "$path")" == "$cuda_root"/* ]] && continue
    [[ -f "$stage/lib/$name" ]] || cp -L "$path" "$stage/lib/$name"
  done < <(ldd "$exe")
done

tok_dir="$(bash tools/fetch_qwen_tokenizer.sh | tail -n1)" || die "cannot find the Qwen3 tokenizer (tools/fetch_qwen_tokenizer.sh)"
cp "$tok_dir/tokenizer.json" "$tok_dir/tokenizer_config.json" "$stage/tokenizer/"

{
  echo "commit $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m), $(ldd --version | head -n1)"
  echo "cuda $("$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'), architectures $(cache_value CMAKE_CUDA_ARCHITECTURES)"
  echo "programs ${programs[*]}"
  echo "not_built ${not_built[*]}"
} >"$stage/BUILD_INFO"

# What the programs were built from, so the check can tell a bundle older than the checkout beside it.
git ls-files -z -- CMakeLists.txt CMakePresets.json cmake include src tests/cuda tests/integration |
  xargs -0 sha256sum >"$stage/SOURCES.sha256" || die "cannot hash the sources"

mkdir -p .gpu
rm -f .gpu/bundle.tar.xz.tmp
tar -C "$stage" -cf - . | xz -T0 -6 >.gpu/bundle.tar.xz.tmp
mv .gpu/bundle.tar.xz.tmp .gpu/bundle.tar.xz
cp "$stage/BUILD_INFO" .gpu/BUILD_INFO

raw_kib="$(du -sk "$stage" | cut -f1)"
size_b="$(du -sb .gpu | cut -f1)"
echo "gpu_bundle: ${#programs[@]} programs, $(ls "$stage/lib" | wc -l) libraries, $((raw_kib / 1024)) MiB unpacked;" \
     ".gpu/ is $((size_b / 1048576)) MiB (limit $LIMIT_MIB MiB)"
[[ ${#not_built[@]} -eq 0 ]] || echo "gpu_bundle: not built (no such target yet): ${not_built[*]}"
((size_b <= LIMIT_MIB * 1048576)) || die ".gpu/ is over $LIMIT_MIB MiB"
