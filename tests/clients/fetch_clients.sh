#!/usr/bin/env bash
# fetch_clients.sh: install the pinned client packages the agent and structured-output tests
# drive (package.json + package-lock.json beside this script: the official openai client, the
# Vercel AI SDK with its OpenAI-compatible provider, zod, ajv and ajv-formats, and playwright-core,
# which drives Chromium in the chat page's browser test) into the cache,
# outside the source tree:
#   CACHE_DIR/npm/clients-LOCKHASH/node_modules
# `npm ci` installs exactly the lock file's tree and checks every tarball against its sha512
# integrity; no install scripts run. The folder is named by the lock file's SHA-256, so a changed
# lock gets a fresh tree. Idempotent and safe to run concurrently (private temporary directory,
# atomic rename). The last line of stdout is the node_modules directory.
#
# Usage: tests/clients/fetch_clients.sh [CACHE_DIR]
#   CACHE_DIR  cache root (default: ${KIPP_CACHE_DIR:-$HOME/.cache/kipp}).
set -euo pipefail

die() {
  echo "fetch_clients: error: $*" >&2
  exit 1
}

case "${1:-}" in
  -h|--help)
    sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
esac
[[ $# -le 1 ]] || die "too many arguments (usage: $0 [CACHE_DIR])"

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=SCRIPTDIR/../../tools/lib/npm_fetch.sh
source "$here/../../tools/lib/npm_fetch.sh"
cache_root="${1:-${KIPP_CACHE_DIR:-${HOME:?HOME is not set}/.cache/kipp}}"
cache_root="${cache_root%/}"
lock_hash="$(sha256_of "$here/package-lock.json")"
dest="${cache_root}/npm/clients-${lock_hash:0:16}"
modules="${dest}/node_modules"

valid_tree() {
  local dir="$1" pkg
  [[ -f "$dir/.verified" ]] || return 1
  for pkg in openai ai @ai-sdk/openai-compatible zod ajv ajv-formats playwright-core; do
    [[ -f "$dir/node_modules/$pkg/package.json" ]] || return 1
  done
}

if valid_tree "$dest"; then
  echo "$modules"
  exit 0
fi

command -v npm >/dev/null 2>&1 || die "npm not found on PATH (install Node.js and npm)"
start_fetch clients
stage="$tmp/stage"
mkdir -p "$stage"
cp "$here/package.json" "$here/package-lock.json" "$stage/"
echo "fetch_clients: npm ci -> $dest" >&2
if ! (cd "$stage" && npm ci --ignore-scripts --no-audit --no-fund >"$tmp/npm.log" 2>&1); then
  die "npm ci failed: $(grep -m1 -i 'err' "$tmp/npm.log" || tail -n1 "$tmp/npm.log")"
fi
echo "$lock_hash  package-lock.json" >"$stage/.verified"
install_stage "$stage" "client packages"

echo "$modules"
