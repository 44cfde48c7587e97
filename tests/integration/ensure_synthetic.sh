#!/usr/bin/env bash
# Makes a synthetic checkpoint with tools/make_synthetic.py unless OUT already holds one made
# by the same generator with the same arguments (a stamp records both), so repeated test runs
# reuse the 1.2 GB 0.6b model. Usage: ensure_synthetic.sh OUT [make_synthetic.py args...]
# KIPP_PYTHON names the python3 with numpy (default /usr/bin/python3).
set -euo pipefail
source_dir="$(cd "$(dirname "$0")/../.." && pwd)"
out="$1"; shift
stamp="$(cat "$source_dir/tools/make_synthetic.py" "$source_dir/registry/qwen3_dense.json" | sha256sum | cut -c1-16) $*"
if [ -f "$out/.kipp-stamp" ] && [ "$(cat "$out/.kipp-stamp")" = "$stamp" ]; then
  echo "reusing $out"
  exit 0
fi
rm -rf "$out"
"${KIPP_PYTHON:-/usr/bin/python3}" "$source_dir/tools/make_synthetic.py" --out "$out" "$@"
printf '%s' "$stamp" > "$out/.kipp-stamp"
