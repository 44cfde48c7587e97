#!/usr/bin/env bash
# fetch_deps.sh: install the pinned packages the Parquet fixture generator runs.
#
# Installs npm @duckdb/node-api and parquet-wasm at the exact versions package.json pins
# (1.5.6-r.1 and 0.8.0) with `npm ci` from the committed package-lock.json (npm checks every
# tarball against the lock's sha512 integrity; the native DuckDB binding comes as the platform's
# optional package, parquet-wasm is WebAssembly with no dependencies) into a node_modules tree in
# the cache, outside the source tree:
#   CACHE_DIR/npm/parquet-fixtures-1.5.6-r.1/node_modules/{@duckdb/node-api,parquet-wasm}
# Idempotent and safe to run concurrently (private temporary directory, atomic rename); a tree
# installed from another package-lock.json is replaced. The last line of stdout is the
# node_modules directory.
#
# Usage: tools/parquet_fixtures/fetch_deps.sh [CACHE_DIR]
#   CACHE_DIR  cache root (default: ${KIPP_CACHE_DIR:-$HOME/.cache/kipp}).
set -euo pipefail

readonly PKG_NAME='@duckdb/node-api'
readonly PKG_VERSION='1.5.6-r.1'
readonly WASM_NAME='parquet-wasm'
readonly WASM_VERSION='0.8.0'

die() {
  echo "fetch_deps: error: $*" >&2
  exit 1
}

case "${1:-}" in
  -h|--help)
    sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
esac
[[ $# -le 1 ]] || die "too many arguments (usage: $0 [CACHE_DIR])"

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=SCRIPTDIR/../lib/npm_fetch.sh
source "$here/../lib/npm_fetch.sh"
grep -q "\"${PKG_NAME}\": \"${PKG_VERSION}\"" "$here/package.json" ||
  die "package.json does not pin ${PKG_NAME} ${PKG_VERSION}; update this script's pin with it"
grep -q "\"${WASM_NAME}\": \"${WASM_VERSION}\"" "$here/package.json" ||
  die "package.json does not pin ${WASM_NAME} ${WASM_VERSION}; update this script's pin with it"
[[ -f "$here/package-lock.json" ]] || die "package-lock.json is missing next to package.json"
cache_root="${1:-${KIPP_CACHE_DIR:-${HOME:?HOME is not set}/.cache/kipp}}"
cache_root="${cache_root%/}"
dest="${cache_root}/npm/parquet-fixtures-${PKG_VERSION}"
modules="${dest}/node_modules"

command -v sha256sum >/dev/null 2>&1 || die "sha256sum not found on PATH"
lock_sha256="$(sha256_of "$here/package-lock.json")"
# A tree is valid when it was installed from this very lockfile and holds the API, a binding and
# parquet-wasm.
valid_tree() {
  local dir="$1"
  [[ -f "$dir/.verified" && "$(cat "$dir/.verified")" == "$lock_sha256" ]] || return 1
  [[ -f "$dir/node_modules/@duckdb/node-api/package.json" &&
     -d "$dir/node_modules/@duckdb/node-bindings" ]] || return 1
  grep -q "\"version\": \"${PKG_VERSION}\"" "$dir/node_modules/@duckdb/node-api/package.json" || return 1
  [[ -f "$dir/node_modules/${WASM_NAME}/node/parquet_wasm_bg.wasm" ]] || return 1
  grep -q "\"version\": \"${WASM_VERSION}\"" "$dir/node_modules/${WASM_NAME}/package.json" || return 1
}

if valid_tree "$dest"; then
  echo "$modules"
  exit 0
fi

command -v npm >/dev/null 2>&1 || die "npm not found on PATH (install Node.js and npm)"
start_fetch parquet-fixtures

stage="$tmp/stage"
mkdir -p "$stage"
cp "$here/package.json" "$here/package-lock.json" "$stage/"
echo "fetch_deps: npm ci ${PKG_NAME}@${PKG_VERSION} ${WASM_NAME}@${WASM_VERSION} -> $dest" >&2
if ! (cd "$stage" && npm ci --no-audit --no-fund --ignore-scripts >"$tmp/npm.log" 2>&1); then
  die "npm ci failed: $(grep -m1 -i 'err' "$tmp/npm.log" || tail -n1 "$tmp/npm.log")"
fi
ls "$stage/node_modules/@duckdb/" | grep -q '^node-bindings-' ||
  die "npm installed no native DuckDB binding for this platform ($(uname -sm))"
[[ -f "$stage/node_modules/${WASM_NAME}/node/parquet_wasm_bg.wasm" ]] ||
  die "npm installed no ${WASM_NAME} WebAssembly module"
printf '%s\n' "$lock_sha256" >"$stage/.verified"

install_stage "$stage" "DuckDB Node API and parquet-wasm"

echo "$modules"
