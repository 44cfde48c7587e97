#!/usr/bin/env bash
# Runs a command that must fail with exit status 1 and an error line matching PATTERN (ERE) on
# stderr, without crashing (a signal or another status is a failure too).
# Usage: expect_error.sh PATTERN COMMAND [ARGS...]
set -uo pipefail
pattern=$1
shift
stderr=$("$@" 2>&1 >/dev/null)
status=$?
echo "$stderr"
[[ $status -eq 1 ]] || { echo "FAIL: exit status $status, expected 1" >&2; exit 1; }
grep -Eq "$pattern" <<<"$stderr" || { echo "FAIL: stderr does not match /$pattern/" >&2; exit 1; }
echo "PASS: failed cleanly"
