#!/usr/bin/env bash
# fetch_openai.sh: fetch the pinned official OpenAI Node client the server tests drive.
#
# Fetches npm openai@6.49.0 (no runtime dependencies; its optional peers ws/zod are not needed
# for HTTP use; supports Node 20) with `npm pack`, checks the tarball against npm's published
# sha512 integrity and a pinned SHA-256, and extracts it into a node_modules tree in the cache
# (outside the source tree):
#   CACHE_DIR/npm/openai-6.49.0/node_modules/openai
# Idempotent and safe to run concurrently (private temporary directory, atomic rename). The
# last line of stdout is the node_modules directory.
#
# Usage: tests/server/fetch_openai.sh [CACHE_DIR]
#   CACHE_DIR  cache root (default: ${KIPP_CACHE_DIR:-$HOME/.cache/kipp}).
set -euo pipefail

readonly PKG_NAME='openai'
readonly PKG_VERSION='6.49.0'
readonly TGZ_NAME='openai-6.49.0.tgz'
# `npm view openai@6.49.0 dist.integrity`
readonly TGZ_SHA512_B64='aYCc0C6L864eR6WSYIwQGyXriw/nIyZx0ObvhzOEVuk0zoBDpynjSbrionWI7q65B5H8jJX0DXR9snEzM6bfPg=='
readonly TGZ_SHA256='e48de0f4c5dbecebdeb864233f5ea49be07cd3e0ff3bd3e1e6745dc5e168cced'

die() {
  echo "fetch_openai: error: $*" >&2
  exit 1
}

case "${1:-}" in
  -h|--help)
    sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
esac
[[ $# -le 1 ]] || die "too many arguments (usage: $0 [CACHE_DIR])"

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=SCRIPTDIR/../../tools/lib/npm_fetch.sh
source "$here/../../tools/lib/npm_fetch.sh"
cache_root="${1:-${KIPP_CACHE_DIR:-${HOME:?HOME is not set}/.cache/kipp}}"
cache_root="${cache_root%/}"
dest="${cache_root}/npm/openai-${PKG_VERSION}"
modules="${dest}/node_modules"

for tool in sha256sum openssl base64 tar; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool not found on PATH"
done
valid_tree() {
  local dir="$1"
  [[ -f "$dir/.verified" && -f "$dir/node_modules/openai/package.json" &&
     -f "$dir/node_modules/openai/index.mjs" ]] || return 1
  grep -q "\"version\": \"${PKG_VERSION}\"" "$dir/node_modules/openai/package.json" || return 1
  [[ "$(sha256_of "$dir/$TGZ_NAME")" == "$TGZ_SHA256" ]] || return 1
}

if valid_tree "$dest"; then
  echo "$modules"
  exit 0
fi

command -v npm >/dev/null 2>&1 || die "npm not found on PATH (install Node.js and npm)"
start_fetch openai

pack_verified "$PKG_NAME" "$PKG_VERSION" "$TGZ_NAME" "$TGZ_SHA512_B64" "$TGZ_SHA256"

stage="$tmp/stage"
mkdir -p "$stage/node_modules/openai"
tar -xzf "$tmp/$TGZ_NAME" -C "$stage/node_modules/openai" --strip-components=1 --no-same-owner ||
  die "cannot extract $TGZ_NAME"
mv "$tmp/$TGZ_NAME" "$stage/$TGZ_NAME"
printf '%s  %s\n' "$TGZ_SHA256" "$TGZ_NAME" >"$stage/.verified"

install_stage "$stage" package

echo "$modules"
