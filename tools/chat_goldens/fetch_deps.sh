#!/usr/bin/env bash
# fetch_deps.sh: fetch the pinned Jinja implementation the chat golden generator runs.
#
# Fetches npm @huggingface/jinja at the exact version package.json pins (0.5.13) with
# `npm pack`, checks the tarball against npm's published sha512 integrity and a pinned
# SHA-256, and extracts it into a node_modules tree in the cache (outside the source tree):
#   CACHE_DIR/npm/chat-goldens-0.5.13/node_modules/@huggingface/jinja
# The package has no runtime dependencies. Idempotent and safe to run concurrently (private
# temporary directory, atomic rename). The last line of stdout is the node_modules directory.
#
# Usage: tools/chat_goldens/fetch_deps.sh [CACHE_DIR]
#   CACHE_DIR  cache root (default: ${KIPP_CACHE_DIR:-$HOME/.cache/kipp}).
set -euo pipefail

readonly PKG_NAME='@huggingface/jinja'
readonly PKG_VERSION='0.5.13'
readonly TGZ_NAME='huggingface-jinja-0.5.13.tgz'
# `npm view @huggingface/jinja@0.5.13 dist.integrity`
readonly TGZ_SHA512_B64='jM17MqFily1iyT/1LD3r5w8/CZiyapVB0+7vOw48PfVtzyKsXStmHE4jVTyDAD05Tqv3un1xrS9ILUU1ugQAYQ=='
readonly TGZ_SHA256='f191fb8332ae4d5cdf73682ced93ccc58c25021cf338ae0795f7652985c2c0e1'

die() {
  echo "fetch_deps: error: $*" >&2
  exit 1
}

case "${1:-}" in
  -h|--help)
    sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
esac
[[ $# -le 1 ]] || die "too many arguments (usage: $0 [CACHE_DIR])"

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=SCRIPTDIR/../lib/npm_fetch.sh
source "$here/../lib/npm_fetch.sh"
grep -q "\"${PKG_NAME}\": \"${PKG_VERSION}\"" "$here/package.json" ||
  die "package.json does not pin ${PKG_NAME} ${PKG_VERSION}; update this script's pins with it"
cache_root="${1:-${KIPP_CACHE_DIR:-${HOME:?HOME is not set}/.cache/kipp}}"
cache_root="${cache_root%/}"
dest="${cache_root}/npm/chat-goldens-${PKG_VERSION}"
modules="${dest}/node_modules"

for tool in sha256sum openssl base64 tar; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool not found on PATH"
done
valid_tree() {
  local dir="$1"
  [[ -f "$dir/.verified" && -f "$dir/node_modules/@huggingface/jinja/package.json" &&
     -f "$dir/node_modules/@huggingface/jinja/dist/index.js" ]] || return 1
  [[ "$(sha256_of "$dir/$TGZ_NAME")" == "$TGZ_SHA256" ]] || return 1
}

if valid_tree "$dest"; then
  echo "$modules"
  exit 0
fi

command -v npm >/dev/null 2>&1 || die "npm not found on PATH (install Node.js and npm)"
start_fetch chat-goldens

pack_verified "$PKG_NAME" "$PKG_VERSION" "$TGZ_NAME" "$TGZ_SHA512_B64" "$TGZ_SHA256"

stage="$tmp/stage"
mkdir -p "$stage/node_modules/@huggingface/jinja"
tar -xzf "$tmp/$TGZ_NAME" -C "$stage/node_modules/@huggingface/jinja" --strip-components=1 --no-same-owner ||
  die "cannot extract $TGZ_NAME"
mv "$tmp/$TGZ_NAME" "$stage/$TGZ_NAME"
printf '%s  %s\n' "$TGZ_SHA256" "$TGZ_NAME" >"$stage/.verified"

install_stage "$stage" package

echo "$modules"
