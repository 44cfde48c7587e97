#!/usr/bin/env bash
# build_webui.sh: rebuild the chat page `kipp serve` serves (webui/): `npm ci` (exactly the
# lock file's packages, no install scripts), type check, `vite build`, then webui/scripts/pack.mjs
# writes the gzip files and the sources' SHA-256 listing into webui/dist/, which is committed and
# embedded in the kipp binary by CMake. Needs Node.js 20+ and npm. Commit webui/dist afterwards;
# the webui_dist_current test fails while it lags behind webui/'s sources.
#
# Usage: scripts/build_webui.sh
set -euo pipefail

case "${1:-}" in
  -h|--help)
    sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
esac
[[ $# -eq 0 ]] || { echo "build_webui: error: no arguments expected" >&2; exit 2; }
command -v npm >/dev/null 2>&1 || { echo "build_webui: error: npm not found on PATH (install Node.js 20+)" >&2; exit 1; }

cd "$(dirname "${BASH_SOURCE[0]}")/../webui"
npm ci --ignore-scripts --no-audit --no-fund
npm run build
